"""The FastAPI application.

Usage::

    app = create_app()        # uvicorn agentsearch.api.app:create_app --factory
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import cast

from celery._state import _set_task_join_will_block
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sql_errors
from starlette.responses import Response
from starlette.types import ExceptionHandler

from agentsearch.api.errors import refusal_answer
from agentsearch.api.mcp_server.mount import McpMount
from agentsearch.api.rate_limits import RateLimited, RateLimitHeaders
from agentsearch.api.request_guard import validation_error
from agentsearch.api.routes import (
    agents,
    collections,
    console,
    conversations,
    documents,
    feedback,
    health,
    jobs,
    keys,
    me,
    metrics,
    profiles,
    quality,
    source_kinds,
    sources,
    sso,
    teams,
    webhooks,
)
from agentsearch.api.security_headers import SecurityHeaders
from agentsearch.api.waits import WaitSlots
from agentsearch.api.worker_side import (
    EmbeddedWorker,
    celery_app,
    prune_retained,
    run_due_profile_sets,
    run_due_sources,
    sweep_webhooks,
)
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.observability.tracing import configure_tracing
from agentsearch.pipeline.platform.ticker import Ticker
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.rate_windows import RateWindows
from agentsearch.pipeline.services import get_services

log = logging.getLogger("agentsearch.api")
RequestHandler = Callable[[Request], Awaitable[Response]]


def _database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    # A request that needs the database while it is down (restarting, failing over, out of connections) is told
    # to come back, not given a 500: its transaction was rolled back, so nothing of it was written.
    log.warning("database unavailable: %s", type(exc).__name__)
    return JSONResponse({"detail": "the database is unavailable; try again shortly"}, status_code=503,
                        headers={"Retry-After": "5"})


def _value_not_storable(_request: Request, exc: Exception) -> JSONResponse:
    # The database refused a value the request carried (a NUL character in a string, a number out of range): bad
    # input, said as such; the transaction was rolled back, so nothing of the request was written.
    reason = str(getattr(exc, "orig", exc)).splitlines()[0]
    return JSONResponse({"detail": f"a value in the request cannot be stored: {reason}"}, status_code=422)


def _conflict(_request: Request, exc: Exception) -> JSONResponse:
    # Two requests wrote the same row at once and the database kept the first: the second is told so and may send
    # again; its transaction was rolled back, so nothing of it was written.
    log.info("write conflict: %s", str(getattr(exc, "orig", exc)).splitlines()[0])
    return JSONResponse({"detail": "a concurrent request changed the same data; send the request again"},
                        status_code=409)


def create_app() -> FastAPI:
    services = get_services()
    settings = services.settings
    configure_tracing(settings.otel_exporter, "agentsearch-api")
    mcp_endpoint = McpMount(max_request_bytes=settings.max_request_bytes)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        embedded_worker = None
        if settings.embedded:
            # One process holds everything: schema, broker, and the worker threads that run the jobs.
            settings.ensure_data_dir()
            # Alembic (with Mako) only here: a distributed API's schema is migrate's, and importing it for nothing
            # cost its cold start about 0.3 CPU seconds.
            from agentsearch.migrations import upgrade

            upgrade(settings.resolved_database_url)
            embedded_worker = EmbeddedWorker(celery_app, concurrency=max(4, settings.worker_concurrency))
            embedded_worker.start()
            # Embedded mode runs no Celery beat; these stand in for it: overdue jobs failed, due profile sets run,
            # due webhook deliveries sent, what is past its retention pruned.
            reaper = Ticker(JobStore(services.db).reap, settings.reaper_interval_s, "agentsearch-reaper")
            reaper.start()
            schedules = Ticker(run_due_profile_sets.delay, settings.profile_schedule_interval_s,
                               "agentsearch-profile-schedule")
            schedules.start()
            deliveries = Ticker(sweep_webhooks.delay, settings.webhook_sweep_interval_s, "agentsearch-webhook-sweep")
            deliveries.start()
            retention = Ticker(prune_retained.delay, settings.retention_interval_s, "agentsearch-retention")
            retention.start()
            sources = Ticker(run_due_sources.delay, settings.sources_tick_interval_s, "agentsearch-sources")
            sources.start()
        # The MCP endpoint's sessions run in a task group of their own, for as long as the application serves.
        async with mcp_endpoint.running(app):
            yield
        if embedded_worker is not None:
            sources.stop()
            retention.stop()
            deliveries.stop()
            schedules.stop()
            reaper.stop()
            embedded_worker.stop()

    # A body over the limit is refused with 413 from its Content-Length, before any of it is read (or, without
    # one, as soon as what arrived passes the limit).
    if not settings.embedded:
        # The API sends tasks and never waits for their results, yet Celery subscribes to results twice over: to
        # each task sent from here (unless told that no join will happen, as its pool processes are) and to a
        # chord's header tasks as the canvas is frozen. With Redis partitioned away each subscription took the
        # socket timeout, then 20 reconnects, and a submission waited out the whole cut. Told, and held to one try,
        # it fails within twice the Redis timeout and the client gets 503 (docs/reliability.md, "Network
        # partitions"). Workers keep Celery's 20 tries.
        _set_task_join_will_block(True)
        celery_app.conf.result_backend_transport_options = {"retry_policy": {"max_retries": 0}}
    app = FastAPI(title="agentsearch", version="0.1.0", lifespan=lifespan, max_body_size=settings.max_request_bytes)
    app.state.services = services
    app.state.celery = celery_app
    app.state.waits = WaitSlots(settings.max_waits_per_user)
    # Per-user request counts, in Redis for every API process (in this process without a Redis URL).
    app.state.rate_windows = RateWindows(settings.redis_url)
    app.add_middleware(RateLimitHeaders)
    app.add_middleware(SecurityHeaders)  # nosniff on every answer, errors and /mcp included
    # Starlette's stubs type a handler as taking any Exception; each of these takes the class it is registered for.
    app.add_exception_handler(RequestValidationError, cast(ExceptionHandler, validation_error))
    # A pipeline refusal a route lets go (src/agentsearch/pipeline/refusal.py): its status and words, or its fields at
    # fault.
    app.add_exception_handler(Refusal, cast(ExceptionHandler, refusal_answer))
    for error in (sql_errors.OperationalError, sql_errors.InterfaceError, sql_errors.TimeoutError):
        app.add_exception_handler(error, _database_unavailable)
    app.add_exception_handler(sql_errors.DataError, _value_not_storable)
    app.add_exception_handler(sql_errors.IntegrityError, _conflict)
    for module in (health, collections, documents, sources, source_kinds, agents, jobs, feedback, quality, metrics,
                   profiles, me, keys, webhooks, conversations, teams, console):
        # Every route counts against its caller's limits (src/agentsearch/api/rate_limits.py) but the probes, /metrics
        # and the console's static files (no key, no user data).
        limited = module not in (health, metrics, console)
        app.include_router(module.router, dependencies=[RateLimited] if limited else None)
    # Single sign-on's routes take no key: they begin and end a console session (src/agentsearch/api/routes/sso.py).
    app.include_router(sso.router)
    # MCP over streamable HTTP (src/agentsearch/api/mcp_server/): authenticated by API key like the routes above.
    # An ASGI app as the route's endpoint, which Starlette serves as such; its stubs name only a request handler.
    app.add_route("/mcp", cast(RequestHandler, mcp_endpoint), include_in_schema=False)
    return app
