"""Per-user rate limits and quotas at the door of every route but the probes and ``/metrics``.

``rate_limited`` is a router dependency: it runs after authentication (the user comes from its key, so limits are
per user, never per address, and a request without a valid key counts against nobody) and before the route does
anything, so a refused request writes nothing. A search past the user's running-jobs limit, or past its searches
per minute, is refused with 429 before a job row exists.

The answer carries the limit of the request's class in the IETF draft's separate fields
(draft-ietf-httpapi-ratelimit-headers-06): ``RateLimit-Limit`` (requests per window), ``RateLimit-Remaining``,
``RateLimit-Reset`` (seconds until the oldest request counted leaves the window), and a 429 ``Retry-After``.
``RateLimitHeaders`` puts them on every answer, whatever the route returned.

Usage::

    app.state.rate_windows = RateWindows(settings.redis_url)
    app.add_middleware(RateLimitHeaders)
    app.include_router(router, dependencies=[RateLimited])
"""

from __future__ import annotations

import uuid

from fastapi import Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentsearch.api.auth import CurrentUser
from agentsearch.api.services import services_of
from agentsearch.pipeline.security.quotas import Limits, QuotaStore, RouteClass, route_class
from agentsearch.pipeline.security.rate_windows import Admission, Window

# A job's end cannot be foreseen; a few seconds is about the shortest job, and a client polling that often costs
# one indexed count.
RUNNING_JOBS_RETRY_AFTER_S = 5
NOUNS = {"search": "search submissions", "ingest": "ingestion requests", "read": "requests"}
STATE_WINDOW, STATE_ADMISSION = "rate_limit_window", "job_admission"


def rate_limit_headers(window: Window) -> dict[str, str]:
    """The RateLimit fields of one window (``Retry-After`` is added by the 429 alone)."""
    return {
        "RateLimit-Limit": str(window.limit),
        "RateLimit-Remaining": str(window.remaining),
        "RateLimit-Reset": str(max(0, round(window.reset_s))) if window.remaining else str(window.retry_after_s),
    }


def request_class(request: Request) -> RouteClass | None:
    """The class the request counts in, by its route's path template (``/v1/jobs/{job_id}``, not the URL)."""
    route = request.scope.get("route")
    return route_class(request.method, getattr(route, "path", request.url.path))


def effective_limits(request: Request, user_id: uuid.UUID) -> Limits:
    """The caller's limits, read once per request: an operator's change applies to the next request everywhere."""
    cached = getattr(request.state, "limits", None)
    if cached is None:
        services = services_of(request)
        cached = QuotaStore(services.db).effective(user_id, Limits.defaults(services.settings))
        request.state.limits = cached
    return cached


def rate_limited(request: Request, user_id: CurrentUser) -> None:
    """Count the request against its user's limit of its class; 429 (with nothing done) past it."""
    kind = request_class(request)
    if kind is None:
        return
    windows = request.app.state.rate_windows
    admission = None
    if kind == "search" and not _resends_a_submitted_job(request, user_id):
        admission = windows.admit_job_counted(user_id, lambda: _limit_and_running(request, user_id))
        if not admission.admitted:
            raise HTTPException(
                status_code=429,
                detail=f"{admission.running} of your jobs are queued or running and at most "
                       f"{admission.limit} may be; submit again when one has ended",
                headers={"Retry-After": str(RUNNING_JOBS_RETRY_AFTER_S)})
        setattr(request.state, STATE_ADMISSION, admission)
    limits = effective_limits(request, user_id)
    window = windows.hit(user_id, kind, limits.per_minute(kind))
    if window is None:
        return  # the counters are unreachable: let the request through (RateWindows logged it)
    setattr(request.state, STATE_WINDOW, window)
    if not window.allowed:
        if admission is not None:
            admission.release()
        raise HTTPException(
            status_code=429,
            detail=f"rate limit reached: {window.limit} {NOUNS[kind]} per minute; "
                   f"try again in {window.retry_after_s} s",
            headers={"Retry-After": str(window.retry_after_s), **rate_limit_headers(window)})


RateLimited = Depends(rate_limited)


def _limit_and_running(request: Request, user_id: uuid.UUID) -> tuple[int, int]:
    # A search's limits and its user's running jobs in one transaction (a search's admission is most of what a
    # cache hit costs beyond a read); the limits are kept for the rest of the request, as ``effective_limits``
    # keeps them.
    services = services_of(request)
    limits, running = QuotaStore(services.db).effective_and_running(user_id, Limits.defaults(services.settings))
    request.state.limits = limits
    return limits.max_running_jobs, running


def _resends_a_submitted_job(request: Request, user_id: uuid.UUID) -> bool:
    # A client sending a submission again (its answer lost on the way) gets the job it already has: no new job
    # starts, so the running-jobs limit does not apply. The per-minute window still counts it.
    key = request.headers.get("idempotency-key")
    if not key:
        return False
    return QuotaStore(services_of(request).db).has_idempotent_job(user_id, key)


def job_admission(request: Request) -> Admission | None:
    """The search's place under the running-jobs limit: the job's row, once written, counts it, so a route that
    goes on (to wait for its job) releases it first (``RateLimitHeaders`` does it for every other route when the
    answer starts)."""
    return getattr(request.state, STATE_ADMISSION, None)


class RateLimitHeaders:
    """Adds the RateLimit fields to every answer of a limited request, and gives back a search's admission when
    the answer starts (or the request fails), whatever the route returned or raised."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def release() -> None:
            admission = state.get(STATE_ADMISSION)
            # Released already (by the route, in the thread that wrote the job): no thread to wait for.
            if admission is not None and admission.held:
                await run_in_threadpool(admission.release)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                await release()
                window = state.get(STATE_WINDOW)
                if window is not None:
                    headers = MutableHeaders(scope=message)
                    if "ratelimit-limit" not in headers:  # a 429 carries its own
                        for name, value in rate_limit_headers(window).items():
                            headers.append(name, value)
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            await release()
