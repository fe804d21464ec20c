"""The pure parts of the store syncs: the plan, writes overlapped with production, report metadata."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.errors import ConfigError
from ragloom.indexing.graph import GraphSyncReport
from ragloom.indexing.sync import SyncReport, current_chunks, overlap_writes, plan
from ragloom.indexing.vectors import VectorSyncReport
from ragloom.types import Chunk

ids = st.sets(st.text(alphabet="abcdef", min_size=1, max_size=3), max_size=12)


@given(current=ids, stored=ids, incomplete_share=st.floats(0, 1))
def test_plan_partitions_current_and_stored(current, stored, incomplete_share):
    incomplete = set(sorted(stored)[:int(len(stored) * incomplete_share)])
    items = {key: f"item {key}" for key in sorted(current)}
    result = plan(items, stored, incomplete)
    new_keys = {item.removeprefix("item ") for item in result.new}
    assert new_keys == (current - stored) | (current & incomplete)
    assert result.stale == sorted(stored - current)
    assert result.unchanged == len(current & stored - incomplete)
    assert len(result.new) + result.unchanged == len(current)
    assert result.changed == bool(new_keys or result.stale)
    assert result.new == [items[k] for k in items if k in new_keys]  # the caller's order is kept


def test_plan_of_a_synced_store_is_empty():
    result = plan({"a": 1, "b": 2}, {"a", "b"})
    assert (result.new, result.stale, result.unchanged, result.changed) == ([], [], 2, False)


def _chunk(chunk_id: str, strategy: str) -> Chunk:
    return Chunk(chunk_id=chunk_id, document_id="d", strategy=strategy, text="t", start=0, end=1, token_count=1,
                 position=0)


def test_current_chunks_refuses_another_strategy():
    assert list(current_chunks("sync_x", "recursive", [_chunk("a", "recursive")])) == ["a"]
    with pytest.raises(ConfigError, match=r"sync_x\(strategy='recursive'\).*\['headered'\]"):
        current_chunks("sync_x", "recursive", [_chunk("a", "recursive"), _chunk("b", "headered")])


def test_batch_k_is_written_while_batch_k_plus_1_is_produced():
    producing = [threading.Event() for _ in range(4)]
    written_in: list[str] = []

    def batches():
        for k in range(4):
            producing[k].set()
            yield k

    def write(k: int) -> int:
        # Without overlap the producer would wait for this write, and batch k+1 would never start.
        if k < 3:
            assert producing[k + 1].wait(timeout=10), f"batch {k + 1} was not produced during write {k}"
        written_in.append(threading.current_thread().name)
        time.sleep(0.02)  # each write takes at least this long: work_seconds sums them
        return k * 10

    results: list[tuple[int, str]] = []
    times = overlap_writes(batches(), write, lambda r: results.append((r, threading.current_thread().name)),
                           thread_name="test-writer")
    assert results == [(k * 10, threading.current_thread().name) for k in range(4)]  # in order, in the caller
    assert all(name.startswith("test-writer") for name in written_in) and len(written_in) == 4
    assert times.work_seconds >= 4 * 0.02  # every write's own time, overlapped or not
    assert times.waited_seconds <= times.work_seconds + 0.05  # production waited only on writes


def test_a_failed_write_stops_later_writes_and_keeps_earlier_ones():
    produced: list[int] = []
    written: list[int] = []

    def batches():
        for k in range(5):
            produced.append(k)
            yield k

    def write(k: int) -> None:
        if k == 1:
            raise RuntimeError("store refused batch 1")
        written.append(k)

    with pytest.raises(RuntimeError, match="batch 1"):
        overlap_writes(batches(), write, thread_name="test-writer")
    assert written == [0]
    assert produced == [0, 1, 2]  # batch 2 was produced while batch 1 was being written, and never stored


def test_at_depth_two_two_writes_run_at_once_and_results_come_in_order():
    started = [threading.Event() for _ in range(4)]
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def write(k: int) -> int:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        started[k].set()
        if k % 2 == 0:  # write k waits until write k+1 has started: only possible with both in flight
            assert started[k + 1].wait(timeout=10), f"write {k + 1} did not start during write {k}"
        time.sleep(0.01 * (4 - k))  # later writes finish first: results must still come in order
        with lock:
            in_flight[0] -= 1
        return k

    results: list[int] = []
    overlap_writes(iter(range(4)), write, results.append, thread_name="test-writer", depth=2)
    assert results == [0, 1, 2, 3] and most[0] == 2


def test_at_depth_two_a_failed_write_starts_no_batch_after_those_in_flight():
    written: list[int] = []
    release = threading.Event()

    def write(k: int) -> None:
        if k == 0:
            assert release.wait(timeout=10)
            raise RuntimeError("store refused batch 0")
        if k == 1:
            release.set()  # batch 1 is in flight beside batch 0 when batch 0 fails
        written.append(k)

    with pytest.raises(RuntimeError, match="batch 0"):
        overlap_writes(iter(range(6)), write, thread_name="test-writer", depth=2)
    assert written == [1]  # batch 1 was already in flight (an idempotent upsert); none after it started


def test_depth_below_one_is_refused():
    with pytest.raises(ConfigError, match="depth must be >= 1"):
        overlap_writes(iter(()), print, thread_name="test-writer", depth=0)


def test_no_batches_no_writes():
    calls: list[int] = []
    times = overlap_writes(iter(()), calls.append, thread_name="test-writer")
    assert calls == [] and (times.work_seconds, times.waited_seconds) == (0.0, 0.0)


def test_report_metadata_holds_fields_and_derived_figures_rounded():
    report = VectorSyncReport(strategy="recursive", inserted=10, seconds=4.0, embed_seconds=1.23456, recreated=True)
    meta = report.as_metadata()
    assert meta["strategy"] == "recursive" and meta["inserted"] == 10 and meta["recreated"] is True
    assert meta["embed_seconds"] == 1.235 and meta["chunks_per_second"] == 2.5
    graph = GraphSyncReport(strategy="recursive", surface_forms=4, entities=3).as_metadata()
    assert graph["merge_ratio"] == 0.25 and "derived" not in graph


def test_report_metadata_leaves_out_values_that_are_not_flat():
    @dataclass
    class WithList(SyncReport):
        ids: tuple[str, ...] = ("a",)

    assert WithList(strategy="s").as_metadata() == {"strategy": "s", "seconds": 0.0}
