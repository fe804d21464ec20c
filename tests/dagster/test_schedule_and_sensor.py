"""In-process evaluation of the nightly schedule and the uploads sensor (no servers needed)."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from pipelines.definitions import defs
from resources import CorpusResource

nightly_reingest = defs.get_schedule_def("nightly_reingest")
uploads_sensor = defs.get_sensor_def("uploads_sensor")


def _evaluate(uploads_dir, cursor=None):
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, cursor=cursor,
                                          resources={"corpus": CorpusResource(docs_dir="/nonexistent",
                                                                              uploads_dir=str(uploads_dir))})
        result = uploads_sensor(context)
        return result, context.cursor


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_sensor_requests_one_run_per_batch_and_advances_its_cursor(tmp_path):
    _write(tmp_path / "acme" / "alice" / "c1" / "notes.md", "# Notes\nHello")
    _write(tmp_path / "acme" / "bob" / "report.txt", "Report")
    first, cursor = _evaluate(tmp_path)
    assert isinstance(first, dg.RunRequest)
    assert first.tags["ragloom/added"] == "2" and first.tags["ragloom/trigger"] == "uploads"
    assert "acme/alice/c1/notes.md" in first.tags["ragloom/files"]

    quiet, cursor_after = _evaluate(tmp_path, cursor)
    assert isinstance(quiet, dg.SkipReason)
    assert cursor_after == cursor

    _write(tmp_path / "acme" / "bob" / "report.txt", "Report, second version")
    (tmp_path / "acme" / "alice" / "c1" / "notes.md").unlink()
    second, cursor2 = _evaluate(tmp_path, cursor)
    assert isinstance(second, dg.RunRequest)
    assert (second.tags["ragloom/changed"], second.tags["ragloom/deleted"]) == ("1", "1")
    assert second.run_key != first.run_key and cursor2 != cursor


def test_same_file_version_gets_the_same_run_key(tmp_path):
    _write(tmp_path / "a.md", "# A")
    one, _ = _evaluate(tmp_path)
    again, _ = _evaluate(tmp_path)  # e.g. a reset cursor: Dagster dedupes the run by run_key
    assert one.run_key == again.run_key


def test_missing_uploads_folder_skips(tmp_path):
    result, _ = _evaluate(tmp_path / "not-yet")
    assert isinstance(result, dg.SkipReason)


def test_nightly_schedule_targets_the_ingest_job():
    context = dg.build_schedule_context(scheduled_execution_time=dt.datetime(2026, 11, 22, 2, 0,
                                                                                tzinfo=dt.UTC))
    data = nightly_reingest.evaluate_tick(context)
    assert len(data.run_requests) == 1
    request = data.run_requests[0]
    assert request.tags["ragloom/trigger"] == "schedule"
    assert nightly_reingest.job_name == "ingest_job"
    assert nightly_reingest.cron_schedule == "0 2 * * *"
    assert defs.resolve_job_def("ingest_job").tags["ragloom/store-writer"] == "true"
