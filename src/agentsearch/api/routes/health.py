"""Liveness (the process answers) and readiness (its dependencies answer).

Both are anonymous, so they say only ok or not: which dependency failed and why goes to the log, where an operator
reads it; an address or an error text here would map the service's insides for anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from agentsearch.api.services import AppServices

router = APIRouter(tags=["health"])
log = logging.getLogger("agentsearch.api")
# Below the probes' own timeout (compose and Kubernetes: 3 s): a dependency that does not answer makes the API not
# ready, it does not make the probe time out.
READY_WITHIN_S = 2.5
# The checks' threads: a check that hangs is bounded by its client's own timeouts, so these never stay taken long.
_checks = ThreadPoolExecutor(max_workers=6, thread_name_prefix="agentsearch-readyz")


@router.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request, services: AppServices) -> JSONResponse:

    def database() -> None:
        with services.db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def broker() -> None:
        with request.app.state.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)

    # All at once, each for READY_WITHIN_S at most: one after another, a partitioned Redis took each check's
    # socket timeouts in turn, and the probe waited more than 15 s for its 503 (docs/reliability.md).
    probes: dict[str, Callable[[], object]] = {"database": database, "redis": services.redis.ping, "broker": broker}
    futures = {name: _checks.submit(probe) for name, probe in probes.items()}
    done, _ = wait(futures.values(), timeout=READY_WITHIN_S)
    checks: dict[str, str] = {}
    for name, future in futures.items():
        problem = future.exception() if future in done else f"no answer within {READY_WITHIN_S} s"
        if problem is not None:
            log.warning("readiness: %s unavailable: %s", name, problem if isinstance(problem, str)
                        else f"{type(problem).__name__}: {problem}")
        checks[name] = "ok" if problem is None else "unavailable"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks},
                        status_code=200 if ready else 503)
