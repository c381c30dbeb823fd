"""A job's server-sent events: ``status`` as it changes, one ``stage`` per stage and one ``agent`` per agent as they
happen, the answer as it is written (``agentsearch.api.answer_events``), then ``done`` with the final status.

The route checks its caller on the way in and takes one of the user's wait slots; this loop reads the job a few times
a second (``JobStore.progress_of``) and spends each pause passing on the answer's pieces. Every ``KEY_CHECK_S`` it
asks ``refusal`` whether the stream must end now (its key revoked, the job no longer seen): a stream outlives its
request's check by as long as the job runs. A refusal ends the stream with an ``error`` event and no ``done``.

Usage::

    events = JobEvents(services, job_id, refusal=refusal, disconnected=request.is_disconnected)
    StreamingResponse(events.stream(on_close=release_slot), media_type="text/event-stream")
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from agentsearch.api.answer_events import AnswerEvents, sse
from agentsearch.pipeline.job.answer_stream import AnswerStreamReader
from agentsearch.pipeline.job.job_store import TERMINAL, JobStore
from agentsearch.pipeline.platform.kv import connect_async_redis
from agentsearch.pipeline.services import Services

# How often an event stream reads its job: a few reads a second per stream keeps the database load of many streams
# small and adds at most this much to what a client sees.
WAIT_POLL_S = 0.2
# How often an open event stream asks again whether its key is still valid: a stream opened before its key was
# revoked ends within this, at one indexed read per stream this often.
KEY_CHECK_S = 2.0
AGENT_FIELDS = ("agent_id", "stage", "status", "duration_ms", "cache_hit", "errors")


class JobEvents:
    def __init__(self, services: Services, job_id: uuid.UUID, refusal: Callable[[], dict[str, Any] | None],
                 disconnected: Callable[[], Awaitable[bool]]) -> None:
        self.jobs = JobStore(services.db)
        self.job_id = str(job_id)
        self.deadline_s = services.settings.job_deadline_s + 60
        self.refusal = refusal  # run in a thread: it reads the database
        self.disconnected = disconnected
        # Read from its first entry: a client that connects late gets the text written so far first.
        self.answer = AnswerEvents(AnswerStreamReader(connect_async_redis(services.settings.redis_url), self.job_id))

    async def stream(self, on_close: Callable[[], None]) -> AsyncIterator[str]:
        """The events, then ``on_close`` (the wait slot given back) however the stream ends."""
        try:
            async for event in self._events():
                yield event
        finally:
            on_close()
            await self.answer.aclose()

    async def _stored_answer(self) -> dict[str, Any]:
        stored = await run_in_threadpool(self.jobs.stored_answer, self.job_id)
        return {"text": stored.text, "method": stored.method, "fallback_reason": stored.fallback_reason}

    async def _events(self) -> AsyncIterator[str]:
        seen_stages, seen_runs, seen_status = 0, 0, None
        deadline = time.monotonic() + self.deadline_s
        key_checked = time.monotonic()
        while time.monotonic() < deadline:
            if time.monotonic() - key_checked >= KEY_CHECK_S:
                if (refused := await run_in_threadpool(self.refusal)) is not None:
                    yield sse("error", refused)
                    return
                key_checked = time.monotonic()
            progress = await run_in_threadpool(self.jobs.progress_of, self.job_id)
            assert progress is not None  # the route found the job; a job's row is never deleted while it streams
            status = progress.status
            if status != seen_status:
                seen_status = status
                yield sse("status", {"status": status})
            # Replayed from the job's stage log, so a stage shorter than the polling interval is not missed.
            for entry in progress.stage_log[seen_stages:]:
                yield sse("stage", entry)
            seen_stages = max(seen_stages, len(progress.stage_log))
            for run in progress.agent_runs[seen_runs:]:
                yield sse("agent", {k: run.get(k) for k in AGENT_FIELDS})
            seen_runs = max(seen_runs, len(progress.agent_runs))
            if status in TERMINAL:
                async for event in self.answer.close(status, self._stored_answer):
                    yield event
                yield sse("done", {"status": status, "error": progress.error})
                return
            if await self.disconnected():
                return
            # The poll's pause, spent passing on the answer's pieces as they are written.
            async for event in self.answer.wait(WAIT_POLL_S):
                yield event
