"""The commands that run the services: ``api``, ``worker``, ``beat``, ``flower`` and the one-shot ``migrate``.

Usage::

    agentsearch migrate                                   # the schema to head (Alembic)
    agentsearch api --port 8000                           # embedded mode: the worker threads run inside it
    agentsearch worker --pool threads --queues celery     # distributed (AGENTSEARCH_BROKER_URL): the job's steps
    agentsearch worker --queues artifacts,ingest          # prefork processes: rendering and ingestion
    agentsearch beat                                      # the periodic scheduler, one per deployment
    AGENTSEARCH_FLOWER_BASIC_AUTH=admin:SECRET agentsearch flower

Each command imports what it runs (uvicorn and the API, the Celery app, Alembic) when it runs: loading them all
would make every other command, ``--help`` included, start seconds later.
"""

from __future__ import annotations

import os
import sys

import click

from agentsearch.cli.errors import fail
from agentsearch.pipeline.platform.settings import get_settings


@click.command()
def migrate() -> None:
    """Bring the database schema up to date (Alembic)."""
    from agentsearch.migrations import upgrade

    settings = get_settings()
    settings.ensure_data_dir()
    upgrade(settings.resolved_database_url)
    click.echo(f"database at head: {settings.resolved_database_url.split('@')[-1]}")


@click.command()
@click.option("--host", default=None, help="Bind address (default AGENTSEARCH_API_HOST).")
@click.option("--port", type=int, default=None, help="Port (default AGENTSEARCH_API_PORT).")
def api(host: str | None, port: int | None) -> None:
    """Serve the HTTP API. In embedded mode the Celery worker threads run inside it."""
    import uvicorn

    from agentsearch.pipeline.observability.logs import configure_logging

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    # log_config=None: uvicorn installs no handlers of its own, so its lines take the format configured above.
    uvicorn.run("agentsearch.api.app:create_app", factory=True, host=host or settings.api_host,
                port=port or settings.api_port,
                log_config=None)


@click.command()
@click.option("--pool", type=click.Choice(["prefork", "threads"]), default=None,
              help="prefork processes (CPU-heavy work) or threads in one process (steps that wait); "
                   "default AGENTSEARCH_WORKER_POOL, else prefork.")
@click.option("--queues", default=None,
              help="Queues to consume; default: celery (the job's steps) for threads, all of them "
                   "(celery,artifacts,ingest,webhooks) for prefork.")
@click.option("--concurrency", type=int, default=None,
              help="Processes (prefork, default AGENTSEARCH_WORKER_CONCURRENCY) or threads (threads, default "
                   "AGENTSEARCH_WORKER_THREADS).")
@click.option("--loglevel", default="INFO", show_default=True)
@click.option("--beat", is_flag=True, help="Also run the periodic scheduler (the job reaper); in one worker only.")
@click.option("--hostname", default=None, help="Node name (Celery's -n), e.g. w1@%h for several workers on one host.")
def worker(pool: str | None, queues: str | None, concurrency: int | None, loglevel: str, beat: bool,
           hostname: str | None) -> None:
    """Run a Celery worker (distributed mode): which pool for which queue is in docs/deployment.md."""
    settings = get_settings()
    if settings.embedded:
        fail("the worker needs a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
             "in embedded mode `agentsearch api` runs the workers itself")
    pool = pool or settings.worker_pool
    threads = pool == "threads"
    concurrency = concurrency or (settings.worker_threads if threads else settings.worker_concurrency)
    if threads and "AGENTSEARCH_DATABASE_POOL_SIZE" not in os.environ:
        # A step holds a connection only for its writes, between long waits: one per thread up to a point, not
        # one per thread of a 128-thread pool (PostgreSQL's own default limit is 100 connections).
        os.environ["AGENTSEARCH_DATABASE_POOL_SIZE"] = str(max(settings.database_pool_size, min(concurrency, 32)))
        get_settings.cache_clear()
    from agentsearch.worker import recycling
    from agentsearch.worker.app import ALL_QUEUES, app as celery_app

    argv = ["worker", f"--pool={pool}", f"--concurrency={concurrency}",
            f"--queues={queues or ('celery' if threads else ','.join(ALL_QUEUES))}", f"--loglevel={loglevel}",
            "--task-events", *([f"--hostname={hostname}"] if hostname else []),
            *(["--beat", f"--schedule={settings.ensure_data_dir() / 'celerybeat-schedule'}"] if beat else [])]
    celery_app.start(argv)
    if recycling.requested():
        # agentsearch.worker.recycling: hung agent threads cannot be stopped, only left behind with the process image.
        # The same command starts again in this process (its pid, and so its supervisor, unchanged).
        os.execv(sys.executable, [sys.executable, *sys.argv])


@click.command()
@click.option("--loglevel", default="INFO", show_default=True)
def beat(loglevel: str) -> None:
    """Run the periodic scheduler (the job reaper) on its own: exactly one per deployment."""
    settings = get_settings()
    if settings.embedded:
        fail("beat schedules onto a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
             "in embedded mode `agentsearch api` runs the reaper itself")
    from agentsearch.worker.app import app as celery_app

    celery_app.start(["beat", f"--schedule={settings.ensure_data_dir() / 'celerybeat-schedule'}",
                      f"--loglevel={loglevel}"])


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (0.0.0.0 in a container).")
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--max-tasks", type=int, default=10000, show_default=True, help="Tasks Flower keeps in memory.")
def flower(host: str, port: int, max_tasks: int) -> None:
    """Run Flower (Celery monitoring) on the broker, behind HTTP basic auth (AGENTSEARCH_FLOWER_BASIC_AUTH)."""
    settings = get_settings()
    if settings.embedded:
        fail("Flower watches a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0)")
    try:
        credentials = settings.flower_credentials()
    except ValueError as exc:
        # Flower shows task arguments (queries) and can revoke tasks and shut workers down.
        fail(f"{exc}; Flower does not start without basic auth, e.g. AGENTSEARCH_FLOWER_BASIC_AUTH=admin:SECRET")
    # Handed over in the environment, not on the command line, which any local user can read.
    os.environ["FLOWER_BASIC_AUTH"] = ",".join(credentials)
    from agentsearch.worker.app import app as celery_app

    celery_app.start(["flower", f"--address={host}", f"--port={port}", f"--max_tasks={max_tasks}",
                      # Autoscaled workers come and go; forget the ones gone for 10 minutes.
                      "--purge_offline_workers=600"])
