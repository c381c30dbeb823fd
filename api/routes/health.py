"""Liveness (the process answers) and readiness (its dependencies answer).

Both are anonymous, so they say only ok or not: which dependency failed and why goes to the log, where an operator
reads it; an address or an error text here would map the service's insides for anyone.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

router = APIRouter(tags=["health"])
log = logging.getLogger("agentsearch.api")


@router.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    services = request.app.state.services
    checks: dict[str, str] = {}

    def check(name: str, probe) -> None:
        try:
            probe()
            checks[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - each failure is reported, not raised
            log.warning("readiness: %s unavailable: %s: %s", name, type(exc).__name__, exc)
            checks[name] = "unavailable"

    def database() -> None:
        with services.db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def broker() -> None:
        with request.app.state.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)

    check("database", database)
    check("redis", services.redis.ping)
    check("broker", broker)
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503)
