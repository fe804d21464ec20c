"""Atomic replacement (ragloom.files): concurrent writers of one path, failures, permissions."""

from __future__ import annotations

import stat
import threading

import pytest

from ragloom import files


def test_concurrent_writers_of_one_path_never_collide(tmp_path):
    # the bug this replaced: two runs writing rejected_documents.parquet shared one ".tmp" name, and the
    # second os.replace found its temporary file already moved away (FileNotFoundError)
    target = tmp_path / "table.bin"
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def write(i: int) -> None:
        try:
            start.wait()
            for _ in range(50):
                files.write_bytes(target, bytes([i]) * 4096)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    data = target.read_bytes()
    assert len(data) == 4096 and len(set(data)) == 1  # one writer's whole file, never a mix
    assert [p.name for p in tmp_path.iterdir()] == ["table.bin"]  # no temporary file left


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "state.json"
    files.write_text(target, "old")
    with pytest.raises(RuntimeError):
        with files.replacing(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_mode_is_set_before_the_secret_is_written(tmp_path):
    target = tmp_path / "sub" / "keys.json"
    files.write_text(target, "{}", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "{}"


def test_write_private_replaces_a_readable_file_with_an_owner_only_one(tmp_path):
    target = tmp_path / "stack" / "redis.conf"
    target.parent.mkdir()
    target.write_text("requirepass old\n")
    target.chmod(0o644)
    files.write_private(target, "requirepass new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "requirepass new\n"
