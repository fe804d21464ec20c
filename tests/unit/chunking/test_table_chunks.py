"""The four chunkers on Office, CSV and email documents: headings found, tables never cut inside a row, a split
table's header row carried in the embedded text of its later pieces, chunk text an exact slice throughout."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.chunking.base import table_header_for
from ragloom.parsing import parse_sources
from ragloom.parsing.markdown import find_tables, markdown_table, parse_headings
from ragloom.settings import SAMPLE_CORPUS
from tests.unit.chunking.test_chunking import STRATEGIES, check_invariants, document, make_chunker

NEW_FORMATS = {"docx", "pptx", "xlsx", "csv", "email"}


def sized(name: str, size: int):
    extra = {"recursive": {"overlap": size // 4}, "hierarchical": {"parent_sizes": (size * 4,)}}.get(name, {})
    return make_chunker(name, chunk_size=size, **extra)


def check_rows_whole(doc, chunks) -> None:
    """No chunk starts or ends inside a table row (rows here are all shorter than a chunk)."""
    rows = [row for table in find_tables(doc.text) for row in table.rows]
    for c in chunks:
        for a, b in rows:
            assert not a < c.start < b and not a < c.end < b, f"chunk {c.start}-{c.end} cuts row {doc.text[a:b]!r}"


def check_headers_carried(doc, chunks, chunker) -> None:
    for c in chunks:
        header = table_header_for(doc.text, c.start)
        if header and not c.metadata.get("embed_truncated"):
            assert c.embed_text.endswith(header + c.text), "a piece of a split table embeds its header row"


@pytest.fixture(scope="module")
def office_docs():
    docs = [d for d in parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents if d.format in NEW_FORMATS]
    assert {d.format for d in docs} == NEW_FORMATS
    return docs


def fleet_csv(tmp_path, rows: int = 400):
    lines = ["site,customer,product,buoys,uptime"]
    lines += [f"Site {i},Customer {i % 7},TideLens {('Harbour', 'Offshore', 'Kelp')[i % 3]},{i % 20},9{i % 10}.5"
              for i in range(rows)]
    (tmp_path / "fleet.csv").write_text("\n".join(lines) + "\n")
    (doc,) = parse_sources(["fleet.csv"], tmp_path).documents
    return doc


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("size", [48, 200])
def test_invariants_on_office_documents(name, size, office_docs):
    chunker = sized(name, size)
    for doc in office_docs:
        chunks = chunker.chunk(doc)
        check_invariants(doc, chunks, chunker)
        check_rows_whole(doc, chunks)
        check_headers_carried(doc, chunks, chunker)


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_long_table_is_packed_by_rows_and_every_piece_knows_its_columns(name, tmp_path):
    doc = fleet_csv(tmp_path)
    chunker = make_chunker(name, **({"parent_sizes": (800,)} if name == "hierarchical" else {}))
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    check_rows_whole(doc, chunks)
    check_headers_carried(doc, chunks, chunker)
    finest = [c for c in chunks if c.level == max(x.level for x in chunks)]
    assert len(finest) > 5
    header = "| site | customer | product | buoys | uptime |\n| --- | --- | --- | --- | --- |\n"
    assert all(c.embed_text.startswith(header) for c in finest)


def test_headered_finds_word_headings_and_slide_titles(office_docs):
    chunker = make_chunker("headered")
    paths = {d.format: {tuple(c.heading_path) for c in chunker.chunk(d)} for d in office_docs}
    assert ("Quarterly Business Review Q3 2024", "Risks", "Supply chain") in paths["docx"]
    assert ("Quarterly Business Review Q3 2024", "Revenue by business unit") in paths["docx"]
    assert {("Three priorities",), ("Targets for 2025",)} <= paths["pptx"]
    assert {("Fleet",), ("Service visits",)} <= paths["xlsx"]


def test_hierarchical_sections_are_slides_and_sheets(office_docs):
    chunker = make_chunker("hierarchical")
    for fmt, titles in (("pptx", ["Corvane Strategy 2025", "Three priorities", "Targets for 2025"]),
                        ("xlsx", ["Fleet", "Service visits"])):
        doc = next(d for d in office_docs if d.format == fmt)
        sections = [c for c in chunker.chunk(doc) if c.level == 1]
        assert [c.heading_path[-1] for c in sections] == titles


# random documents with tables -----------------------------------------------------------------------------------

CELL = st.text(alphabet="abcdefgh0123.ø |", max_size=8)  # rows stay shorter than a chunk: only those are kept whole
TABLE = st.integers(1, 4).flatmap(lambda width: st.lists(st.lists(CELL, min_size=width, max_size=width),
                                                         min_size=1, max_size=40)).map(markdown_table)
PROSE = st.lists(st.text(alphabet="abcdefgh .", min_size=1, max_size=20), min_size=1, max_size=10).map(" ".join)
HEADING = st.sampled_from(["# Sheet", "## Part", "### Detail"])
BLOCKS = st.lists(st.one_of(TABLE, TABLE, PROSE, HEADING), min_size=1, max_size=8).map("\n\n".join)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=BLOCKS, name=st.sampled_from(STRATEGIES), size=st.sampled_from([64, 120]))
def test_rows_stay_whole_in_random_documents(text, name, size):
    doc = document(text, fmt="markdown")
    assert doc.headings == parse_headings(text)
    chunker = sized(name, size)
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    check_rows_whole(doc, chunks)
    check_headers_carried(doc, chunks, chunker)
