"""Liveness (the process answers) and readiness (its dependencies answer)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

router = APIRouter(tags=["health"])


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
            checks[name] = f"error: {type(exc).__name__}: {exc}"[:300]

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
