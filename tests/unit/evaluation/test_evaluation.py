"""The evaluation code itself: ranx metrics on hand-checked runs, span-overlap relevance, collapse, bootstrap,
dataset loading, baselines and the report files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragloom.errors import ConfigError, ParseError
from ragloom.evaluation import (
    METRICS,
    Hit,
    Passage,
    bootstrap_ci,
    document_ranking,
    document_scores,
    load_dataset,
    paired_difference_ci,
    passage_ranking,
    passage_scores,
    span_matches,
)
from ragloom.evaluation.baselines import BM25Baseline, DenseBaseline, document_units, paragraph_units
from ragloom.evaluation.datasets import Query, read_corpus
from ragloom.evaluation.metrics import choose_with_evidence
from ragloom.evaluation.report import EvalReport, SystemResult
from ragloom.evaluation.runner import hits_of, namespace_settings
from ragloom.settings import Settings
from ragloom.types import RetrievedItem

SHARED_DATA = Path(__file__).resolve().parents[4] / "shared" / "data"


def chunks(*document_ids: str) -> list[Hit]:
    return [Hit(f"c{i}", d) for i, d in enumerate(document_ids)]


# span overlap ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "expected"), [
    ((0, 10), (10, 20), False),  # touching: no shared character
    ((10, 20), (0, 10), False),
    ((0, 10), (20, 30), False),  # apart
    ((0, 100), (40, 50), True),  # containment: the short one is wholly inside
    ((40, 50), (0, 100), True),
    ((0, 10), (0, 10), True),  # identical
    ((0, 10), (5, 100), True),  # overlap 5 = half of the shorter (10): the boundary counts
    ((0, 10), (6, 100), False),  # overlap 4 < 5
    ((0, 9), (4, 100), True),  # odd length: overlap 5 >= 4.5
    ((0, 9), (5, 100), False),  # overlap 4 < 4.5
    ((0, 1000), (990, 1002), True),  # overlap 10 of a 12-char span, although tiny next to the long one
])
def test_span_matches(a: tuple[int, int], b: tuple[int, int], expected: bool) -> None:
    assert span_matches(*a, *b) is expected


GOLD = [Passage("p1", "D", 0, 100), Passage("p2", "D", 200, 260)]


def test_passage_ranking_keeps_chunk_positions() -> None:
    hits = [Hit("h0", "D", 100, 200),  # touches p1 at 100 and p2 at 200: matches nothing
            Hit("h1", "E", 0, 100),  # same span as p1 but another document
            Hit("h2", "D", 150, 400),  # holds all of p2 (the shorter)
            Hit("h3", "D", 40, 90)]  # 50 chars of p1, all of itself
    assert passage_ranking(hits, GOLD) == ["~0", "~1", "p2", "p1"]


def test_passage_ranking_credits_each_passage_once_and_expands_a_chunk_holding_several() -> None:
    assert passage_ranking([Hit("a", "D", 0, 100), Hit("b", "D", 0, 100)], GOLD) == ["p1", "~1"]
    assert passage_ranking([Hit("a", "D", 0, 300), Hit("b", "D", 0, 50)], GOLD) == ["p1", "p2", "~1"]


# metrics (ranx) on hand-checked runs -----------------------------------------------------------------------

def test_document_collapse_keeps_first_rank() -> None:
    assert document_ranking(chunks("d2", "d1", "d1", "d3", "d2")) == ["d2", "d1", "d3"]


def test_document_scores_hand_checked() -> None:
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d4": 1}, "q3": {"d1": 1}}
    runs = {
        # documents after collapse: d2, d1, d3 -> relevant at ranks 2 and 3
        "q1": chunks("d2", "d1", "d1", "d3"),
        # d4 at rank 6: outside @5, inside @10
        "q2": chunks("d5", "d6", "d7", "d8", "d9", "d4"),
        # q3: nothing retrieved (absent from the run)
        "q9": chunks("d1"),  # a query without judgements is ignored
    }
    s = document_scores(runs, qrels)
    # q1: recall@5 = recall@10 = 2/2; DCG = 1/log2(3) + 1/log2(4) = 0.630930 + 0.5 = 1.130930,
    #     IDCG = 1 + 1/log2(3) = 1.630930 -> nDCG@10 = 0.693426; first relevant at rank 2 -> MRR 0.5.
    #     (Without the collapse d3 would sit at rank 4 and nDCG would be 0.6309+0.4307 over 1.6309 = 0.6510.)
    # q2: recall@5 = 0, recall@10 = 1, nDCG@10 = 1/log2(7) = 0.356207, MRR@10 = 1/6.
    # q3: all 0. Arrays follow sorted query ids: q1, q2, q3.
    np.testing.assert_allclose(s["recall@5"], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(s["recall@10"], [1.0, 1.0, 0.0])
    np.testing.assert_allclose(s["recall@2"], [0.5, 0.0, 0.0])  # q1: d1 at rank 2, d3 at rank 3
    np.testing.assert_allclose(s["ar@5"], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(s["ndcg@10"], [0.693426, 0.356207, 0.0], atol=1e-6)
    np.testing.assert_allclose(s["mrr@10"], [0.5, 1 / 6, 0.0], atol=1e-9)
    # the means the report prints
    assert s["ndcg@10"].mean() == pytest.approx((0.693426 + 0.356207) / 3, abs=1e-6)
    assert s["mrr@10"].mean() == pytest.approx((0.5 + 1 / 6) / 3)


def test_document_scores_cut_at_ten_documents_not_ten_chunks() -> None:
    qrels = {"q": {"gold": 1}}
    # 12 chunks but only 10 distinct documents before "gold": it is the 11th document -> outside @10
    run = {"q": chunks(*[f"x{i}" for i in range(10)], "x0", "gold")}
    assert document_scores(run, qrels)["recall@10"].tolist() == [0.0]
    # repeats of the same document do not push it out: gold is the 10th distinct document
    run = {"q": chunks(*[f"x{i}" for i in range(9)], "x0", "x1", "gold")}
    s = document_scores(run, qrels)
    assert s["recall@10"].tolist() == [1.0]
    assert s["mrr@10"].tolist() == pytest.approx([0.1])


def test_passage_scores_hand_checked() -> None:
    passages = {p.passage_id: p for p in GOLD} | {"p3": Passage("p3", "F", 0, 50)}
    qrels = {"qa": {"p1": 1, "p2": 1}, "qb": {"p3": 1}}
    runs = {
        # ~, p2, p1 -> recall 1 at 5 and 10; nDCG = (1/log2(3) + 1/log2(4)) / (1 + 1/log2(3)) = 0.693426; MRR 1/2
        "qa": [Hit("h0", "D", 100, 200), Hit("h2", "D", 150, 400), Hit("h3", "D", 40, 90)],
        # p3 matched only by the 7th chunk: recall@5 = 0, recall@10 = 1, nDCG = 1/log2(8) = 1/3, MRR = 1/7
        "qb": [Hit(f"n{i}", "G", 0, 50) for i in range(6)] + [Hit("m", "F", 10, 40)],
    }
    s = passage_scores(runs, qrels, passages)
    np.testing.assert_allclose(s["recall@5"], [1.0, 0.0])
    np.testing.assert_allclose(s["recall@10"], [1.0, 1.0])
    np.testing.assert_allclose(s["recall@2"], [0.5, 0.0])  # qa: only p2 within the first 2 chunks
    np.testing.assert_allclose(s["ar@5"], [1.0, 0.0])
    np.testing.assert_allclose(s["ndcg@10"], [0.693426, 1 / 3], atol=1e-6)
    np.testing.assert_allclose(s["mrr@10"], [0.5, 1 / 7], atol=1e-9)


def test_passage_scores_count_only_the_first_ten_chunks() -> None:
    passages = {"p": Passage("p", "D", 0, 10)}
    # the 11th chunk matches: at chunk level it is outside @10 (placeholders hold positions 1..10)
    run = {"q": [Hit(f"n{i}", "X", 0, 10) for i in range(10)] + [Hit("m", "D", 0, 10)]}
    s = passage_scores(run, {"q": {"p": 1}}, passages)
    assert [s[m][0] for m in METRICS] == [0.0] * len(METRICS)


def test_scores_without_judgements_are_refused() -> None:
    with pytest.raises(ConfigError):
        document_scores({}, {})


# bootstrap ------------------------------------------------------------------------------------------------

def test_bootstrap_ci_contains_mean_and_is_seeded() -> None:
    scores = np.random.default_rng(1).random(200)
    a = bootstrap_ci(scores, resamples=1000, seed=7)
    assert a.low < a.mean < a.high
    assert a.mean == pytest.approx(scores.mean())
    assert bootstrap_ci(scores, resamples=1000, seed=7) == a  # same seed, same interval
    assert bootstrap_ci(scores, resamples=1000, seed=8) != a
    # a 95% interval of a mean of 200 uniform values is about +-1.96 * 0.289 / sqrt(200) = +-0.04
    assert 0.05 < a.high - a.low < 0.11


def test_bootstrap_of_constant_scores_is_a_point() -> None:
    e = bootstrap_ci([1.0] * 20, seed=0)
    assert (e.mean, e.low, e.high) == (1.0, 1.0, 1.0)


def test_paired_difference() -> None:
    rng = np.random.default_rng(3)
    base = rng.random(300)
    same = paired_difference_ci(base, base, seed=0)
    assert (same.mean, same.low, same.high) == (0.0, 0.0, 0.0)
    better = paired_difference_ci(np.minimum(base + 0.1, 1.0), base, seed=0)
    assert 0 < better.low <= better.mean <= better.high
    with pytest.raises(ConfigError):
        paired_difference_ci([1.0, 0.0], [1.0], seed=0)
    with pytest.raises(ConfigError):
        bootstrap_ci([], seed=0)



def test_choose_with_evidence_keeps_the_default_on_noise() -> None:
    rng = np.random.default_rng(5)
    base = rng.random(400)
    noise = base.copy()
    noise[7] += 1e-4  # a better mean in the fifth decimal: argmax would take it, the evidence does not
    clearly = np.minimum(base + 0.05, 1.0)
    more = np.minimum(base + 0.08, 1.0)
    assert choose_with_evidence({"default": base, "noise": noise}, "default") == "default"
    assert choose_with_evidence({"default": base, "noise": noise, "clearly": clearly}, "default") == "clearly"
    # among the candidates that beat the default, the best mean
    assert choose_with_evidence({"clearly": clearly, "default": base, "more": more}, "default") == "more"
    assert choose_with_evidence({"default": base, "worse": base - 0.1}, "default") == "default"
    with pytest.raises(ConfigError):
        choose_with_evidence({"a": base}, "default")

# datasets ------------------------------------------------------------------------------------------------

def _write_dataset(root: Path, corpus: list[dict], queries: list[dict], qrels: str) -> Path:
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels.tsv").write_text(qrels)
    return root


def test_load_dataset_sample_keeps_gold_documents(tmp_path: Path) -> None:
    corpus = [{"_id": f"d{i}", "title": f"T{i}", "text": f"text {i}"} for i in range(50)]
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(20)] + [{"_id": "unjudged", "text": "x"}]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i * 2}\t1\n" for i in range(20)) + "q0\td1\t0\n"
    root = _write_dataset(tmp_path / "toy", corpus, queries, qrels)

    full = load_dataset(root)
    assert [q.query_id for q in full.queries] == [f"q{i}" for i in range(20)]  # unjudged query dropped
    assert full.qrels["q0"] == {"d0": 1}  # score 0 is not relevant
    doc = full.documents[3]
    assert (doc.document_id, doc.title, doc.text) == ("d3", "T3", "text 3")
    assert len(doc.content_hash) == 64

    small = load_dataset(root, max_queries=5, corpus_limit=12, seed=4)
    assert len(small.queries) == 5 and len(small.documents) == 12
    gold = {d for rel in small.qrels.values() for d in rel}
    assert gold <= {d.document_id for d in small.documents}
    assert set(small.qrels) == {q.query_id for q in small.queries}
    again = load_dataset(root, max_queries=5, corpus_limit=12, seed=4)
    assert [q.query_id for q in again.queries] == [q.query_id for q in small.queries]
    assert [d.document_id for d in again.documents] == [d.document_id for d in small.documents]


def test_restricted_to_keeps_the_queries_answered_inside(tmp_path: Path) -> None:
    corpus = [{"_id": f"d{i}", "title": f"T{i}", "text": f"text {i}"} for i in range(4)]
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(3)]
    qrels = "query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\nq1\td3\t1\nq2\td2\t1\n"
    full = load_dataset(_write_dataset(tmp_path / "toy", corpus, queries, qrels))
    part = full.restricted_to(iter(["d0", "d1", "d2"]))
    assert [d.document_id for d in part.documents] == ["d0", "d1", "d2"]
    assert [q.query_id for q in part.queries] == ["q0", "q2"]  # q1 also needs d3
    assert len(full.documents) == 4 and len(full.queries) == 3  # the loaded dataset is left whole


def test_load_dataset_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_dataset(tmp_path / "missing")
    corpus = [{"_id": "d0", "text": "x"}]
    root = _write_dataset(tmp_path / "a", corpus, [{"_id": "q", "text": "x"}], "query-id\tcorpus-id\tscore\nq\td0\n")
    with pytest.raises(ParseError):
        load_dataset(root)
    root = _write_dataset(tmp_path / "b", corpus, [{"_id": "q", "text": "x"}], "h\th\th\nq\tnope\t1\n")
    with pytest.raises(ConfigError, match="missing from the corpus"):
        load_dataset(root)


def test_obliqa_documents_parse_headings_and_passage_offsets_are_exact() -> None:
    path = SHARED_DATA / "obliqa"
    if not path.exists():
        pytest.fail(f"evaluation data missing: {path} (see ../shared/data/README.md)")
    ds = load_dataset(path, max_queries=20, corpus_limit=6, seed=1)
    raw = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (path / "corpus.jsonl").open()}
    gold = {d for rel in ds.qrels.values() for d in rel}
    assert ds.has_passages and len(ds.documents) == max(6, len(gold))
    for doc in ds.documents:
        assert doc.text == raw[doc.document_id]  # byte for byte: passage offsets index it
        assert doc.format == "markdown" and doc.headings and doc.headings[0].level == 1
        assert doc.text[doc.headings[0].start:].startswith("#")
    kept = {d.document_id: d for d in ds.documents}
    for rel in ds.passage_qrels.values():
        for pid in rel:
            p = ds.passages[pid]
            assert p.document_id in kept and kept[p.document_id].text[p.start:p.end].strip()


def test_read_corpus_rejects_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "a", "text": "ok"}\n{"_id": "b"}\n')
    with pytest.raises(ParseError):
        read_corpus(path, "x")


# baselines ------------------------------------------------------------------------------------------------

def test_paragraph_units_have_exact_offsets() -> None:
    docs = read_corpus_from_texts({"A": "# Title\n\nFirst para\nline two.\n  \n\n  Second.  \n", "B": "only"})
    units = paragraph_units(docs)
    text = {d.document_id: d.text for d in docs}
    assert [u.text for u in units] == ["# Title", "First para\nline two.", "Second.", "only"]
    for u in units:
        assert text[u.document_id][u.start:u.end] == u.text


def read_corpus_from_texts(texts: dict[str, str]):
    from ragloom.types import Document

    return [Document(document_id=k, title="", text=v, source_path="", format="text", content_hash="")
            for k, v in texts.items()]


def test_bm25_baseline_ranks_matching_documents_only() -> None:
    docs = read_corpus_from_texts({"a": "apples and pears", "b": "the quick brown fox", "c": "apples apples apples"})
    hits = BM25Baseline(document_units(docs)).search([Query("q", "apples")], k=10)["q"]
    assert [h.document_id for h in hits] == ["c", "a"]  # "b" scores zero: not retrieved


def test_dense_baseline_orders_by_cosine() -> None:
    vectors = {"x": [1.0, 0.0], "y": [0.6, 0.8], "z": [0.0, 1.0], "query": [0.8, 0.6]}
    docs = read_corpus_from_texts({"x": "x", "y": "y", "z": "z"})
    units = document_units(docs)

    def encode(texts):
        return np.array([vectors[t] for t in texts], dtype=np.float32)

    hits = DenseBaseline([u.__class__(u.unit_id, u.document_id, u.start, u.end, u.document_id) for u in units],
                         encode).search([Query("q", "query")], k=2)["q"]
    assert [h.document_id for h in hits] == ["y", "x"]  # cosines 0.96, 0.8 (z: 0.6 is cut by k=2)


# runner helpers and report --------------------------------------------------------------------------------

def test_namespace_settings() -> None:
    s = namespace_settings(Settings(), "scifact")
    assert (s.collection_prefix, s.graph_namespace) == ("EvalScifact", "eval_scifact")
    s = namespace_settings(Settings(), "my-set_2")
    assert (s.collection_prefix, s.graph_namespace) == ("EvalMySet2", "eval_my_set_2")
    assert namespace_settings(Settings(), "scifact", "TestAbc").collection_prefix == "TestAbc"
    with pytest.raises(ConfigError):
        namespace_settings(Settings(), "scifact", "lower case")


def test_hits_of_skips_graph_context_and_needs_offsets() -> None:
    items = [RetrievedItem("graph:1", "graph:1", "Knowledge graph ...", 0.0, metadata={"source": "graph_rag"}),
             RetrievedItem("c1", "d1", "t", 0.9, metadata={"start": 5, "end": 9})]
    assert hits_of(items) == [Hit("c1", "d1", 5, 9)]
    with pytest.raises(ConfigError):
        hits_of([RetrievedItem("c2", "d1", "t", 0.5)])


def _system(retrieval: str, chunking: str, ndcg: list[float], baseline: bool = False) -> SystemResult:
    per_query = {m: np.array(ndcg) for m in METRICS}
    return SystemResult(retrieval, chunking, baseline=baseline, scores={"document": per_query}, latency_ms=[3.0])


def test_report_rows_differences_and_files(tmp_path: Path) -> None:
    report = EvalReport(
        dataset="toy", levels=["document"], query_ids={"document": ["q1", "q2", "q3", "q4"]}, documents=9,
        systems=[_system("bm25", "document", [0.0, 0.5, 1.0, 0.5], baseline=True),
                 _system("dense", "document", [0.5, 0.5, 0.5, 0.5], baseline=True),
                 _system("hybrid", "recursive", [1.0, 0.5, 1.0, 1.0]),
                 SystemResult("hierarchical", "recursive", error="needs hierarchical chunks")],
        resamples=200, seed=1)
    rows = [r for r in report.rows() if r.get("metric") == "ndcg@10"]
    hybrid = next(r for r in rows if r["system"] == "hybrid/recursive")
    assert hybrid["mean"] == pytest.approx(0.875)
    assert hybrid["delta_bm25"] == pytest.approx(0.875 - 0.5)
    assert hybrid["delta_dense"] == pytest.approx(0.875 - 0.5)
    assert hybrid["delta_bm25_low"] <= hybrid["delta_bm25"] <= hybrid["delta_bm25_high"]
    versus = report.compare("hybrid/recursive", "baseline:dense/document", "document", "ndcg@10")
    assert versus.mean == pytest.approx(hybrid["delta_dense"])
    with pytest.raises(ConfigError):
        report.compare("hierarchical/recursive", "hybrid/recursive", "document", "ndcg@10")  # it has no scores
    bm25 = next(r for r in rows if r["system"] == "baseline:bm25/document")
    assert bm25["delta_bm25"] is None  # not compared with itself
    assert any(r.get("error") == "needs hierarchical chunks" for r in report.rows())
    table = report.table()
    assert "hybrid/recursive" in table and "needs hierarchical chunks" in table
    assert "| hybrid/recursive | 0.875 [" in report.markdown()

    paths = report.write(tmp_path)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(paths["json"].read_text())
    assert saved["per_query"]["hybrid/recursive"]["document"]["ndcg@10"] == [1.0, 0.5, 1.0, 1.0]
    header = paths["csv"].read_text().splitlines()[0].split(",")
    assert {"system", "level", "metric", "mean", "low", "high", "delta_bm25", "delta_dense"} <= set(header)


def test_budget_recall_spends_tokens_in_rank_order() -> None:
    from ragloom.evaluation.metrics import budget_recall

    gold = [Passage("g1", "D", 100, 200), Passage("g2", "D", 300, 400)]  # 200 gold characters
    # a 100-token chunk covering g1 entirely, then a 400-token chunk holding g2 in its second half
    hits = [Hit("a", "D", 100, 200, tokens=100), Hit("b", "D", 0, 400, tokens=400)]
    assert budget_recall(hits, gold, 100) == pytest.approx(0.5)  # only the first chunk fits
    # 150 tokens: b's first 50/400 of its span (0-50) reads nothing new
    assert budget_recall(hits, gold, 150) == pytest.approx(0.5)
    assert budget_recall(hits, gold, 500) == pytest.approx(1.0)
    # the same text twice costs twice and covers once; other documents cost but never cover
    again = [Hit("x", "E", 0, 400, tokens=100), Hit("a", "D", 100, 200, tokens=100),
             Hit("a2", "D", 100, 200, tokens=100), Hit("c", "D", 300, 400, tokens=100)]
    assert budget_recall(again, gold, 300) == pytest.approx(0.5)
    assert budget_recall(again, gold, 400) == pytest.approx(1.0)
    # a hit without a token count is estimated at 4 characters a token
    assert budget_recall([Hit("u", "D", 100, 400)], gold, 50) == pytest.approx(0.5)


def test_passage_scores_report_each_token_budget() -> None:
    passages = {"p": Passage("p", "D", 0, 4000)}
    runs = {"q": [Hit(f"h{i}", "D", i * 1000, (i + 1) * 1000, tokens=256) for i in range(4)]}
    s = passage_scores(runs, {"q": {"p": 1}}, passages)
    np.testing.assert_allclose([s["tokrecall@512"][0], s["tokrecall@1024"][0], s["tokrecall@2048"][0]],
                               [0.5, 1.0, 1.0])
