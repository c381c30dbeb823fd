"""The step ledger: what each step of a job handed on, kept once per (job, step) in Redis (``StepLedger``), and the
key of an agent's step in it (``step_key``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from agentsearch.pipeline.platform.redis_pipelining import send_commands

if TYPE_CHECKING:  # for annotations only: the ledger keeps JSON
    from agentsearch.pipeline.agents.base import Stage
    from agentsearch.pipeline.records.agent_runs import AgentSpec

log = logging.getLogger("agentsearch.jobs")


def step_key(stage: Stage, spec: AgentSpec) -> str:
    """An agent's step in the ledger: one agent may run twice in a job with different configs, never twice with the
    same config and priority."""
    return f"{stage.value}:{spec.agent_id}:{spec.config_id or ''}:{spec.priority}"


class StepLedger:
    """What each step of a job handed on, kept once per (job, step) so that a step run again changes nothing.

    At-least-once delivery runs a step twice when its process dies after the work and before the message is
    acknowledged, and the reaper enqueues a whole job again when its node dies. A step that finds its output here
    hands that on instead of calling its agent again; the first output stored wins, so two copies running at once
    agree on what follows. Kept in Redis for ``ttl_s`` (above the job's deadline); if Redis cannot be asked, the
    step simply runs (at-least-once, as without the ledger).

    Usage::

        ledger = StepLedger(redis_client, ttl_s=3600)
        done = ledger.get(job_id, "pre_search:translator:cfg:0")
        if done is None:
            done = ledger.put(job_id, "pre_search:translator:cfg:0", run_the_step())

        answer = ledger.ask(job_id, "pre_search:translator:cfg:0")   # sent now ...
        report_progress()                                            # ... while this waits for its own round trip
        done = answer()                                              # the same as get's; call it once, always
    """

    PREFIX = "agentsearch:steps:"

    def __init__(self, client: redis.Redis | None, ttl_s: float) -> None:
        self.client = client
        self.ttl_s = max(1, int(ttl_s))

    def get(self, job_id: str, step: str) -> dict[str, Any] | None:
        if self.client is None:
            return None
        try:
            raw = self.client.hget(self.PREFIX + job_id, step)
        except redis.RedisError:
            log.warning("step ledger unreadable; step %s of job %s runs again", step, job_id, exc_info=True)
            return None
        return json.loads(raw) if raw is not None else None

    def ask(self, job_id: str, step: str) -> Callable[[], dict[str, Any] | None]:
        """``get`` in two halves: the read is sent now and its answer read when the returned function is called, so
        that a round trip the caller makes meanwhile (``run_step``: its progress report to the database) and this
        one are waited for together. The function must be called once, whatever happens in between: it gives the
        connection back to the pool."""
        if self.client is None:
            return _nothing
        try:
            read = send_commands(self.client, [("HGET", self.PREFIX + job_id, step)])
        except redis.RedisError:
            log.warning("step ledger unreadable; step %s of job %s runs again", step, job_id, exc_info=True)
            return _nothing

        def answer() -> dict[str, Any] | None:
            try:
                (raw,) = read()
            except redis.RedisError:
                log.warning("step ledger unreadable; step %s of job %s runs again", step, job_id, exc_info=True)
                return None
            if isinstance(raw, redis.RedisError):
                log.warning("step ledger unreadable (%s); step %s of job %s runs again", raw, step, job_id)
                return None
            return json.loads(raw) if raw is not None else None

        return answer

    def put(self, job_id: str, step: str, output: dict[str, Any]) -> dict[str, Any]:
        """Store the step's output unless one is stored already; return the stored one (this one, or the first)."""
        if self.client is None:
            return output
        key = self.PREFIX + job_id
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hsetnx(key, step, json.dumps(output, separators=(",", ":")))
                pipe.expire(key, self.ttl_s)
                stored_now, _ = pipe.execute()
            if stored_now:
                # The usual case: this is the first output, so it is the one to hand on. Not read back: the state
                # is kilobytes, and reading and parsing it again cost every step more than the round trip.
                return output
            # Another copy of the step stored its output first (a redelivery running beside the original).
            stored = self.client.hget(key, step)
        except redis.RedisError:
            log.warning("step ledger not written; step %s of job %s", step, job_id, exc_info=True)
            return output
        return json.loads(stored) if stored is not None else output

    def clear(self, job_id: str) -> None:
        if self.client is None:
            return
        try:
            self.client.delete(self.PREFIX + job_id)
        except redis.RedisError:
            pass  # it expires on its own

    def steps(self, job_id: str) -> dict[str, dict[str, Any]]:
        if self.client is None:
            return {}
        try:
            raw = self.client.hgetall(self.PREFIX + job_id)
        except redis.RedisError:
            return {}
        return {k.decode() if isinstance(k, bytes) else k: json.loads(v) for k, v in raw.items()}


def _nothing() -> None:
    return None
