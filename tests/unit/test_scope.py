"""Scope names are a security boundary: every part is 1-64 ASCII letters, digits, `_ - .`, not `.` or `..`,
checked by Scope itself, so every entry point (CLI, Python API, uploads folders, sidecars, the query job)
refuses a bad one with a ScopeError naming the part and the rule."""

from __future__ import annotations

import json

import pytest

from ragloom.cli import main
from ragloom.errors import RagloomError, ScopeError
from ragloom.parsing import parse_sources
from ragloom.retrieval import RetrievalContext, get_retriever
from ragloom.types import SHARED_SCOPE, Scope

REJECTED_PATHS = {
    "traversal": "acme/../../x",
    "dot": "acme/./x",
    "dot-only": ".",
    "whitespace": "acme/ alice",
    "whitespace only": "   ",
    "tab": "acme/al\tice",
    "newline": "acme/alice\n",
    "control char": "acme/\x01bob",
    "NUL": "acme/b\x00b",
    "too long": "a" * 65,
    "empty part": "acme//c1",
    "non-ASCII": "acmé/alice",
    "backslash": "acme\\alice",
    "shell chars": "acme/$(id)",
    "shared as part": f"acme/{SHARED_SCOPE}",
    "five levels": "a/b/c/d/e",
}


@pytest.mark.parametrize("path", REJECTED_PATHS.values(), ids=REJECTED_PATHS.keys())
def test_bad_scope_paths_are_scope_errors(path):
    with pytest.raises(ScopeError) as e:
        Scope.from_path(path)
    assert isinstance(e.value, RagloomError) and isinstance(e.value, ValueError)
    assert "scope" in str(e.value)


@pytest.mark.parametrize("parts", [("acme", ".."), ("acme", "a b"), ("x" * 65,), ("acme", "", "c1"), ("acme", 7),
                                   ("acme", "alice", "c1", "bot/x")])
def test_bad_scope_parts_are_scope_errors(parts):
    with pytest.raises(ScopeError):
        Scope(*parts)


@pytest.mark.parametrize("path", ["acme", "acme/alice", "acme/alice/chat-1", "acme/alice/chat-1/bot_7",
                                  "a.b-c_D9/E", "x" * 64, "/acme/alice/", "", SHARED_SCOPE])
def test_good_scope_paths(path):
    scope = Scope.from_path(path)
    assert Scope.from_path(scope.path) == scope


def test_the_message_names_the_part_and_the_rule():
    with pytest.raises(ScopeError, match=r"scope part '\.\.' is not allowed: use 1-64 letters, digits"):
        Scope.from_path("acme/../../x")
    with pytest.raises(ScopeError, match=r"\.\.\. \(200 characters\)"):  # a long part is shown cut short
        Scope.from_path("y" * 200)


@pytest.mark.parametrize("path", ["acme/../../x", "acme/ alice", "a" * 65])
def test_cli_refuses_a_bad_scope_before_connecting(capsys, path):
    assert main(["query", "anything", "--scope", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragloom: error: scope") and "connect" not in err.lower()


@pytest.mark.parametrize("path", ["acme/../../x", "acme/\x00", "acme//x"])
def test_python_api_refuses_a_bad_scope(path):
    retriever = get_retriever("dense", RetrievalContext(vectors=None))
    with pytest.raises(ScopeError):
        retriever.search("q", scope=path)


@pytest.mark.parametrize("folder", ["acme/al ice/c1", "acme/alice/" + "c" * 65, "acme/alice/c\x01"])
def test_upload_folders_with_a_bad_scope_name_are_rejected(tmp_path, folder):
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "notes.md").write_text("# Notes\n\ntext\n")
    (tmp_path / "acme" / "ok").mkdir(parents=True, exist_ok=True)
    (tmp_path / "acme" / "ok" / "fine.md").write_text("# Fine\n\ntext\n")
    batch = parse_sources([tmp_path], tmp_path, scope_from_path=True)
    assert [d.document_id for d in batch.documents] == ["acme/ok/fine.md"]  # the batch goes on
    [rejected] = batch.rejections
    assert rejected.source_path == f"{folder}/notes.md" and rejected.reason == "malformed"
    assert "is not allowed: use 1-64 letters" in rejected.detail


@pytest.mark.parametrize("declared", ["acme/alice/../x", "acme/alice/c1/ bot", {"tenant": "acme", "user": ".."},
                                      {"tenant": "acme", "user": "alice", "chat": "c1", "agent": "b\x00t"}])
def test_sidecars_with_a_bad_scope_are_rejected(tmp_path, declared):
    chat = tmp_path / "acme" / "alice" / "c1"
    chat.mkdir(parents=True)
    (chat / "notes.md").write_text("# Notes\n\ntext\n")
    (chat / "notes.md.meta.json").write_text(json.dumps({"scope": declared}))
    batch = parse_sources([tmp_path], tmp_path, scope_from_path=True)
    assert batch.documents == []
    [rejected] = batch.rejections
    assert rejected.reason == "malformed" and "bad scope" in rejected.detail and "not allowed" in rejected.detail
