"""Chunking invariants on real documents and random Markdown: spans, coverage, sizes, ids, parents, headings."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.chunking import (
    Chunker,
    HeadingIndex,
    HierarchicalChunker,
    available_chunkers,
    chunk_levels,
    get_chunker,
    register_chunker,
)
from ragloom.chunking.base import trim
from ragloom.embedding.base import Embedder
from ragloom.errors import ChunkingError
from ragloom.parsing import parse_sources
from ragloom.parsing.markdown import parse_headings
from ragloom.settings import SAMPLE_CORPUS
from ragloom.types import Chunk, Document, Scope


class LexicalEmbedder(Embedder):
    """A deterministic bag-of-words embedder (hashed unigrams): real vectors, no model load.

    Used for the semantic strategy's invariants; its quality on real text is tested with the real model below.
    """

    model_id = "lexical-hash-64"
    dimension = 64
    max_tokens = 256

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            out[row] = out[row] / np.linalg.norm(out[row]) if out[row].any() else 1.0 / np.sqrt(self.dimension)
        return out


def make_chunker(name: str, **params) -> Chunker:
    if name == "semantic":
        params.setdefault("embedder", LexicalEmbedder())
    return get_chunker(name, **params)


STRATEGIES = ["recursive", "semantic", "hierarchical", "headered"]


def document(text: str, document_id: str = "doc", fmt: str = "markdown", **kwargs) -> Document:
    return Document(document_id=document_id, title="T", text=text, source_path=f"{document_id}.md", format=fmt,
                    content_hash="h", headings=parse_headings(text) if fmt == "markdown" else [], **kwargs)


def by_level(chunks: list[Chunk]) -> dict[int, list[Chunk]]:
    levels: dict[int, list[Chunk]] = defaultdict(list)
    for c in chunks:
        levels[c.level].append(c)
    return dict(levels)


def check_heading_path(doc: Document, c: Chunk) -> None:
    """The path names a chain of nested headings that starts at the top (nothing encloses the first) and whose
    deepest section meets the chunk. Titles may repeat, so look for any such chain."""

    def chains(titles: list[str], parent) -> bool:
        if not titles:
            return parent is None or (parent.start < c.end and c.start < parent.end)
        for h in doc.headings:
            if h.title != titles[0]:
                continue
            if parent is None and any(o.start < h.start and h.end <= o.end for o in doc.headings):
                continue
            if parent is not None and not (parent.start < h.start and h.end <= parent.end):
                continue
            if chains(titles[1:], h):
                return True
        return False

    assert chains(list(c.heading_path), None), f"{c.heading_path} is not a heading chain over {c.start}-{c.end}"


def check_invariants(doc: Document, chunks: list[Chunk], chunker: Chunker) -> None:
    """What every strategy promises; each level of a hierarchy separately."""
    counter = chunker.counter
    level_limits: dict[int, float] = {}  # hierarchical levels above the children: their own bounds
    if isinstance(chunker, HierarchicalChunker):
        for level, name in enumerate(chunker.level_names[:-1]):
            level_limits[level] = int(name.split("_")[1]) if name.startswith("parent_") else float("inf")
    assert chunks or not doc.text.strip()
    ids = [c.chunk_id for c in chunks]
    assert len(set(ids)) == len(ids)
    text_counts = counter.count_many([c.text for c in chunks])
    embed_counts = counter.count_many([c.embed_text for c in chunks])
    for c, text_count, embed_count in zip(chunks, text_counts, embed_counts, strict=True):
        assert doc.text[c.start:c.end] == c.text and c.text.strip() and c.text == c.text.strip()
        assert c.document_id == doc.document_id and c.strategy == chunker.name and c.scope == doc.scope
        assert c.token_count == text_count
        assert embed_count <= counter.max_tokens
        if c.metadata.get("embed_truncated"):
            assert c.text.startswith(c.embed_text) and c.token_count > counter.max_tokens
        else:
            assert c.embed_text.endswith(c.text)
        assert c.token_count <= level_limits.get(c.level, chunker.chunk_size)
        assert c.metadata["title"] == doc.title and c.metadata["source_path"] == doc.source_path
        check_heading_path(doc, c)
    for level, level_chunks in by_level(chunks).items():
        ordered = sorted(level_chunks, key=lambda c: (c.start, c.end))
        assert [c.position for c in ordered] == list(range(len(ordered)))
        # coverage: only whitespace between consecutive chunks, before the first and after the last
        cursor = 0
        for c in ordered:
            assert not doc.text[cursor:c.start].strip(), f"level {level}: uncovered text before {c.start}"
            if not getattr(chunker, "overlap", 0):  # recursive overlaps by design (headered may); the others partition
                assert c.start >= cursor
            cursor = max(cursor, c.end)
        assert not doc.text[cursor:].strip()
    known = {c.chunk_id: c for c in chunks}
    for c in chunks:
        if c.parent_id is None:
            assert c.level == 0
        else:
            parent = known[c.parent_id]
            assert parent.level == c.level - 1 and parent.start <= c.start and c.end <= parent.end


# corpora -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_docs() -> list[Document]:
    return parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents


@pytest.fixture(scope="module")
def real_docs(tmp_path_factory, obliqa_jsonl_lines, scifact_jsonl_lines) -> list[Document]:
    root = tmp_path_factory.mktemp("real")
    # the CIB rulebook (90k characters, four heading levels) and a shorter one (36k)
    (root / "obliqa.jsonl").write_text(obliqa_jsonl_lines[0] + obliqa_jsonl_lines[2], encoding="utf-8")
    (root / "scifact.jsonl").write_text("".join(scifact_jsonl_lines[:10]), encoding="utf-8")
    batch = parse_sources([root], root)
    assert not batch.rejections
    return batch.documents


@pytest.mark.parametrize("name", STRATEGIES)
def test_invariants_on_real_documents(name, sample_docs, real_docs):
    chunker = make_chunker(name)
    for doc in [*sample_docs, *real_docs]:
        check_invariants(doc, chunker.chunk(doc), chunker)


@pytest.mark.parametrize("name", STRATEGIES)
def test_ids_are_stable_and_content_derived(name, real_docs):
    docs = [real_docs[1], real_docs[2]]  # a rulebook and an abstract
    assert "Rule" in docs[0].text
    first = make_chunker(name).chunk_many(docs)
    again = make_chunker(name).chunk_many(docs)
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]
    assert [(c.start, c.end) for c in first] == [(c.start, c.end) for c in again]
    # another setting -> other ids; an edit to one document changes only that document's ids
    other = make_chunker(name, chunk_size=128).chunk_many(docs)
    assert not {c.chunk_id for c in other} & {c.chunk_id for c in first}
    edited = [replace(docs[0], text=docs[0].text.replace("Rule", "Regulation", 1)), docs[1]]
    after = make_chunker(name).chunk_many(edited)
    ids_of = lambda chunks, d: {c.chunk_id for c in chunks if c.document_id == d}  # noqa: E731
    assert ids_of(after, docs[1].document_id) == ids_of(first, docs[1].document_id)
    assert ids_of(after, docs[0].document_id) != ids_of(first, docs[0].document_id)


def test_recursive_overlaps_neighbours_within_the_overlap(real_docs, token_counter):
    chunker = make_chunker("recursive", overlap=30)
    chunks = [c for c in chunker.chunk(real_docs[0])]
    overlaps = [a.text[b.start - a.start:] for a, b in zip(chunks, chunks[1:], strict=False) if b.start < a.end]
    assert overlaps, "a long rulebook split with overlap=30 should share text between neighbours"
    assert all(token_counter.count(o) - token_counter.special_tokens <= 30 for o in overlaps)


def test_recursive_without_overlap_partitions(real_docs):
    chunks = make_chunker("recursive", overlap=0).chunk(real_docs[0])
    assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:], strict=False))


# heading paths -------------------------------------------------------------------------------------------

CIB = "Captive Insurance Business Rules (CIB)"


@pytest.mark.parametrize("name", STRATEGIES)
def test_heading_path_on_a_known_obliqa_section(name, real_docs):
    cib = real_docs[0]
    assert cib.title == CIB
    full = [CIB, "1 GENERAL PROVISIONS", "1.2 Captive Insurance Business"]
    section = (cib.text.index("### 1.2 Captive Insurance Business"), cib.text.index("### 1.3 Classes"))
    marker = cib.text.index("1.2.2 For this purpose")
    holding = [c for c in make_chunker(name).chunk(cib) if c.start <= marker < c.end]
    assert holding
    for c in holding:
        assert full[: len(c.heading_path)] == c.heading_path and len(c.heading_path) >= 1
        inside = section[0] <= c.start and c.end <= section[1]
        if inside:
            assert c.heading_path == full
        elif c.start >= section[0] and c.end > section[1]:  # runs on into 1.3: only the shared ancestors
            assert c.heading_path == full[:2]
    if name == "headered":
        assert [c.heading_path for c in holding] == [full]
    if name == "hierarchical":  # coarse to fine: document, part 1, ..., the child
        assert [c.heading_path for c in holding][:2] == [[CIB], [CIB, "1 GENERAL PROVISIONS"]]


def test_headered_chunks_stay_inside_one_section_and_prefix_the_path(real_docs):
    cib = real_docs[0]
    chunker = make_chunker("headered", units="section", heading_prefix=True)
    chunks = chunker.chunk(cib)
    index = HeadingIndex(cib)
    for c in chunks:
        for h in cib.headings:
            if c.start < h.start < c.end:  # only heading lines may come before a heading inside a chunk
                assert index.content_start(c.start, h.start) is None
        if c.heading_path:
            assert c.embed_text.startswith(" > ".join(c.heading_path) + "\n\n")
    assert all(index.content_start(c.start, c.end) is not None for c in chunks)  # no bare-heading chunk
    section = next(c for c in chunks if "1.2.1 Captive Insurance Business means" in c.text)
    assert section.heading_path == [CIB, "1 GENERAL PROVISIONS", "1.2 Captive Insurance Business"]
    plain = make_chunker("headered", units="section", heading_prefix=False).chunk(cib)
    assert all(c.embed_text == c.text for c in plain)
    assert len(plain) <= len(chunks)  # without a prefix the whole budget goes to the text


def test_headered_prefix_goes_into_the_models_room_above_chunk_size(real_docs, token_counter):
    """chunk_size 200 leaves 56 of the model's 256 tokens: prefixes that fit there do not shorten the text."""
    cib = real_docs[0]
    with_prefix = make_chunker("headered", units="section", heading_prefix=True).chunk(cib)
    plain = make_chunker("headered", units="section", heading_prefix=False).chunk(cib)
    prefixes = [token_counter.count(c.embed_text) - c.token_count for c in with_prefix]
    assert max(prefixes) <= token_counter.max_tokens - 200
    assert [(c.start, c.end) for c in with_prefix] == [(c.start, c.end) for c in plain]
    assert max(token_counter.count(c.embed_text) for c in with_prefix) > 200  # the prefix used the headroom
    # a long path still takes its tokens out of the text: at chunk_size 250 only 6 tokens are left above it
    tight = make_chunker("headered", units="section", chunk_size=250, heading_prefix=True).chunk(cib)
    assert len(tight) > len(make_chunker("headered", units="section", chunk_size=250, heading_prefix=False).chunk(cib))


def test_headered_embeds_the_bare_text_by_default(real_docs):
    """The path prefix is opt-in: on ObliQA dev it cost 0.054 of tokrecall@1024 (README, token budgets)."""
    chunks = make_chunker("headered").chunk(real_docs[0])
    assert any(c.heading_path for c in chunks) and all(c.embed_text == c.text for c in chunks)


def test_headered_prefix_levels_keeps_the_innermost_headings(real_docs):
    cib = real_docs[0]
    full = make_chunker("headered", heading_prefix=True).chunk(cib)
    for levels in (1, 2):
        short = make_chunker("headered", heading_prefix=True, prefix_levels=levels).chunk(cib)
        assert [(c.start, c.end) for c in short] == [(c.start, c.end) for c in full]
        for c in short:
            if c.heading_path:
                assert c.embed_text == " > ".join(c.heading_path[-levels:]) + "\n\n" + c.text
    assert any(len(c.heading_path) > 1 for c in full)
    with pytest.raises(ChunkingError):
        make_chunker("headered", prefix_levels=-1)


def test_headered_overlap_stays_inside_a_section(real_docs):
    cib = real_docs[0]
    sections = HeadingIndex(cib).sections()
    section_of = lambda c: next(i for i, (a, b) in enumerate(sections) if a <= c.start < b)  # noqa: E731
    for overlap, expect in ((0, False), (30, True)):
        chunks = make_chunker("headered", units="section", overlap=overlap).chunk(cib)
        check_invariants(cib, chunks, make_chunker("headered", units="section", overlap=overlap))
        pairs = list(zip(chunks, chunks[1:], strict=False))
        assert any(b.start < a.end for a, b in pairs) == expect
        assert all(section_of(a) == section_of(b) for a, b in pairs if b.start < a.end)
    with pytest.raises(ChunkingError):
        make_chunker("headered", units="section", overlap=100)


@pytest.mark.parametrize("units", ["section", "paragraph"])
def test_headered_sub_splits_long_sections(real_docs, token_counter, units):
    cib = real_docs[0]
    index = HeadingIndex(cib)
    sections = index.sections()
    chunker = make_chunker("headered", units=units)
    long_sections = [(a, b) for a, b in sections if token_counter.count(cib.text[a:b]) > chunker.chunk_size]
    assert long_sections, "the CIB rulebook has sections longer than one chunk"
    chunks = chunker.chunk(cib)
    for a, b in long_sections:
        inside = [c for c in chunks if a <= c.start and c.end <= b]
        assert len(inside) >= 2 and inside[0].start == a and inside[-1].end == b
        assert {tuple(c.heading_path) for c in inside} == {tuple(index.path_for(a, b))}


RULES = [f"{i}.1 Rule {i} asks every firm to keep records of" + " its books and ledgers" * 4 for i in range(1, 7)]


def test_headered_paragraph_units_end_where_paragraphs_end(real_docs, sample_docs):
    doc = document("# Book\n\n## 1 Part\n\n" + "\n\n".join(RULES))
    assert len(make_chunker("headered", units="section").chunk(doc)) == 1  # sections pack paragraphs
    chunker = make_chunker("headered", units="paragraph", min_tokens=0)
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    assert chunks[0].text == "# Book\n\n## 1 Part\n\n" + RULES[0]  # the heading lines join the first paragraph
    assert [c.text for c in chunks[1:]] == RULES[1:]
    for chunker in (make_chunker("headered", units="paragraph"), make_chunker("headered", units="paragraph",
                                                                               chunk_size=64, overlap=8)):
        for d in [*sample_docs, *real_docs]:
            check_invariants(d, chunker.chunk(d), chunker)
    with pytest.raises(ChunkingError):
        make_chunker("headered", units="sentence")


def test_headered_defaults_to_paragraph_units():
    default = make_chunker("headered")
    assert (default.units, default.min_tokens, default.chunk_size) == ("paragraph", 64, 200)


def test_headered_min_tokens_merges_short_paragraphs(token_counter):
    doc = document("## 1 Part\n\n" + "\n\n".join(RULES))
    single = make_chunker("headered", units="paragraph", min_tokens=0).chunk(doc)
    merged = make_chunker("headered", units="paragraph", min_tokens=40).chunk(doc)
    assert len(merged) < len(single) == len(RULES)
    starts, ends = {c.start for c in single}, {c.end for c in single}
    assert all(c.start in starts and c.end in ends for c in merged)  # whole paragraphs, merged
    assert all(c.token_count - token_counter.special_tokens >= 40 for c in merged[:-1])
    # a merge never overflows chunk_size: paragraphs of ~30 tokens under a 48-token cap stay apart
    capped = make_chunker("headered", units="paragraph", min_tokens=40, chunk_size=48).chunk(doc)
    assert len(capped) == len(RULES)
    with pytest.raises(ChunkingError):
        make_chunker("headered", units="paragraph", min_tokens=300)


def test_headered_short_closing_paragraphs_join_the_unit_above():
    """A short paragraph that opens nothing (no number, no heading) closes the rule above it; a short numbered
    one opens the next."""
    long_rule = "4.4 A firm that uses Virtual Assets in an ancillary manner" + " needs no approval for it" * 12 + "."
    text = f"## 4 Use\n\n{long_rule}\n\nThis applies to every firm.\n\n4.5 Short rule.\n\n{long_rule[4:]}"
    doc = document(text)
    chunks = make_chunker("headered", min_tokens=64).chunk(doc)
    assert chunks[0].text.endswith("4.4 " + long_rule[4:] + "\n\nThis applies to every firm.")
    assert chunks[1].text.startswith("4.5 Short rule.\n\n")
    apart = make_chunker("headered", min_tokens=0).chunk(doc)
    assert apart[1].text == "This applies to every firm."


def test_headered_paragraph_units_keep_lists_with_their_lead_in():
    text = ("## 3 Notices\n\n3.1 The notice must:\n\n(a) be in writing;\n\n(b) be signed by a director.\n\n"
            "3.2 Fees are paid yearly.\n\n- by transfer\n\n- by cheque\n\n3.3 A rule that stands alone.")
    chunks = make_chunker("headered", units="paragraph", min_tokens=0).chunk(document(text))
    assert [c.text.split("\n")[-1] for c in chunks] == ["(b) be signed by a director.", "- by cheque",
                                                         "3.3 A rule that stands alone."]


# hierarchical --------------------------------------------------------------------------------------------


def test_hierarchical_levels_nest_and_link(real_docs):
    chunker = make_chunker("hierarchical")
    assert isinstance(chunker, HierarchicalChunker)
    assert chunker.level_names == ["document", "section", "parent_1024", "child"]
    assert chunk_levels("hierarchical") == tuple(chunker.level_names)  # what the retriever names levels by
    assert chunk_levels("recursive") == () and chunk_levels("not_registered") == ()
    cib = real_docs[0]
    chunks = chunker.chunk(cib)
    levels = by_level(chunks)
    assert sorted(levels) == [0, 1, 2, 3] and len(levels[0]) == 1
    assert len(levels[1]) > 3 and len(levels[3]) > len(levels[2]) >= len(levels[1])
    ids = {c.chunk_id for c in chunks}
    assert all(c.parent_id in ids for c in chunks if c.level > 0)
    assert all(c.token_count <= 256 for c in levels[3])
    assert max(c.token_count for c in levels[2]) > 256  # parents are longer than the model reads...
    assert all(c.metadata.get("embed_truncated") for c in levels[2] if c.token_count > 256)  # ...and say so
    # sections follow the rulebook's ten "## n" parts; the title above part 1 joins part 1
    parts = [h.title for h in cib.headings if h.level == 2]
    assert [c.heading_path for c in levels[1]] == [[CIB, title] for title in parts]
    assert levels[1][0].start == levels[0][0].start
    # children partition each parent
    for parent in levels[2]:
        kids = sorted((c for c in levels[3] if c.parent_id == parent.chunk_id), key=lambda c: c.start)
        assert kids and kids[0].start == parent.start and kids[-1].end == parent.end


def test_hierarchical_on_a_short_document_keeps_every_level(real_docs):
    abstract = next(d for d in real_docs if not d.headings)
    chunks = make_chunker("hierarchical").chunk(abstract)
    assert sorted(by_level(chunks)) == [0, 1, 2, 3]


def test_hierarchical_rejects_sizes_that_do_not_decrease():
    with pytest.raises(ChunkingError):
        make_chunker("hierarchical", parent_sizes=(200,), chunk_size=256)


# semantic ------------------------------------------------------------------------------------------------


def test_semantic_cuts_on_topic_shifts_more_than_size_alone():
    # three topics, each a paragraph-free run of sentences; the lexical embedder sees the vocabulary change
    topics = [
        "Kelp farms grow kelp in cold water. Kelp farms harvest kelp in spring. Cold water kelp farms shelter fish.",
        "Satellites relay buoy readings to Bergen. Buoy readings reach satellites within minutes. Satellites "
        "store buoy readings.",
        "Auditors check invoices and ledgers. Auditors sign ledgers at year end. Invoices and ledgers match for "
        "auditors.",
    ]
    text = " ".join(topics)
    doc = document(text, fmt="text")
    chunks = make_chunker("semantic", chunk_size=200, breakpoint_percentile=75, min_chunk_tokens=8).chunk(doc)
    joins = [len(topics[0]), len(topics[0]) + 1 + len(topics[1])]
    assert [c.end for c in chunks] == [*joins, len(text)]


def test_semantic_paragraph_units_keep_paragraphs_whole(real_docs, token_counter):
    cib = real_docs[0]
    text = cib.text
    cuts = [0, *(m.end() for m in re.finditer(r"\n[ \t]*\n\s*", text)), len(text)]
    paragraphs = [(a, b) for a, b in (trim(text, a, b) for a, b in zip(cuts, cuts[1:], strict=False)) if a < b]
    # one-line paragraphs that fit a chunk (lines inside a paragraph may open clauses, which are units too)
    short = [(a, b) for a, b in paragraphs if "\n" not in text[a:b] and token_counter.count(text[a:b]) <= 200]
    split = {}
    for units in ("sentence", "paragraph"):
        chunker = make_chunker("semantic", units=units)
        chunks = chunker.chunk(cib)
        check_invariants(cib, chunks, chunker)
        split[units] = [(a, b) for a, b in short if not any(c.start <= a and b <= c.end for c in chunks)]
    assert split["sentence"] and not split["paragraph"]  # sentence units cut some paragraphs; these never
    with pytest.raises(ChunkingError):
        make_chunker("semantic", units="word")


def test_semantic_needs_an_embedder():
    with pytest.raises(ChunkingError):
        get_chunker("semantic")


def test_semantic_batches_documents_like_single_calls(real_docs):
    chunker = make_chunker("semantic")
    together = chunker.chunk_many(real_docs[:4])
    alone = [c for d in real_docs[:4] for c in chunker.chunk(d)]
    assert [c.chunk_id for c in together] == [c.chunk_id for c in alone]


def test_semantic_with_the_real_model_finds_where_abstracts_meet(real_embedder, scifact_jsonl_lines):
    """Pairs of SciFact abstracts joined by a space (no paragraph break to help): the semantic chunker should
    cut at the join far more often than the size-driven recursive chunker does."""
    abstracts = [json.loads(line)["text"] for line in scifact_jsonl_lines[:16]]
    semantic = get_chunker("semantic", embedder=real_embedder, chunk_size=256)
    recursive = get_chunker("recursive", chunk_size=256, overlap=0)
    docs, joins = [], []
    for i in range(0, len(abstracts), 2):
        docs.append(document(abstracts[i] + " " + abstracts[i + 1], document_id=f"pair{i}", fmt="text"))
        joins.append(len(abstracts[i]))
    semantic_chunks, recursive_chunks = semantic.chunk_many(docs), recursive.chunk_many(docs)
    for doc in docs:
        check_invariants(doc, [c for c in semantic_chunks if c.document_id == doc.document_id], semantic)
    hits = lambda chunks: sum(any(c.document_id == d.document_id and c.end == j for c in chunks)  # noqa: E731
                              for d, j in zip(docs, joins, strict=True))
    assert hits(semantic_chunks) >= 5 and hits(semantic_chunks) > hits(recursive_chunks)


# metadata, scope, pages ----------------------------------------------------------------------------------


def test_chunks_carry_metadata_scope_and_pdf_pages(sample_docs):
    pdf = next(d for d in sample_docs if d.format == "pdf")
    scoped = replace(pdf, scope=Scope("acme", "alice"), metadata={"status": "final"})
    chunks = make_chunker("recursive", chunk_size=64, overlap=0).chunk(scoped)
    assert {c.scope for c in chunks} == {Scope("acme", "alice")}
    assert all(c.metadata["status"] == "final" and c.metadata["title"] == pdf.title for c in chunks)
    pages = [c.metadata["page"] for c in chunks]
    assert pages == sorted(pages) and pages[0] == 1 and pages[-1] == 2
    second = next(c for c in chunks if c.metadata["page"] == 2)
    assert second.start >= pdf.page_starts[1]


# registry and tokens -------------------------------------------------------------------------------------


def test_registry():
    assert set(STRATEGIES) <= set(available_chunkers())  # the built-ins; tests may register their own
    with pytest.raises(ChunkingError):
        register_chunker("recursive")(type("Again", (Chunker,), {"split": lambda self, d: []}))
    with pytest.raises(ChunkingError, match="unknown chunking"):
        get_chunker("fixed")
    with pytest.raises(ChunkingError):
        get_chunker("recursive", size=10)
    with pytest.raises(ChunkingError):
        get_chunker("recursive", chunk_size=10_000)  # over the model's input limit


def test_token_counter_is_the_models_own_and_untruncated(token_counter):
    assert token_counter.max_tokens == 256 and token_counter.special_tokens == 2
    long_text = "word " * 1000
    assert token_counter.count(long_text) == 1002  # the shipped tokenizer.json truncates at 128: not here
    cut = token_counter.truncate("Tromsø harbour " * 200, 50)
    assert token_counter.count(cut) <= 50 and ("Tromsø harbour " * 200).startswith(cut)


# property tests on random Markdown-ish text --------------------------------------------------------------

WORDS = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S")), min_size=1, max_size=14)
SENTENCE = st.lists(WORDS, min_size=1, max_size=25).map(lambda ws: " ".join(ws) + ".")
HEADING = st.tuples(st.integers(1, 4), st.lists(WORDS, min_size=1, max_size=5)).map(
    lambda t: "#" * t[0] + " " + " ".join(t[1]))
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=8).map(" ".join)
ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=300)
BLOCK = st.one_of(HEADING, PARAGRAPH, PARAGRAPH, ANY_TEXT, st.just("```\n# code, not a heading\n```"),
                  st.lists(WORDS, min_size=1, max_size=6).map(lambda ws: "\n".join(f"- {w}" for w in ws)))
SEPARATOR = st.sampled_from(["\n\n", "\n", "\n\n\n", " \n\t\n", "\r\n\r\n"])
MARKDOWN = st.lists(st.tuples(BLOCK, SEPARATOR), min_size=1, max_size=25).map(
    lambda parts: "".join(b + s for b, s in parts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=MARKDOWN, name=st.sampled_from(STRATEGIES), size=st.sampled_from([16, 48, 200]),
       units=st.sampled_from(["section", "paragraph"]))
def test_invariants_hold_on_random_markdown(text, name, size, units):
    params = {"chunk_size": size}
    if name == "headered":
        params["units"] = units
    if name == "recursive":
        params["overlap"] = size // 4
    if name == "hierarchical":
        params["parent_sizes"] = (size * 4,)
    chunker = make_chunker(name, **params)
    doc = document(text)
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    assert [c.chunk_id for c in chunker.chunk(doc)] == [c.chunk_id for c in chunks]
