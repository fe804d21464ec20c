"""Bad input, fuzzed: every file becomes a correct document or a recorded rejection and no input sinks the batch;
hostile filters are FilterErrors naming the field; the CLI answers bad arguments with one clear line.

tests/unit/parsing/test_parsing.py and tests/unit/test_filters.py hold the example-based cases; this module throws
volume and variety at the same code and counts what it tried.
"""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from polling import free_port
from reliability_support import REPO

from ragloom.cli import main as cli_main
from ragloom.errors import FilterError, RagloomError
from ragloom.filters import (
    CORE_FIELDS,
    MAX_CONDITIONS,
    MAX_LIST,
    MAX_STRING,
    bind,
    parse_filters,
)
from ragloom.parsing import FORMATS, parse_sources
from ragloom.parsing.pdf import pdf_to_text
from ragloom.settings import SAMPLE_CORPUS
from ragloom.stores.weaviate import to_weaviate

PDF = SAMPLE_CORPUS / "reports" / "annual_report_2024.pdf"
EXTENSIONS = sorted(FORMATS)
def fuzz(examples: int) -> hypothesis_settings:
    return hypothesis_settings(max_examples=examples, deadline=None, database=None,
                               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])



tried: Counter[str] = Counter()  # inputs tried per kind, reported by test_report_inputs_tried


def fresh_root(tmp_path: Path) -> Path:
    """A new empty folder per hypothesis example (tmp_path is shared by all examples of a test)."""
    root = tmp_path / f"ex{sum(tried.values())}_{time.monotonic_ns()}"
    root.mkdir()
    return root


# reasons reported beside a document that was still indexed (ragloom.parsing.pdf: pages without a text layer)
PARTIAL_REPORTS = {"pages_without_text"}


def check_batch(batch, root: Path, expected: dict[str, bytes]) -> None:
    """Every input is one document (or, for JSONL, documents/line rejections) or one rejection, never both or
    neither (a document may carry reports on part of it); documents are correct parses of their bytes; rejections
    say why."""
    accounted: Counter[str] = Counter()
    for doc in batch.documents:
        accounted[doc.source_path] += 0 if doc.format == "jsonl" else 1
        assert doc.text.strip(), doc.document_id
        assert doc.document_id == doc.source_path or doc.format == "jsonl"
        data = expected.get(doc.source_path)
        if doc.format in ("markdown", "text") and data is not None:
            assert doc.text == _decode(data), doc.document_id  # text formats are kept exactly
        if doc.format == "pdf":
            assert doc.page_starts == sorted(doc.page_starts) and all(0 <= s <= len(doc.text) for s in doc.page_starts)
    parsed = {doc.source_path for doc in batch.documents}
    for rejection in batch.rejections:
        assert rejection.reason and rejection.detail, rejection
        if rejection.source_path in parsed:
            # a document may come with a report on part of it (a PDF page without text), never a rejection
            assert rejection.reason in PARTIAL_REPORTS, rejection
            continue
        if not rejection.source_path.endswith(".jsonl"):
            accounted[rejection.source_path] += 1
    jsonl = {d.source_path for d in batch.documents if d.format == "jsonl"}
    for name in expected:
        if name.endswith(".jsonl"):
            assert name in jsonl or any(r.source_path == name for r in batch.rejections), name
        else:
            assert accounted[name] == 1, (name, accounted[name], batch.rejections)


def _decode(data: bytes) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return data.decode("utf-8-sig")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16")
    return data.decode("utf-8")


# --- parsers ----------------------------------------------------------------------------------------------


@fuzz(80)
@given(files=st.lists(st.tuples(st.sampled_from(EXTENSIONS), st.binary(max_size=2000)), min_size=1, max_size=6))
def test_random_bytes_in_a_batch_with_a_good_file(tmp_path, files):
    root = fresh_root(tmp_path)
    expected = {"good.md": b"# Good\n\nStill parsed.\n"}
    (root / "good.md").write_bytes(expected["good.md"])
    for i, (ext, data) in enumerate(files):
        (root / f"f{i}{ext}").write_bytes(data)
        expected[f"f{i}{ext}"] = data
    tried["random bytes"] += len(files)
    batch = parse_sources([root], root)
    check_batch(batch, root, expected)
    assert [d.text for d in batch.documents if d.document_id == "good.md"] == ["# Good\n\nStill parsed.\n"]


@pytest.fixture(scope="module")
def pdf_lines() -> set[str]:
    return set(pdf_to_text(PDF.read_bytes()).text.splitlines())


@fuzz(80)
@given(cut=st.floats(0.0, 1.0), flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=4))
def test_truncated_and_corrupted_pdfs(tmp_path, pdf_lines, cut, flips):
    data = bytearray(PDF.read_bytes())
    for where, value in flips:
        data[int(where * (len(data) - 1))] = value
    truncated = bytes(data[: int(cut * len(data))])
    root = fresh_root(tmp_path)
    (root / "report.pdf").write_bytes(truncated)
    tried["truncated/corrupted pdf"] += 1
    batch = parse_sources([root], root)
    check_batch(batch, root, {"report.pdf": truncated})
    if batch.documents and not flips:  # a truncated file recovers only text the whole file has
        assert set(batch.documents[0].text.splitlines()) <= pdf_lines


NESTING_TAGS = ["div", "span", "b", "section", "li", "table", "td", "p", "blockquote", "a", "font", "x-custom"]


@fuzz(20)
@given(depth=st.integers(1, 30_000), tags=st.lists(st.sampled_from(NESTING_TAGS), min_size=1, max_size=3),
       closed=st.booleans())
def test_deeply_nested_html(tmp_path, depth, tags, closed):
    opening = "".join(f"<{tags[i % len(tags)]}>" for i in range(depth))
    closing = "".join(f"</{tags[i % len(tags)]}>" for i in reversed(range(depth))) if closed else ""
    data = f"<html><body>{opening}needle text{closing}</body></html>".encode()
    root = fresh_root(tmp_path)
    (root / "deep.html").write_bytes(data)
    tried["deeply nested html"] += 1
    batch = parse_sources([root], root)
    check_batch(batch, root, {"deep.html": data})
    if batch.documents:
        assert "needle text" in batch.documents[0].text


def test_huge_lines_and_the_size_limit(tmp_path, report):
    line = ("lorem ipsum dolor sit amet " * 400_000).encode()  # one 10.8 MB line, no newline
    files = {"huge.txt": line, "huge.md": b"# " + line, "huge.html": b"<p>" + line + b"</p>",
             "huge.jsonl": json.dumps({"id": 1, "text": line.decode()}).encode()}
    limit = 1_000_000
    files |= {"at_limit.txt": b"a" * limit, "over_limit.txt": b"a" * (limit + 1)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    started = time.perf_counter()
    big = parse_sources([tmp_path / n for n in ("huge.txt", "huge.md", "huge.html", "huge.jsonl")], tmp_path)
    seconds = time.perf_counter() - started
    small = parse_sources([tmp_path / "at_limit.txt", tmp_path / "over_limit.txt"], tmp_path, max_bytes=limit)
    tried["huge lines"] += len(files)
    assert sorted(d.source_path for d in big.documents) == ["huge.html", "huge.jsonl", "huge.md", "huge.txt"]
    assert all(len(d.text) >= len(line.strip()) for d in big.documents)
    assert [d.source_path for d in small.documents] == ["at_limit.txt"]
    assert [(r.source_path, r.reason) for r in small.rejections] == [("over_limit.txt", "oversized")]
    report(kind="huge lines", bytes_per_file=len(line), parse_seconds=round(seconds, 2))


ENCODINGS = ["latin-1", "cp1252", "shift_jis", "utf-16-le", "utf-16-be", "utf-32", "koi8-r", "gb2312", "utf-8"]


@fuzz(100)
@given(text=st.text(min_size=1, max_size=300), encoding=st.sampled_from(ENCODINGS),
       ext=st.sampled_from([".md", ".txt", ".html", ".jsonl"]))
def test_non_utf8_text(tmp_path, text, encoding, ext):
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        data = text.encode(encoding, errors="replace")
    root = fresh_root(tmp_path)
    (root / f"doc{ext}").write_bytes(data)
    tried["non-utf-8 text"] += 1
    batch = parse_sources([root], root)
    check_batch(batch, root, {f"doc{ext}": data})
    for rejection in batch.rejections:
        if ext != ".jsonl":
            assert rejection.reason in ("undecodable", "binary", "empty", "corrupt"), rejection


def test_zero_byte_files_of_every_kind(tmp_path):
    expected = {f"empty{ext}": b"" for ext in EXTENSIONS}
    for name in expected:
        (tmp_path / name).write_bytes(b"")
    tried["zero-byte files"] += len(expected)
    batch = parse_sources([tmp_path], tmp_path)
    check_batch(batch, tmp_path, expected)
    assert batch.documents == []
    assert {r.reason for r in batch.rejections} <= {"empty", "corrupt"}


@fuzz(25)
@given(links=st.lists(st.tuples(st.sampled_from(["inside", "outside", "dangling", "loop", "dir_out", "self", "etc",
                                                  "fifo", "chain"]), st.sampled_from(EXTENSIONS)),
                      min_size=1, max_size=8))
def test_symlinks_of_every_kind(tmp_path, links):
    base = fresh_root(tmp_path)
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# outside secret\n")
    (root / "real.md").write_text("# real\n\ninside text\n")
    os.mkfifo(root / "pipe.md")
    targets = {"inside": root / "real.md", "outside": outside / "secret.md", "dangling": root / "nowhere.md",
               "dir_out": outside, "etc": Path("/etc/passwd"), "fifo": root / "pipe.md"}
    for i, (kind, ext) in enumerate(links):
        link = root / f"l{i}{ext}"
        if kind == "loop":
            (root / f"l{i}b").symlink_to(link)
            link.symlink_to(root / f"l{i}b")
        elif kind == "self":
            link.symlink_to(link)
        elif kind == "chain":
            (root / f"l{i}c.md").symlink_to(outside / "secret.md")
            link.symlink_to(root / f"l{i}c.md")
        else:
            link.symlink_to(targets[kind])
    tried["symlinks"] += len(links)
    batch = parse_sources([root], root)  # must not block on the FIFO, loop forever or follow links out
    assert all("outside secret" not in d.text and "root:" not in d.text for d in batch.documents)
    assert "real.md" in {d.document_id for d in batch.documents}
    named = {d.source_path for d in batch.documents} | {r.source_path for r in batch.rejections}
    assert {f"l{i}{ext}" for i, (_, ext) in enumerate(links)} <= named
    for i, (kind, ext) in enumerate(links):
        if kind in ("outside", "etc", "chain", "dir_out"):
            assert f"l{i}{ext}" not in {d.source_path for d in batch.documents}


upload_names = st.one_of(
    st.sampled_from(["../../etc/passwd", "../secret.md", "a/../../x.md", "/etc/passwd", "..", ".", "a/b/../../..",
                     "acme/alice/c1/../../../../../etc/hostname", "acme/alice/c1/..%2f..%2fx.md", "\\..\\..\\x.md",
                     "a" * 300 + ".md", "d/" * 200 + "x.md", "x\x00.md", "\udcff.md", "ok\n.md", "~/.ssh/id_rsa"]),
    st.lists(st.sampled_from(["..", ".", "acme", "alice", "c1", "", "etc", "passwd", "x.md", "…", "\u202e"]),
             min_size=1, max_size=8).map("/".join),
    st.text(min_size=1, max_size=80),
)


@fuzz(100)
@given(names=st.lists(upload_names, min_size=1, max_size=5), scope_from_path=st.booleans())
def test_path_traversal_and_odd_upload_names(tmp_path, names, scope_from_path):
    base = fresh_root(tmp_path)
    root = base / "uploads"
    (root / "acme" / "alice" / "c1").mkdir(parents=True)
    (root / "acme" / "alice" / "c1" / "note.md").write_text("# note\n")
    (base / "secret.md").write_text("# outside secret\n")
    tried["path traversal / odd names"] += len(names)
    batch = parse_sources(names, root, scope_from_path=scope_from_path)
    for doc in batch.documents:  # whatever was accepted lies inside the root
        assert (root / doc.source_path).resolve().is_relative_to(root.resolve()), doc.source_path
        assert "outside secret" not in doc.text


@pytest.mark.parametrize("how", ["rewrite in place", "atomic rename", "grow by appending"])
def test_files_that_change_while_being_read(tmp_path, report, how):
    """A writer thread keeps replacing files while batches parse them. An atomic rename: each read is a rejection
    or a parse of one whole version. Appending in pieces, and a rewrite in place whose one write() spans more
    than a page (the third version is 4.2 KB), can be read between two steps of the writer with size and mtime
    unchanged across the read: a parse then shows a prefix of a version, never a mix of two, and the uploads
    sensor's next tick re-indexes the file (its cursor sees the new size and hash)."""
    texts = [(f"# Version {i}\n\n" + f"body {i} " * (200 * (i + 1)) + "\n").encode() for i in range(3)]
    pdf = PDF.read_bytes()
    stop = threading.Event()
    writes = Counter()

    def writer(path: Path, contents: list[bytes]) -> None:
        i = 0
        while not stop.is_set():
            data = contents[i % len(contents)]
            if how == "rewrite in place":
                path.write_bytes(data)
            elif how == "atomic rename":
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_bytes(data)
                tmp.replace(path)
            else:
                path.write_bytes(b"")
                with open(path, "ab") as f:
                    for start in range(0, len(data), 512):
                        f.write(data[start:start + 512])
                        f.flush()
            writes[path.name] += 1
            i += 1
            time.sleep(0.0005)  # let the parsing thread have the GIL between writes

    (tmp_path / "moving.md").write_bytes(texts[0])
    (tmp_path / "moving.pdf").write_bytes(pdf)
    threads = [threading.Thread(target=writer, args=(tmp_path / "moving.md", texts)),
               threading.Thread(target=writer, args=(tmp_path / "moving.pdf", [pdf, pdf[: len(pdf) // 2]]))]
    for t in threads:
        t.start()
    outcomes: Counter[str] = Counter()
    whole = {t.decode() for t in texts}
    try:
        for _ in range(60):
            batch = parse_sources([tmp_path], tmp_path)
            tried["files changing while read"] += 2
            for doc in batch.documents:
                if doc.format == "markdown":
                    if doc.text in whole:
                        outcomes["whole version"] += 1
                    else:
                        outcomes["prefix read"] += 1
                        assert how != "atomic rename", "an atomic rename showed a partial version"
                        assert any(w.startswith(doc.text) for w in whole), "not even a prefix of a version"
                else:
                    outcomes["pdf parsed"] += 1
            for rejection in batch.rejections:
                outcomes[f"rejected {rejection.reason}"] += 1
            named = {d.source_path for d in batch.documents} | {r.source_path for r in batch.rejections}
            assert named == {"moving.md", "moving.pdf"}, (batch.documents, batch.rejections)
    finally:
        stop.set()
        for t in threads:
            t.join()
    report(kind=f"files changing while read ({how})", writes=dict(writes), outcomes=dict(outcomes))
    assert outcomes["whole version"] > 0


# --- the filter language ------------------------------------------------------------------------------------

TYPES = {"meta_year": "INT", "meta_score": "NUMBER", "meta_status": "TEXT", "meta_tags": "TEXT_ARRAY",
         "meta_published": "DATE", "meta_flag": "BOOL", **CORE_FIELDS}
good_conditions = st.sampled_from([
    ("status", "published"), ("year", {"gte": 2020}), ("tags", ["a", "b"]), ("title", {"contains": "Neural"}),
    ("level", 0), ("published", {"lt": "2024-01-01"}), ("flag", True), ("score", {"gt": 0.5}),
])
HOSTILE_VALUES = [
    None, float("nan"), float("inf"), -float("inf"), 10**400, -(10**400), 2**63, -(2**63) - 1, 10**19 + 0.5,
    "x\x00y", "x" * (MAX_STRING + 1), [], [None], [1, "a"], list(range(MAX_LIST + 1)), {"eq": {"eq": 1}},
    {"gte": "yesterday"}, {"gte": True}, {"contains": 5}, {"contains": []}, {"in": "notalist"}, {"regex": ".*"},
    {"$where": "1"}, {}, {"not": None}, b"bytes", {1, 2}, object(), 1j, {"gt": "2024-13-45"},
    {"gt": 1, "lt": "2024-01-01"}, {"eq": [1, 2]}, {"contains": "x" * (MAX_STRING + 1)},
]
HOSTILE_KEYS = ["scope_path", "scope", "scope_tenant", "and", "or", "x" * 65, "a'b", 'a"b', "a}b", "a\\b", "a;b",
                "a\x00b", "\u0455cope_path", "", " ", "$ns", "a/b", "a\nb", "DETACH DELETE", "not not"]
field_names = st.one_of(st.sampled_from(["status", "year", "score", "title", "level", "tags", "published", "flag",
                                         "document_id", "source_path", "heading_path", "parent_id", "strategy"]),
                        st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True))


def _parse_bind_translate(spec) -> None:
    node = parse_filters(spec)
    for types in (None, TYPES):
        to_weaviate(bind(node, types))


@fuzz(300)
@given(good=st.lists(good_conditions, max_size=3), field=field_names, bad=st.sampled_from(HOSTILE_VALUES),
       negate=st.booleans(), as_json=st.booleans())
@example(good=[], field="year", bad=10**400, negate=False, as_json=False)  # found by this test: always tried
@example(good=[], field="score", bad=-(10**400), negate=True, as_json=False)
def test_a_hostile_value_is_a_filter_error_naming_its_field(good, field, bad, negate, as_json):
    spec = dict(good)
    spec.pop(field, None)
    spec[field] = bad
    if negate:
        spec = {"not": spec}
    if as_json:
        try:
            spec = json.dumps(spec, allow_nan=True)
        except (TypeError, ValueError):
            return  # not expressible as JSON text; the dict form is tried in other examples
    tried["hostile filter values"] += 1
    try:
        _parse_bind_translate(spec)
    except FilterError as e:
        assert repr(field) in str(e) or f"{field}'" in str(e) or "JSON" in str(e), str(e)


@fuzz(200)
@given(key=st.one_of(st.sampled_from(HOSTILE_KEYS), st.text(max_size=70)), value=st.sampled_from(["x", 1, [1]]))
def test_hostile_field_names_never_reach_the_scope(key, value):
    tried["hostile filter keys"] += 1
    try:
        node = parse_filters({key: value})
    except FilterError as e:
        assert repr(key[:64]) in str(e) or repr(key) in str(e), str(e)
        return
    props = {c.prop for c in _conditions(node)}
    assert not any(p.startswith("scope") for p in props), props  # scope is never a user filter


def _conditions(node):
    from ragloom.filters import AllOf, Condition, Not

    if isinstance(node, Condition):
        return [node]
    if isinstance(node, Not):
        return _conditions(node.child)
    if isinstance(node, AllOf):
        return [c for child in node.children for c in _conditions(child)]
    return []


@pytest.fixture(scope="module")
def numbers_collection(settings, module_weaviate_store_factory):
    """A scratch collection on the shared stack whose chunks carry INT, NUMBER, DATE and TEXT metadata."""
    from reliability_support import HashEmbedder

    from ragloom.api import Ragloom
    from ragloom.metadata import MetadataLayout
    from ragloom.types import Chunk

    store = module_weaviate_store_factory()  # dropped, and checked gone, after the module
    store.metadata = MetadataLayout(declared={"year": "INT", "score": "NUMBER", "published": "DATE"})  # as declared
    chunks = [Chunk(chunk_id=f"c{i}", document_id=f"d{i}", strategy="recursive", text=f"year text {i}", start=0,
                    end=11, token_count=3, position=0,
                    metadata={"year": 2000 + i, "score": i / 3, "published": f"2024-01-0{i + 1}", "status": "x"})
              for i in range(3)]
    store.ensure_collection("recursive", HashEmbedder.dimension, HashEmbedder.model_id)
    store.upsert_chunks("recursive", chunks, HashEmbedder().encode([c.text for c in chunks]))
    return Ragloom(settings, vectors=store, embedder=HashEmbedder())


STORE_HOSTILE = [{"year": 2**63}, {"year": {"gte": 2**63}}, {"score": 10**400}, '{"year": ' + "9" * 30 + "}",
                 {"published": {"gt": 2**70}}, {"status": 10**400}, {"year": {"gte": "2024-01-01"}},
                 {"published": {"gte": 1e308}}, {"year": 1.5}, {"score": True}, {"status": {"gt": 1}}]


@pytest.mark.parametrize("spec", STORE_HOSTILE, ids=[str(s)[:40] for s in STORE_HOSTILE])
def test_hostile_filter_values_against_the_real_store(numbers_collection, spec):
    """Through the API to Weaviate: a value its field cannot hold is a FilterError naming the field, never a
    ValueError/OverflowError from the conversion or the gRPC encoder."""
    tried["hostile filters through the store"] += 1
    field = next(iter(json.loads(spec) if isinstance(spec, str) else spec))
    try:
        numbers_collection.query("year text", strategy="bm25", k=3, filters=spec, abstain=False)
    except FilterError as e:
        assert repr(field) in str(e), str(e)


def test_filter_limits_hold_against_big_inputs():
    tried["oversized filters"] += 4
    for spec in ({f"k{i}": i for i in range(MAX_CONDITIONS + 1)}, "[" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000,
                 {"year": {"in": list(range(MAX_LIST + 1))}}):
        with pytest.raises(FilterError):
            _parse_bind_translate(spec)


# --- the CLI --------------------------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    (["--filter", "garbage"], "filter"),
    (["--filter", "[1, 2]"], "filter"),
    (["--filter", '{"scope_path": "acme"}'], "scope"),
    (["--filter", '{"year": {"gte": "soon"}}'], "year"),
    (["--filter", '{"year": 1e999}'], "year"),
    (["--scope", "acme//c1"], "scope"),
    (["--scope", "a/b/c/d/e"], "scope"),
    (["--scope", "__shared__/x"], "scope"),
    (["-k", "0"], "k"),
    (["-k", "100000"], "k"),
    (["--chunking", "nope"], "chunking"),
]


@pytest.mark.parametrize(("extra", "names"), BAD_ARGUMENTS)
def test_cli_bad_arguments_get_one_clear_line(settings, namespace, monkeypatch, capsys, extra, names):
    monkeypatch.setenv("RAGLOOM_COLLECTION_PREFIX", namespace)  # an empty namespace: nothing to find anyway
    tried["cli bad arguments"] += 1
    code = cli_main(["query", "what is ragloom?", *extra])  # an uncaught exception would fail this test
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1 and err.startswith("ragloom: error:"), err
    assert names in err.lower(), err


def test_cli_entry_point_prints_no_traceback(settings, namespace):
    """The real `python -m ragloom` process, failing on its input and on a server that is not there."""
    env = {**os.environ, "RAGLOOM_COLLECTION_PREFIX": namespace}
    down = {**env, "RAGLOOM_WEAVIATE_HTTP_PORT": str(free_port()), "RAGLOOM_WEAVIATE_GRPC_PORT": str(free_port())}
    for args, environ in [(["--filter", "garbage"], env), ([], down)]:
        proc = subprocess.run([sys.executable, "-m", "ragloom", "query", "anything", *args], cwd=REPO, env=environ,
                              capture_output=True, text=True, timeout=120)
        tried["cli bad arguments"] += 1
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# --- the query job's config (what the Launchpad accepts) ------------------------------------------------------

def _family(cls: type) -> set[str]:
    return {cls.__name__}.union(*(_family(sub) for sub in cls.__subclasses__()))


RAGLOOM_ERRORS = _family(RagloomError) | {"Failure"}  # ours (QueryError, FilterError, ...), or Dagster's Failure


@pytest.fixture(scope="module")
def query_job(settings, tmp_path_factory):
    """The repo's query job against an empty namespace of the shared stack (nothing is ever found)."""
    from pipelines.query import query_job as job
    from resources import default_resources

    prefix = f"Nothing{os.getpid()}x{time.time_ns() % 10**6}"
    resources = default_resources(tmp_path_factory.mktemp("query"), collection_prefix=prefix,
                                  graph_namespace=prefix.lower())
    return lambda config: job.execute_in_process(run_config={"ops": {"run_queries": {"config": config}}},
                                                 resources=resources, raise_on_error=False)


def _bad_jsonl(tmp_path: Path) -> str:
    path = tmp_path / "queries.jsonl"
    path.write_text('{"text": "fine"}\n{"text": broken\n{"no_text": 1}\n')
    return str(path)


JOB_CONFIGS = [
    ({"filters": "garbage"}, "filter"),
    ({"filters": '{"scope_path": "other-tenant"}'}, "scope"),
    ({"scope": "acme//c1"}, "scope"),
    ({"k": 0}, "k"),
    ({"chunking": "nope"}, "chunking"),
    ({"queries_file": "/no/such/file.txt"}, "queries_file"),
    ({"queries_file": "/etc/passwd"}, "queries_file"),  # any file the process can read would become queries
    ({"queries_file": _bad_jsonl}, "queries_file"),
    ({"transforms": "hyde,nope"}, "transform"),
    ({"answer": True, "generation": "nope"}, "generation"),
]


def _config_id(config: dict) -> str:
    """The config as text, a callable by its name (its repr holds an address: another id on every run)."""
    return str({k: getattr(v, "__name__", v) if callable(v) else v for k, v in config.items()})


@pytest.mark.parametrize(("config", "names"), JOB_CONFIGS, ids=[_config_id(c) for c, _ in JOB_CONFIGS])
def test_query_job_config_errors_are_clear(query_job, tmp_path, config, names):
    """A malformed or hostile Launchpad config fails the run with one of our errors naming the setting, never a
    stray FileNotFoundError/JSONDecodeError, and never reads files outside the project's folders."""
    config = {k: (v(tmp_path) if callable(v) else v) for k, v in config.items()}
    tried["query job configs"] += 1
    result = query_job({"strategy": "bm25", **config})
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    cause = error.cause or error
    message = cause.message.splitlines()[0]
    assert cause.cls_name in RAGLOOM_ERRORS, f"{cause.cls_name}: {message}"
    assert names in message.lower(), message


def test_report_inputs_tried(report):
    """Last in the module: the counts of inputs every test above tried, per kind."""
    report(inputs_tried=dict(tried), total=sum(tried.values()))
    assert sum(tried.values()) > 0
