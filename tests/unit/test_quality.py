"""The Great Expectations suites catch each kind of bad document and chunk table."""

from __future__ import annotations

import pandas as pd

from ragloom.quality import check_chunks, check_documents, check_graph, check_vectors


def _docs():
    return pd.DataFrame({"document_id": ["d1", "d2"], "text": ["alpha beta gamma", "delta"],
                         "content_hash": ["h1", "h2"]})


def _chunks(**overrides):
    frame = pd.DataFrame({
        "chunk_id": ["c1", "c2", "c3"], "document_id": ["d1", "d1", "d2"],
        "text": ["alpha beta", "gamma", "delta"], "token_count": [2, 1, 1],
        "start": [0, 11, 0], "end": [10, 16, 5], "parent_id": [None, "c1", None],
        "metadata": ["{}", "{}", "{}"],
    })
    for column, (row, value) in overrides.items():
        frame.loc[row, column] = value
    return frame


def _failed(outcome):
    return {o.name: o.unexpected_count for o in outcome.failed()}


def test_clean_tables_pass():
    assert check_documents(_docs()).success
    outcome = check_chunks(_chunks(), _docs(), max_tokens=256)
    assert outcome.success, _failed(outcome)


def test_document_problems_are_counted():
    docs = pd.DataFrame({"document_id": ["d1", "d1"], "text": ["x", ""], "content_hash": ["h", None]})
    assert _failed(check_documents(docs)) == {"unique document ids": 2, "text not empty": 1,
                                               "content hash present": 1}


def test_each_chunk_rule_fails_on_its_own_defect():
    cases = {
        "unique chunk ids": {"chunk_id": (1, "c1")},
        "token count within model limit": {"token_count": (0, 999)},
        "span inside its document": {"end": (2, 50)},
        "parent id exists": {"parent_id": (1, "nope")},
    }
    for rule, override in cases.items():
        failed = _failed(check_chunks(_chunks(**override), _docs(), max_tokens=256))
        assert rule in failed, (rule, failed)


def test_truncated_upper_levels_may_exceed_the_limit():
    chunks = _chunks(token_count=(0, 999), metadata=(0, '{"embed_truncated": true}'))
    assert check_chunks(chunks, _docs(), max_tokens=256).success


def test_lost_document_is_named():
    chunks = _chunks().iloc[:2]
    outcome = check_chunks(chunks, _docs(), max_tokens=256)
    lost = [o for o in outcome.failed() if o.name == "no document lost between parse and chunk"]
    assert lost and lost[0].examples == ["d2"]


def test_empty_corpus_passes():
    # every document deleted: no documents, no chunks (the tables keep their columns)
    docs, chunks = _docs().iloc[:0], _chunks().iloc[:0]
    assert check_documents(docs).success
    assert check_chunks(chunks, docs, max_tokens=256).success


def _examples(outcome):
    return {o.name: o.examples for o in outcome.failed()}


def test_vectors_suite_names_missing_and_extra_chunks_and_a_wrong_dimension():
    assert check_vectors({"a", "b"}, {"a", "b"}, 384, 384).success
    outcome = check_vectors({"a", "b", "c"}, {"a", "x"}, 768, 384)
    assert _examples(outcome) == {"every current chunk is stored": ["b", "c"], "nothing else is stored": ["x"],
                                  "vector dimension is the model's": [768]}
    assert _failed(outcome)["every current chunk is stored"] == 2


def test_vectors_suite_wants_a_vector_unless_nothing_is_current():
    assert check_vectors(set(), set(), None, 384).success  # an emptied collection
    assert "vector dimension is the model's" in _failed(check_vectors({"a"}, {"a"}, None, 384))


def test_graph_suite_names_stale_chunks_and_counts_broken_records():
    assert check_graph({"a", "b"}, {"a"}, 0, 0).success  # the graph may lag behind (chunks not yet extracted)
    outcome = check_graph({"a"}, {"a", "old"}, 2, 1)
    assert _examples(outcome)["every chunk in the graph is current"] == ["old"]
    assert set(_failed(outcome)) == {"every chunk in the graph is current", "no empty entity names",
                                     "no dangling mentions"}
    assert check_graph(set(), set(), 0, 0).success
