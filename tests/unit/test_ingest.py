"""Incremental collection: new, changed, unchanged, removed; a transient read failure is not a deletion."""

from __future__ import annotations

from ragloom.ingest import Source, collect_documents
from ragloom.tables import documents_to_frame
from ragloom.types import Rejection


def _collect(root, previous=None):
    return collect_documents([Source("docs", root)], previous, log=lambda _: None)


def test_classifies_documents_against_the_previous_run(tmp_path):
    (tmp_path / "a.md").write_text("# A\nalpha")
    (tmp_path / "b.md").write_text("# B\nbeta")
    first = _collect(tmp_path)
    assert sorted(first.new) == ["docs/a.md", "docs/b.md"]
    previous = documents_to_frame(first.documents)
    (tmp_path / "a.md").write_text("# A\nalpha, edited")
    (tmp_path / "b.md").unlink()
    (tmp_path / "c.md").write_text("# C\ngamma")
    second = _collect(tmp_path, previous)
    assert (second.changed, second.removed, second.new) == (["docs/a.md"], ["docs/b.md"], ["docs/c.md"])


def test_unreadable_file_keeps_its_previous_version(tmp_path, monkeypatch):
    (tmp_path / "a.md").write_text("# A\nalpha")
    first = _collect(tmp_path)
    previous = documents_to_frame(first.documents)

    import ragloom.ingest as ingest
    from ragloom.parsing import ParseBatch

    def flaky(paths, root, **kwargs):  # the file is there but changed while it was read
        return ParseBatch(documents=[], rejections=[Rejection("a.md", "unreadable", "changed while read")])

    monkeypatch.setattr(ingest, "parse_sources", flaky)
    second = _collect(tmp_path, previous)
    assert [d.document_id for d in second.documents] == ["docs/a.md"]
    assert second.unchanged == ["docs/a.md"] and not second.removed
    assert len(second.rejections) == 1  # still reported


def test_attachments_name_their_email_by_document_id_and_parse_limits_apply(tmp_path):
    import shutil

    from ragloom.parsing import ParseLimits
    from ragloom.settings import SAMPLE_CORPUS

    shutil.copy(SAMPLE_CORPUS / "news" / "kelpwatch_shipped.eml", tmp_path / "mail.eml")
    (tmp_path / "long.csv").write_text("n\n" + "1\n" * 10)
    got = collect_documents([Source("docs", tmp_path)], None, log=lambda _: None, limits=ParseLimits(max_sheet_rows=5))
    by_id = {d.document_id: d for d in got.documents}
    assert set(by_id) == {"docs/mail.eml", "docs/mail.eml#kelpwatch_shipment.csv"}
    assert by_id["docs/mail.eml#kelpwatch_shipment.csv"].metadata["attached_to"] == "docs/mail.eml"
    assert [(r.source_path, r.reason) for r in got.rejections] == [(str(tmp_path / "long.csv"), "oversized")]


def test_a_folder_scope_applies_to_its_documents_and_a_sidecar_narrows_it(tmp_path):
    from ragloom.types import Scope

    (tmp_path / "plan.md").write_text("# Plan\nthe tenant's plan")
    (tmp_path / "memo.md").write_text("# Memo\nAlice's memo")
    (tmp_path / "memo.md.meta.json").write_text('{"scope": "acme/alice"}')
    (tmp_path / "leak.md").write_text("# Leak\nanother tenant's")
    (tmp_path / "leak.md.meta.json").write_text('{"scope": "globex"}')
    got = collect_documents([Source("docs", tmp_path, scope=Scope("acme"))], None, log=lambda _: None)
    scopes = {d.document_id: d.scope.path for d in got.documents}
    assert scopes == {"docs/plan.md": "acme", "docs/memo.md": "acme/alice"}
    assert [r.source_path.endswith("leak.md") for r in got.rejections] == [True]  # a sidecar never widens it
    unscoped = {d.document_id: d.scope.path for d in _collect(tmp_path).documents}
    assert unscoped["docs/plan.md"] == "__shared__" and unscoped["docs/leak.md"] == "globex"
