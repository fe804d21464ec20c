"""Upload change detection: cursor progression, run keys, deletes, cheap re-scans."""

from __future__ import annotations

import os

from ragloom import uploads


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_new_changed_deleted_files_and_cursor_round_trip(tmp_path):
    _write(tmp_path / "acme" / "alice" / "c1" / "a.md", "# A")
    _write(tmp_path / "b.txt", "b")
    state1 = uploads.scan(tmp_path, {})
    changes = uploads.diff({}, state1)
    assert sorted(changes.added) == ["acme/alice/c1/a.md", "b.txt"] and not changes.changed and not changes.deleted

    cursor = uploads.to_cursor(state1)
    assert uploads.from_cursor(cursor) == state1
    assert not uploads.diff(state1, uploads.scan(tmp_path, uploads.from_cursor(cursor)))

    _write(tmp_path / "b.txt", "b, edited")
    (tmp_path / "acme" / "alice" / "c1" / "a.md").unlink()
    state2 = uploads.scan(tmp_path, state1)
    changes = uploads.diff(state1, state2)
    assert changes.changed == ["b.txt"] and changes.deleted == ["acme/alice/c1/a.md"] and not changes.added


def test_run_key_is_stable_per_file_version(tmp_path):
    _write(tmp_path / "a.md", "one")
    s1 = uploads.scan(tmp_path, {})
    key1 = uploads.diff({}, s1).run_key(s1)
    assert key1 == uploads.diff({}, uploads.scan(tmp_path, {})).run_key(s1)
    _write(tmp_path / "a.md", "two")
    s2 = uploads.scan(tmp_path, {})
    assert uploads.diff({}, s2).run_key(s2) != key1


def test_touch_without_content_change_is_not_a_change(tmp_path):
    _write(tmp_path / "a.md", "same")
    s1 = uploads.scan(tmp_path, {})
    st = (tmp_path / "a.md").stat()
    os.utime(tmp_path / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    s2 = uploads.scan(tmp_path, s1)
    assert s2["a.md"].mtime_ns != s1["a.md"].mtime_ns  # re-hashed because mtime moved
    assert not uploads.diff(s1, s2)


def test_hidden_files_are_ignored_and_sidecars_are_not_documents(tmp_path):
    _write(tmp_path / ".partial.md", "x")
    _write(tmp_path / "a.md", "x")
    _write(tmp_path / "a.md.meta.json", "{}")
    state = uploads.scan(tmp_path, {})
    assert set(state) == {"a.md", "a.md.meta.json"}
    assert uploads.documents_touched(uploads.diff({}, state)) == ["a.md"]


def test_missing_root_is_empty(tmp_path):
    assert uploads.scan(tmp_path / "nope", {}) == {}
