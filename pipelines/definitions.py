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

SETTINGS = Settings.from_env()


def ingestion_assets(settings: Settings) -> tuple[list, list]:
    """The ingestion asset graph and its checks for the configured chunkings."""
    assets, checks = [documents], [documents_quality, no_rejected_files]
    for chunking in settings.chunkings:
        for asset_def, check_def in (build_chunk_assets(chunking), build_vector_assets(chunking)):
            assets.append(asset_def)
            checks.append(check_def)
    for chunking in settings.graph_chunkings:
        asset_def, check_def = build_graph_assets(chunking)
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


EXECUTOR = executor_for(SETTINGS)

ingest_job = define_asset_job(
    "ingest_job",
    selection=AssetSelection.groups("ingestion"),
    executor_def=EXECUTOR,
    tags={**STORE_WRITER_TAGS, "ragloom/kind": "ingest"},
    description="Parse, chunk, embed into Weaviate and extract into Neo4j; only changed documents do work.",
)

nightly_reingest = ScheduleDefinition(
    name="nightly_reingest",
    job=ingest_job,
    cron_schedule=SETTINGS.schedule_cron,
    execution_timezone=SETTINGS.schedule_timezone,
    tags={"ragloom/trigger": "schedule"},
    default_status=DefaultScheduleStatus.RUNNING,
    description="Re-ingests the corpus (RAGLOOM_SCHEDULE_CRON, RAGLOOM_SCHEDULE_TIMEZONE); "
                "unchanged documents cost nothing.",
)


@sensor(job=ingest_job, minimum_interval_seconds=SETTINGS.sensor_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Indexes new, changed and deleted files under the uploads folder (RAGLOOM_UPLOADS_DIR).")
def uploads_sensor(context: SensorEvaluationContext, corpus: CorpusResource):
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


def build_defs(settings: Settings = SETTINGS, resources: dict | None = None) -> Definitions:
    assets, checks = ingestion_assets(settings)
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[ingest_job, query_job, eval_job],
        schedules=[nightly_reingest],
        sensors=[uploads_sensor],
        resources=resources or default_resources(),
        # also for runs launched from the UI (__ASSET_JOB)
        executor=EXECUTOR,
    )


defs = build_defs()
