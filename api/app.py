"""The FastAPI application.

Usage::

    app = create_app()        # uvicorn api.app:create_app --factory
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.routes import agents, collections, health, jobs
from migrations import upgrade
from pipeline.services import get_services
from worker.app import app as celery_app


def create_app() -> FastAPI:
    services = get_services()
    settings = services.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        embedded_worker = None
        if settings.embedded:
            # One process holds everything: schema, broker, and the worker threads that run the jobs.
            settings.ensure_data_dir()
            upgrade(settings.database_url)
            from worker.embedded import EmbeddedWorker

            embedded_worker = EmbeddedWorker(celery_app, concurrency=max(4, settings.worker_concurrency))
            embedded_worker.start()
        yield
        if embedded_worker is not None:
            embedded_worker.stop()

    app = FastAPI(title="agentsearch", version="0.1.0", lifespan=lifespan)
    app.state.services = services
    app.state.celery = celery_app
    for module in (health, collections, agents, jobs):
        app.include_router(module.router)
    return app
