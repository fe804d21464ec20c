"""The one Definitions object: ingestion assets, the query and evaluation jobs, the nightly schedule and the
uploads sensor."""



from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    RunRequest,
    ScheduleDefinition,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    in_process_executor,
    multiprocess_executor,
    sensor,
)

from assets.chunks import build_chunk_assets
from assets.documents import documents, documents_quality, no_rejected_files
from assets.stores import STORE_WRITER_TAGS, build_graph_assets, build_vector_assets
from assets.summaries import build_summary_assets
from pipelines.evaluation import eval_job
from pipelines.query import query_job
from ragloom import uploads
from ragloom.settings import Settings
from resources import CorpusResource, default_resources


def ingestion_assets(settings: Settings) -> tuple[list, list]:
    """The ingestion asset graph and its checks for the configured chunkings."""
    assets, checks = [documents], [documents_quality, no_rejected_files]
    for chunking in settings.chunkings:
        for asset_def, check_def in (build_chunk_assets(chunking), build_vector_assets(chunking, settings)):
            assets.append(asset_def)
            checks.append(check_def)
    for chunking in settings.graph_chunkings:
        asset_def, check_def = build_graph_assets(chunking, settings)
        assets.append(asset_def)
        checks.append(check_def)
    assets += [build_summary_assets(chunking, settings) for chunking in settings.summary_chunkings]
    return assets, checks


def executor_for(settings: Settings):
    """RAGLOOM_EXECUTOR. in_process (default): one process loads the models once; Dagster's multiprocess
    executor starts a process per step (~2 s each, plus seconds of torch import), which dominates small
    incremental runs. celery (the cluster profile): steps go to Celery workers through Redis; run storage
    must then be shared (Postgres: deploy/cluster/dagster.yaml)."""
    if settings.executor == "celery":
        from dagster_celery import celery_executor

        return celery_executor.configured(
            {"broker": {"env": "RAGLOOM_CELERY_BROKER"}, "backend": {"env": "RAGLOOM_CELERY_BACKEND"}},
            name="celery",
        )
    if settings.executor == "multiprocess":
        return multiprocess_executor
    return in_process_executor


def ingest_job_for(settings: Settings):
    return define_asset_job(
        "ingest_job",
        selection=AssetSelection.groups("ingestion"),
        executor_def=executor_for(settings),
        tags={**STORE_WRITER_TAGS, "ragloom/kind": "ingest"},
        description="Parse, chunk, embed into Weaviate and extract into Neo4j; only changed documents do work.",
    )


def schedule_for(settings: Settings, job) -> ScheduleDefinition:
    return ScheduleDefinition(
        name="nightly_reingest",
        job=job,
        cron_schedule=settings.schedule_cron,
        execution_timezone=settings.schedule_timezone,
        tags={"ragloom/trigger": "schedule"},
        default_status=DefaultScheduleStatus.RUNNING,
        description="Re-ingests the corpus (RAGLOOM_SCHEDULE_CRON, RAGLOOM_SCHEDULE_TIMEZONE); "
                    "unchanged documents cost nothing.",
    )


def uploads_sensor_for(settings: Settings, job):
    return sensor(job=job, name="uploads_sensor", minimum_interval_seconds=settings.sensor_interval_seconds,
                  default_status=DefaultSensorStatus.RUNNING,
                  description="Indexes new, changed and deleted files under the uploads folder "
                              "(RAGLOOM_UPLOADS_DIR).")(uploads_tick)


def uploads_tick(context: SensorEvaluationContext, corpus: CorpusResource):
    """One evaluation of the uploads sensor: a run request for the changed files since the cursor, or a skip."""
    root = corpus.uploads_root()
    previous = uploads.from_cursor(context.cursor)
    current = uploads.scan(root, previous)
    changes = uploads.diff(previous, current)
    if not changes:
        return SkipReason(f"no changes under {root} ({len(current)} files)")
    touched = uploads.documents_touched(changes)
    context.update_cursor(uploads.to_cursor(current))
    # One run per batch of changes (not a dynamic partition per file: the pipeline is incremental,
    # so a run re-indexes exactly the changed documents, and partitions would not scale past ~40k files).
    return RunRequest(
        run_key=changes.run_key(current),
        tags={"ragloom/trigger": "uploads", "ragloom/added": str(len(changes.added)),
              "ragloom/changed": str(len(changes.changed)), "ragloom/deleted": str(len(changes.deleted)),
              "ragloom/files": ",".join(touched)[:200]},
    )


def build_defs(settings: Settings, resources: dict | None = None) -> Definitions:
    """The code location for ``settings``: every setting the Dagster layer reads is read from this one object."""
    assets, checks = ingestion_assets(settings)
    ingest_job = ingest_job_for(settings)
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[ingest_job, query_job, eval_job],
        schedules=[schedule_for(settings, ingest_job)],
        sensors=[uploads_sensor_for(settings, ingest_job)],
        resources=resources or default_resources(),
        # also for runs launched from the UI (__ASSET_JOB)
        executor=executor_for(settings),
    )


# The code location's composition root: Dagster loads it by importing this module, so the settings are read here,
# once, and handed down (resources re-read only their own overrides).
defs = build_defs(Settings.from_env())
