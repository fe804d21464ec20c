"""Runs ingest_job in this process against the Dagster instance in DAGSTER_HOME: what scripts/demo calls.

    python -m pipelines.ingest

Dagster's Python API rather than `dagster job execute`, which current Dagster marks as superseded; the run shows
in the UI like any other.
"""

from __future__ import annotations

import sys


def run_ingest(log_level: str = "INFO") -> bool:
    """Materializes every ingestion asset once; True when the run succeeded. ``log_level``: the console's
    (Dagster's default prints every DEBUG event of every step)."""
    from dagster import DagsterInstance

    from pipelines.definitions import defs

    with DagsterInstance.get() as instance:
        result = defs.resolve_job_def("ingest_job").execute_in_process(
            instance=instance, raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}})
    return result.success


def main() -> int:
    return 0 if run_ingest() else 1


if __name__ == "__main__":
    sys.exit(main())
