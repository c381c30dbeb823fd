"""The one place where agents are called: deadline, failure isolation, shared circuit breaker, result cache.

Before an agent's first run in the process the runner calls its ``warm_up`` (heavy setup: a model, a dictionary).

An agent never fails the job. Whatever happens (an exception, a deadline passed, an open circuit, a bad config)
comes back as an ``AgentRun`` with a status (ok / error / timeout / circuit_open / skipped) and the caller keeps
its state unchanged for anything but ``ok``.

Every agent step of every job comes through here, so a run makes two round trips to Redis when nothing changes: the
breaker's reading with the cache lookup (and its lock), then what the run leaves behind (the cached output, the
lock's release, the metrics) in one pipeline. The breaker is written only when the outcome changes it
(``agentsearch.pipeline.platform.breakers``).

Usage::

    runner = AgentRunner(registry, redis, settings)
    run, output = runner.run(spec, PreSearchInput(query="..."), AgentContext(pipeline_stage=Stage.PRE_SEARCH))
    if run.status == "ok":
        state.query = output.query
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from pydantic import BaseModel, ValidationError
from redis.client import Pipeline
from redis.exceptions import RedisError

from agentsearch.pipeline.agents.base import Agent, AgentArtifact, AgentContext, AgentSkipped
from agentsearch.pipeline.agents.deadline import AgentTimeout, call_with_deadline
from agentsearch.pipeline.agents.registry import AgentRegistry, UnknownAgent
from agentsearch.pipeline.agents.toolbox import AgentTools
from agentsearch.pipeline.observability.logs import log_context
from agentsearch.pipeline.observability.metrics import MetricsRecorder
from agentsearch.pipeline.observability.tracing import agent_span, finish_agent_span
from agentsearch.pipeline.platform.breakers import ADMIT_ALL, AdmitAll, AgentBreaker, BreakerBoard
from agentsearch.pipeline.platform.cache import Lookup, ResultCache
from agentsearch.pipeline.platform.kv import canonical_hash
from agentsearch.pipeline.platform.redis_pipelining import send
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec

T = TypeVar("T")

log = logging.getLogger("agentsearch.runner")


def tenant_scope(ctx: AgentContext) -> str:
    """Whose state an agent run may share: its user's (jobs always carry one; a context without one, such as an
    evaluation run, is the local operator's)."""
    return f"user:{ctx.user_id}" if ctx.user_id else "local"


def breaker_name(agent_id: str, scope: str, config_hash: str) -> str:
    return f"{agent_id}:{scope}:{config_hash}"


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class AgentRunner:
    def __init__(
        self,
        registry: AgentRegistry,
        redis_client: redis.Redis,
        settings: Settings,
        tools: AgentTools | None = None,
        metrics: MetricsRecorder | None = None,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.tools = tools  # bound to each run's user and handed to the agent as ctx.tools
        self._redis = redis_client
        self.cache = ResultCache(redis_client)
        self.breakers = BreakerBoard(redis_client)
        self.metrics = metrics or MetricsRecorder(redis_client)
        # (agent class, config hash) whose warm_up has succeeded in this process: the runner is per process
        # (services are made afresh after a fork), and so is what an agent loads.
        self._warm: set[tuple[type[Agent], str]] = set()
        # Several steps of a thread-pool worker may meet a cold agent at once: one loads, the others wait for it.
        self._warming = threading.Lock()

    def run(self, spec: AgentSpec, inp: BaseModel, ctx: AgentContext) -> tuple[AgentRun, BaseModel | None]:
        # What a run leaves in Redis after the call, the cached result with its lock's release and the metrics,
        # goes in one round trip at its end (sent even when the run raises: the lock must not wait to expire),
        # whose answer a job step reads later (``agentsearch.pipeline.platform.redis_pipelining``).
        end_of_run_writes = self._redis.pipeline(transaction=False)
        shared = self.metrics.redis is self._redis  # else the metrics go to their own Redis on their own
        try:
            with log_context(agent_id=spec.agent_id), agent_span(spec.agent_id, spec.stage.value) as span:
                run, output, cache_lookup = self._run(spec, inp, ctx, end_of_run_writes)
                finish_agent_span(span, run)
                if run.status != "ok":
                    level = logging.WARNING if run.status in ("error", "timeout") else logging.INFO
                    log.log(level, "agent %s ended %s: %s", spec.agent_id, run.status, (run.errors or [""])[0])
            artifact_bytes = len(output.data) if isinstance(output, AgentArtifact) else None
            self.metrics.record_agent_run(run, cache_lookup=cache_lookup, artifact_bytes=artifact_bytes,
                                          pipe=end_of_run_writes if shared else None)
        finally:
            if not send(end_of_run_writes) and shared:
                self.metrics.dropped("the agent run's writes did not reach Redis")
        return run, output

    def _run(self, spec: AgentSpec, inp: BaseModel, ctx: AgentContext,
             end_of_run_writes: Pipeline) -> tuple[AgentRun, BaseModel | None, bool]:
        """The call itself; the third value says whether the agent result cache was consulted."""
        started = time.perf_counter()
        cache_lookup = False
        if ctx.tools is None and self.tools is not None:
            tools = self.tools.for_user(ctx.user_id)
            if ctx.search_filter is not None:
                # An agent that searches again (query expansion, evidence) stays inside the job's filter.
                tools = tools.with_filter(ctx.search_filter)
            if ctx.access_tokens is not None:
                # And inside its user's document groups, in any team collection it reads (its own config's too).
                tools = tools.with_access(ctx.access_tokens)
            ctx = ctx.model_copy(update={"tools": tools})

        def finish(status: str, output: BaseModel | None = None, error: str | None = None, hit: bool = False):
            run = AgentRun(
                agent_id=spec.agent_id,
                config_id=spec.config_id,
                stage=spec.stage,
                success=status == "ok",
                status=status,
                errors=[error] if error else None,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                cache_hit=hit,
                worker=worker_name(),
            )
            return run, output, cache_lookup

        try:
            agent = self.registry.build(spec.agent_id, spec.config)
        except (UnknownAgent, ValidationError) as exc:
            return finish("error", error=f"{type(exc).__name__}: {exc}")

        config_hash = canonical_hash(agent.config.model_dump(mode="json"))
        breaker: AgentBreaker | AdmitAll
        try:
            breaker = self.breakers.get(
                # Per user: a user's config sets the agent's deadline and limits, so its failures must open only
                # that user's circuit (one user's 0.1 ms timeout must not turn the agent off for everyone).
                breaker_name(spec.agent_id, tenant_scope(ctx), config_hash),
                spec.breaker_fail_max or self.settings.breaker_fail_max,
                spec.breaker_reset_timeout_s or self.settings.breaker_reset_timeout_s,
            )
        except RedisError:
            # Like pybreaker's own Redis storage: with Redis down the circuit fails open (calls go through).
            breaker = ADMIT_ALL
        timeout_s = spec.timeout_s or agent.default_timeout_s or self.settings.default_agent_timeout_s
        ttl_s = spec.cache_ttl_s if spec.cache_ttl_s is not None else agent.cache_ttl_s
        lookup = None
        if agent.cacheable and ttl_s > 0:
            # The breaker is read in the cache lookup's round trip; the lock it may take is released if refused.
            try:
                key = self._cache_key(agent, config_hash, inp, ctx)
            except Exception as exc:  # noqa: BLE001 - an input that cannot be keyed is this run's error
                return finish("error", error=f"{type(exc).__name__}: {exc}")
            lookup = self.cache.lookup(key, timeout_s, read_along=breaker.keys)
        reading = breaker.reading(lookup.along) if lookup is not None else breaker.read()
        if not breaker.admits(reading):
            if lookup is not None:
                self.cache.release(end_of_run_writes, lookup)
            return finish("circuit_open", error=f"circuit open after repeated failures of {spec.agent_id}")
        cache_lookup = lookup is not None  # counted in the metrics: a refused run's lookup does not count

        def warm_then_run() -> BaseModel:
            self._warm_up(agent, config_hash)
            return agent.run(inp, ctx)

        def invoke() -> BaseModel:
            return call_with_deadline(warm_then_run, timeout_s, spec.agent_id)

        try:
            if lookup is not None:
                output, hit = self._cached(agent, lookup, ttl_s, timeout_s, invoke, end_of_run_writes)
            else:
                output, hit = self._checked(agent, invoke()), False
        except AgentSkipped as exc:
            return finish("skipped", error=str(exc) or "skipped")
        except AgentTimeout as exc:
            breaker.record(exc, reading)
            return finish("timeout", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - isolation is the point: any agent error is recorded, not raised
            breaker.record(exc, reading)
            return finish("error", error=f"{type(exc).__name__}: {exc}")
        if not hit:
            breaker.record(None, reading)
        return finish("ok", output=output, hit=hit)

    def _cached(self, agent: Agent, lookup: Lookup, ttl_s: int, timeout_s: float, invoke: Callable[[], BaseModel],
                end_of_run_writes: Pipeline) -> tuple[BaseModel, bool]:
        """The agent's output from the result cache, or computed under the cache's lock (a twin computing it is
        waited for) and stored with the run's last writes. A hit and a miss hand on the same thing: the output read
        from JSON."""
        if lookup.busy:
            lookup = self.cache.wait(lookup, timeout_s)
        if lookup.value is None:
            try:
                raw = self._checked(agent, invoke()).model_dump_json()
            except BaseException:
                self.cache.release(end_of_run_writes, lookup)  # errors are never cached; the next miss computes again
                raise
            self.cache.store(end_of_run_writes, lookup, raw, ttl_s)
        else:
            raw = lookup.value
        return type(agent).Output.model_validate_json(raw), lookup.value is not None

    def _warm_up(self, agent: Agent, config_hash: str) -> None:
        """The agent's heavy setup before its first run in this process. Within the run's deadline, as a load in
        ``run`` would be; a warm-up that fails is that run's error and is tried again by the next run."""
        key = (type(agent), config_hash)
        if key in self._warm:
            return
        with self._warming:
            if key not in self._warm:
                agent.warm_up()
                self._warm.add(key)

    @staticmethod
    def _checked(agent: Agent, output: Any) -> BaseModel:
        expected = type(agent).Output
        if not isinstance(output, expected):
            raise TypeError(f"{agent.agent_id} returned {type(output).__name__}, expected {expected.__name__}")
        if isinstance(output, AgentArtifact) and not output.data:
            raise ValueError(f"{agent.agent_id} returned an empty artifact")
        return output

    def _cache_key(self, agent: Agent, config_hash: str, inp: BaseModel, ctx: AgentContext) -> str:
        # What an agent may read: its input, and what earlier agents of the stage decided (not their timings).
        earlier = [(r.agent_id, r.status, r.data, r.metadata) for r in ctx.previous_agent_results]
        # The user and the collection too: an agent may read the collection through its tools (its vocabulary,
        # its acronyms), and two users' collections share epoch numbers; a result is never served across tenants.
        # The job's filter changes what the agent's searches find; without one the key is as it always was.
        filtered = {"filter": ctx.search_filter} if ctx.search_filter is not None else {}
        # Any agent may read the conversation (the contextualizer's rewrite is made of it): the same follow-up
        # after other turns is another input. Without history the key is as it always was.
        history = {"history": ctx.conversation_history} if ctx.conversation_history else {}
        # What the agent's tools find in a team collection follows its user's document groups: a result made with
        # other groups (before a membership changed) is another result. Without groups the key is as it was.
        groups = {"groups": ctx.access_tokens} if ctx.access_tokens else {}
        input_hash = canonical_hash(
            {"input": inp.model_dump(mode="json"), "earlier": earlier, "epoch": ctx.collection_epoch,
             "collection": ctx.collection_id, "scope": tenant_scope(ctx), **filtered, **history, **groups}
        )
        return self.cache.key("agent", agent.agent_id, agent.version, config_hash, input_hash)
