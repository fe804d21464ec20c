"""Parsing: the sample corpus and real evaluation documents, scopes, and every kind of bad input."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.errors import ParseError
from ragloom.parsing import parse_path, parse_sources, scope_from_upload_path
from ragloom.parsing.markdown import parse_headings
from ragloom.settings import SAMPLE_CORPUS
from ragloom.types import Scope, sha256_hex


def reasons(batch) -> dict[str, str]:
    return {r.source_path: r.reason for r in batch.rejections}


# the bundled sample corpus -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_batch():
    return parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS)


def test_sample_corpus_parses_every_file_without_rejections(sample_batch):
    files = sorted(p.relative_to(SAMPLE_CORPUS).as_posix() for p in SAMPLE_CORPUS.rglob("*")
                   if p.is_file() and not p.name.endswith(".meta.json"))
    assert sample_batch.rejections == []
    assert sorted({d.source_path for d in sample_batch.documents}) == files
    assert {d.format for d in sample_batch.documents} == {"markdown", "text", "html", "pdf", "jsonl", "docx", "pptx",
                                                          "xlsx", "csv", "email"}
    assert sum(p.stat().st_size for p in SAMPLE_CORPUS.rglob("*") if p.is_file()) < 200_000


def test_document_ids_are_relative_paths_and_stable(sample_batch):
    again = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS)
    assert [d.document_id for d in again.documents] == [d.document_id for d in sample_batch.documents]
    assert [d.content_hash for d in again.documents] == [d.content_hash for d in sample_batch.documents]
    ids = [d.document_id for d in sample_batch.documents]
    assert len(set(ids)) == len(ids)
    assert "company/teams.md" in ids
    assert "customers/case_studies.jsonl#bergen-marine" in ids  # BEIR-style "_id"
    assert all(not Path(i.split("#")[0]).is_absolute() for i in ids)


def test_markdown_heading_tree_nests_with_offsets(sample_batch):
    doc = next(d for d in sample_batch.documents if d.document_id == "company/overview.md")
    assert doc.title == "Corvane Systems: Company Overview"
    for h in doc.headings:
        assert doc.text[h.start:].startswith("#" * h.level + " " + h.title)
        assert h.start < h.end <= len(doc.text)
    by_title = {h.title: h for h in doc.headings}
    history, founding = by_title["History"], by_title["Founding years (2014-2017)"]
    assert history.start < founding.start < founding.end <= history.end
    assert history.end == by_title["Leadership"].start  # a section ends at the next heading of its level
    assert "converted boathouse" in doc.text[founding.start:founding.end]


def test_fenced_code_is_not_a_heading():
    text = "# Title\n\n```bash\n# not a heading\n```\n\n## Real\n\nbody\n"
    assert [(h.level, h.title) for h in parse_headings(text)] == [(1, "Title"), (2, "Real")]


def test_html_drops_boilerplate_and_keeps_headings(sample_batch):
    doc = next(d for d in sample_batch.documents if d.format == "html")
    assert doc.title == "Corvane Systems acquires Nordlys Optics"
    for boilerplate in ("Contact us", "window.analytics", "Privacy", "font-family", "Related:", "Careers"):
        assert boilerplate not in doc.text
    assert "Maja Eriksen will lead Corvane's new Optics team" in doc.text
    assert [(h.level, h.title) for h in doc.headings][:3] == [
        (1, "Corvane Systems acquires Nordlys Optics"), (2, "Why the two companies are joining"),
        (2, "What changes for customers")]
    assert (3, "First joint project") in [(h.level, h.title) for h in doc.headings]


def test_pdf_text_has_a_page_map(sample_batch):
    doc = next(d for d in sample_batch.documents if d.format == "pdf")
    assert doc.title == "Corvane Systems Annual Report 2024"
    assert len(doc.page_starts) == 2 and doc.page_starts[0] == 0
    assert doc.text[doc.page_starts[1]:].startswith("FINANCIAL STATEMENTS SUMMARY")
    assert "Helene Brattli" in doc.text[: doc.page_starts[1]]
    assert "Fjordline Audit AS" in doc.text[doc.page_starts[1]:]


def test_generated_pdf_page_starts(tmp_path, make_pdf):
    make_pdf(tmp_path / "three.pdf", [["alpha one", "alpha two"], ["beta"], ["gamma Tromsø"]], title="Three")
    (doc,) = parse_path("three.pdf", tmp_path)
    assert [doc.text[s:].split("\n")[0] for s in doc.page_starts] == ["alpha one", "beta", "gamma Tromsø"]
    assert doc.title == "Three"


def test_sidecar_metadata_and_title(sample_batch):
    doc = next(d for d in sample_batch.documents if d.document_id == "policies/security_policy.md")
    assert doc.metadata["owner"] == "Lukas Becker" and doc.metadata["status"] == "published"
    assert doc.title == "Information Security Policy"


def test_text_title_is_first_line(sample_batch):
    doc = next(d for d in sample_batch.documents if d.format == "text")
    assert doc.title == "Corvane Systems - Project Report 2024"
    assert doc.headings == []


# real evaluation documents ---------------------------------------------------------------------------------


def test_obliqa_rulebooks_keep_text_exact_and_get_headings(tmp_path, obliqa_jsonl_lines):
    (tmp_path / "obliqa.jsonl").write_text("".join(obliqa_jsonl_lines), encoding="utf-8")
    batch = parse_sources(["obliqa.jsonl"], tmp_path)
    assert batch.rejections == []
    originals = [json.loads(line) for line in obliqa_jsonl_lines]
    assert [d.document_id for d in batch.documents] == [f"obliqa.jsonl#{o['_id']}" for o in originals]
    for doc, original in zip(batch.documents, originals, strict=True):
        assert doc.text == original["text"]  # gold passages are offsets into this exact text
        assert doc.title == original["title"]
        assert doc.headings and doc.headings[0].level == 1
    cib = batch.documents[0]
    titles = [h.title for h in cib.headings]
    assert "1.2 Captive Insurance Business" in titles


def test_scifact_abstracts(tmp_path, scifact_jsonl_lines):
    (tmp_path / "scifact.jsonl").write_text("".join(scifact_jsonl_lines), encoding="utf-8")
    batch = parse_sources([tmp_path], tmp_path)
    assert batch.rejections == [] and len(batch.documents) == len(scifact_jsonl_lines)
    first = json.loads(scifact_jsonl_lines[0])
    assert batch.documents[0].metadata == first["metadata"]
    assert batch.documents[0].content_hash != batch.documents[1].content_hash


# content hash and scope -----------------------------------------------------------------------------------


def test_content_hash_follows_text_and_sidecar_not_mtime(tmp_path):
    path = tmp_path / "a.md"
    path.write_text("# A\n\nbody\n")
    (first,) = parse_path(path, tmp_path)
    os.utime(path, (1_000_000, 1_000_000))
    (touched,) = parse_path(path, tmp_path)
    assert touched.content_hash == first.content_hash and touched.modified_at != first.modified_at
    (tmp_path / "a.md.meta.json").write_text(json.dumps({"metadata": {"status": "draft"}}))
    (with_meta,) = parse_path(path, tmp_path)
    assert with_meta.content_hash != first.content_hash
    path.write_text("# A\n\nbody changed\n")
    (edited,) = parse_path(path, tmp_path)
    assert edited.content_hash not in (first.content_hash, with_meta.content_hash)
    assert sha256_hex(edited.text) != sha256_hex(first.text)


def test_scope_from_upload_path():
    assert scope_from_upload_path("acme/alice/chat-1/notes.md") == Scope("acme", "alice", "chat-1")
    assert scope_from_upload_path("acme/alice/chat-1/sub/dir/notes.md") == Scope("acme", "alice", "chat-1")
    assert scope_from_upload_path("acme/alice/notes.md") == Scope("acme", "alice")
    assert scope_from_upload_path("acme/notes.md") == Scope("acme")  # tenant-wide, as the README says
    with pytest.raises(ParseError) as e:
        scope_from_upload_path("notes.md")
    assert e.value.reason == "unscoped" and "<tenant>/, <tenant>/<user>/ or <tenant>/<user>/<chat>/" in str(e.value)
    with pytest.raises(ParseError):
        scope_from_upload_path("acme/__shared__/c/notes.md")


def test_scopes_from_upload_folders_and_sidecars(tmp_path):
    chat = tmp_path / "acme" / "alice" / "chat-1"
    chat.mkdir(parents=True)
    (chat / "plain.md").write_text("# Plain\n\ntext\n")
    (chat / "agent.md").write_text("# Agent\n\ntext\n")
    (chat / "agent.md.meta.json").write_text(json.dumps({"scope": {"tenant": "acme", "user": "alice",
                                                                   "chat": "chat-1", "agent": "bot"}}))
    (chat / "escape.md").write_text("# Escape\n\ntext\n")
    (chat / "escape.md.meta.json").write_text(json.dumps({"scope": "globex/mallory"}))
    (tmp_path / "orphan.md").write_text("no owner\n")
    batch = parse_sources([tmp_path], tmp_path, scope_from_path=True)
    scopes = {d.document_id: d.scope.path for d in batch.documents}
    assert scopes == {"acme/alice/chat-1/plain.md": "acme/alice/chat-1",
                      "acme/alice/chat-1/agent.md": "acme/alice/chat-1/bot"}
    assert reasons(batch) == {"acme/alice/chat-1/escape.md": "scope_conflict", "orphan.md": "unscoped"}


def test_sidecar_can_scope_a_shared_file_and_is_never_a_document(tmp_path):
    (tmp_path / "a.txt").write_text("private text\n")
    (tmp_path / "a.txt.meta.json").write_text(json.dumps({"scope": "acme/alice"}))
    (tmp_path / ".hidden.md").write_text("# hidden\n")
    batch = parse_sources([tmp_path, tmp_path / "a.txt.meta.json"], tmp_path)
    assert [(d.document_id, d.scope) for d in batch.documents] == [("a.txt", Scope("acme", "alice"))]
    assert batch.rejections == []


# bad input: one test per kind ----------------------------------------------------------------------------


def test_zero_byte_and_blank_files_are_empty(tmp_path):
    (tmp_path / "zero.md").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("  \n\t\n")
    batch = parse_sources([tmp_path], tmp_path)
    assert batch.documents == []
    assert reasons(batch) == {"zero.md": "empty", "blank.txt": "empty"}
    assert all(r.detail for r in batch.rejections)


def test_binary_files_are_rejected(tmp_path):
    (tmp_path / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (tmp_path / "controls.txt").write_bytes(bytes([1, 2, 3, 4, 5, 6, 7, 8]) * 20 + b"text")
    assert reasons(parse_sources([tmp_path], tmp_path)) == {"image.md": "binary", "controls.txt": "binary"}


def test_undecodable_text_is_rejected_and_bom_encodings_are_accepted(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("Tromsø café".encode("latin-1"))
    (tmp_path / "utf16.md").write_bytes(codecs.BOM_UTF16_LE + "# Tromsø\n\nbody\n".encode("utf-16-le"))
    (tmp_path / "utf8sig.md").write_bytes(codecs.BOM_UTF8 + "# Bergen\n\nbøk\n".encode())
    batch = parse_sources([tmp_path], tmp_path)
    assert reasons(batch) == {"latin1.txt": "undecodable"}
    assert {d.title for d in batch.documents} == {"Tromsø", "Bergen"}
    assert all(not d.text.startswith("\ufeff") for d in batch.documents)


def test_corrupt_and_textless_pdfs(tmp_path, make_pdf):
    (tmp_path / "garbage.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    whole = make_pdf(tmp_path / "whole.pdf", [["some text on page one"]]).read_bytes()
    (tmp_path / "truncated.pdf").write_bytes(whole[: len(whole) // 3])
    make_pdf(tmp_path / "scanned.pdf", [[], []])
    batch = parse_sources([tmp_path], tmp_path)
    got = reasons(batch)
    assert got["garbage.pdf"] == "corrupt"
    assert got["scanned.pdf"] == "empty"
    # a truncated file loses its xref and trailer: pypdf either fails or finds no text, never a document
    assert got["truncated.pdf"] in ("corrupt", "empty")
    assert [d.document_id for d in batch.documents] == ["whole.pdf"]


def test_oversized_files_are_rejected(tmp_path):
    (tmp_path / "big.txt").write_text("word " * 1000)
    (tmp_path / "small.txt").write_text("word")
    batch = parse_sources([tmp_path], tmp_path, max_bytes=1000)
    assert reasons(batch) == {"big.txt": "oversized"}
    assert [d.document_id for d in batch.documents] == ["small.txt"]


def test_malformed_jsonl_lines_are_rejected_one_by_one(tmp_path):
    lines = [
        json.dumps({"id": "good-1", "title": "One", "text": "first", "metadata": {"k": 1}}),
        "{not json",
        json.dumps({"id": "no-text", "title": "x"}),
        json.dumps(["a", "list"]),
        json.dumps({"text": "no id"}),
        json.dumps({"id": "good-1", "text": "duplicate"}),
        json.dumps({"id": "blank", "text": "   "}),
        json.dumps({"id": "bad-meta", "text": "t", "metadata": "nope"}),
        "",
        json.dumps({"_id": 7, "text": "beir style"}),
    ]
    (tmp_path / "docs.jsonl").write_text("\n".join(lines) + "\n")
    batch = parse_sources(["docs.jsonl"], tmp_path)
    assert [d.document_id for d in batch.documents] == ["docs.jsonl#good-1", "docs.jsonl#7"]
    assert batch.documents[0].metadata == {"k": 1}
    assert {r.source_path for r in batch.rejections} == {"docs.jsonl"}
    details = [r.detail for r in batch.rejections]
    assert [d.split(":")[0] for d in details] == ["line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8"]
    assert [r.reason for r in batch.rejections] == ["malformed"] * 5 + ["empty", "malformed"]
    with pytest.raises(ParseError):  # without a callback the strict API raises on the first bad line
        parse_path("docs.jsonl", tmp_path)


def test_symlink_outside_root_is_rejected(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# secret\n")
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "inside.md").write_text("# inside\n")
    (root / "alias.md").symlink_to(root / "inside.md")
    batch = parse_sources([root], root)
    assert reasons(batch) == {"link.md": "outside_root", "linkdir": "unsupported"}
    assert sorted(d.document_id for d in batch.documents) == ["alias.md", "inside.md"]
    assert all("secret" not in d.text for d in batch.documents)


def test_path_traversal_is_rejected(tmp_path):
    root = tmp_path / "uploads"
    root.mkdir()
    (tmp_path / "passwd").write_text("root:x:0:0\n")
    batch = parse_sources(["../../etc/passwd", "../passwd", "a/../../other", "/etc/hostname"], root)
    assert batch.documents == []
    assert [r.reason for r in batch.rejections] == ["outside_root"] * 4
    assert batch.rejections[0].source_path == "../../etc/passwd"
    with pytest.raises(ParseError) as e:
        parse_path("../passwd", root)
    assert e.value.reason == "outside_root"


def test_a_folder_outside_the_root_is_one_rejection_and_not_walked(tmp_path):
    root = tmp_path / "uploads"
    (root / "acme").mkdir(parents=True)
    (root / "acme" / "in.md").write_text("# In\n")
    (tmp_path / "outside" / "sub").mkdir(parents=True)
    (tmp_path / "outside" / "sub" / "secret.md").write_text("# Secret\n")
    (root / "acme" / "up").symlink_to(tmp_path / "outside", target_is_directory=True)
    batch = parse_sources(["/", "..", "acme/../..", "acme/up/sub"], root)
    assert batch.documents == []
    assert [(r.source_path, r.reason) for r in batch.rejections] == [
        ("/", "outside_root"), ("..", "outside_root"), ("acme/../..", "outside_root"), ("acme/up/sub", "outside_root")]
    assert [d.source_path for d in parse_sources(["acme", "."], root).documents] == ["acme/in.md"]


def test_unsupported_missing_and_bad_sidecar(tmp_path):
    (tmp_path / "data.xls").write_text("a,b\n")
    (tmp_path / "typo.md").write_text("# Typo\n")
    (tmp_path / "typo.md.meta.json").write_text(json.dumps({"scopes": "acme"}))
    (tmp_path / "broken.md").write_text("# Broken\n")
    (tmp_path / "broken.md.meta.json").write_text("{")
    batch = parse_sources([tmp_path, "missing.md"], tmp_path)
    assert reasons(batch) == {"broken.md": "malformed", "data.xls": "unsupported", "typo.md": "malformed",
                              "missing.md": "unreadable"}
    assert batch.documents == []
    gone = parse_sources([tmp_path / "no-such-folder"], tmp_path / "no-such-folder")
    assert [(r.reason, r.detail.endswith("no such file or folder")) for r in gone.rejections] == [("unreadable", True)]


def test_html_only_boilerplate_or_deeply_nested(tmp_path):
    (tmp_path / "nav.html").write_text("<html><body><nav>Home About</nav><footer>(c)</footer></body></html>")
    (tmp_path / "deep.html").write_text("<div>" * 5000 + "deep text" + "</div>" * 5000)
    batch = parse_sources([tmp_path], tmp_path)
    assert reasons(batch).get("nav.html") == "empty"
    deep = [d for d in batch.documents if d.document_id == "deep.html"]
    # either parsed (lxml flattens very deep trees) or rejected with a reason: never an exception
    assert (deep and "deep text" in deep[0].text) or reasons(batch).get("deep.html")


def test_one_bad_file_does_not_stop_the_batch(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nfine\n")
    (tmp_path / "b.md").write_bytes(b"\xff\xfe\xfa")  # BOM then an odd byte count: undecodable UTF-16
    (tmp_path / "c.txt").write_text("fine too\n")
    batch = parse_sources([tmp_path], tmp_path)
    assert [d.document_id for d in batch.documents] == ["a.md", "c.txt"]
    assert [(r.source_path, r.reason) for r in batch.rejections] == [("b.md", "undecodable")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600), suffix=st.sampled_from([".md", ".txt", ".html", ".pdf", ".jsonl"]))
def test_random_bytes_never_crash_the_batch(tmp_path, data, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    batch = parse_sources([path], tmp_path)
    assert batch.documents or batch.rejections
    for doc in batch.documents:
        assert doc.text.strip() and doc.document_id.startswith("fuzz")
    for rejection in batch.rejections:
        assert rejection.reason and rejection.detail


def test_evaluation_corpora_and_ingested_jsonl_share_one_reader(tmp_path):
    """Files -> documents in one place: the evaluation's corpus reader is the ingestion's JSONL path, with bare
    record ids (the qrels name them), the dataset as metadata, and per-record markdown/text formats."""
    from ragloom.evaluation.datasets import read_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "d1", "title": "T", "text": "# Part\n\nbody", "metadata": {"source": "x"}})
                    + "\n" + json.dumps({"_id": 2, "text": "plain"}) + "\n")
    ingested = parse_path(path, tmp_path)
    evaluated = read_corpus(path, "tiny")
    assert [d.document_id for d in ingested] == ["corpus.jsonl#d1", "corpus.jsonl#2"]
    assert [d.document_id for d in evaluated] == ["d1", "2"]
    for a, b in zip(ingested, evaluated, strict=True):
        assert (a.text, a.title, a.headings) == (b.text, b.title, b.headings)
    assert ingested[0].metadata == {"source": "x"} and evaluated[0].metadata == {"dataset": "tiny"}
    assert [d.format for d in evaluated] == ["markdown", "text"] and ingested[0].format == "jsonl"
    path.write_text(path.read_text() + "{broken\n")
    with pytest.raises(ParseError, match=r"corpus.jsonl: line 3: invalid JSON"):
        read_corpus(path, "tiny")
