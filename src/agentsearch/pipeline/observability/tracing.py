"""One OpenTelemetry trace per job: a ``job`` root span, a span per stage task under it, a span per agent call.

A job's steps run as separate Celery tasks, often in different processes and hosts, so no span object can be
shared. What is shared is the job's trace context, a W3C ``traceparent`` carried in ``JobState.traceparent``.
It is derived from the job id (trace id = the job's UUID, span id = a hash of it), which makes it
coordination-free: the first step of a job sets it, and steps that run in parallel before any of them has (a group
of collection searches) derive the same value. Every stage span is a child of that context; the runner's agent
spans are children of the current stage span. The ``job`` span itself, with exactly the ids in the traceparent, is
emitted when the job ends (``emit_job_span``), spanning submission to the end.

Nothing is recorded until ``configure_tracing`` installs a provider (setting ``AGENTSEARCH_OTEL_EXPORTER``); the
stage and agent helpers then cost a no-op span each.

Usage::

    configure_tracing("otlp", "agentsearch-worker")            # once per process (after a fork)
    with stage_span("pre_search", state.job_id, state.traceparent):
        with agent_span("translator", "pre_search") as span:
            ...
            finish_agent_span(span, run)
    emit_job_span(job_id, "succeeded", started_at, finished_at, traceparent)
    # every LLM call inside a stage or agent: a "chat {model}" span (agentsearch.pipeline.platform.llm_spans)

    @traced_stage("post_search")                               # on a stage function whose first argument is a JobState
    def post_search_step(state, spec, runner): ...
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from agentsearch.pipeline.observability.logs import current_ids, log_context
from agentsearch.pipeline.platform import llm_spans
from agentsearch.pipeline.records.agent_runs import AgentRun

log = logging.getLogger("agentsearch.tracing")

TRACER_NAME = "agentsearch"
EXPORTERS = ("none", "console", "otlp")
# What makes a job incomplete (see agentsearch.pipeline.job.assembly) is what makes its span red.
FAILED_STATUSES = frozenset({"error", "timeout", "circuit_open"})

_PROPAGATOR = TraceContextTextMapPropagator()
_forced_ids: ContextVar[tuple[int, int] | None] = ContextVar("agentsearch_forced_span_ids", default=None)
_provider: TracerProvider | None = None


class JobIdGenerator(RandomIdGenerator):
    """Random ids, except while ``emit_job_span`` creates a job span whose ids were fixed by its traceparent."""

    def generate_trace_id(self) -> int:
        forced = _forced_ids.get()
        return forced[0] if forced else super().generate_trace_id()

    def generate_span_id(self) -> int:
        forced = _forced_ids.get()
        return forced[1] if forced else super().generate_span_id()

    def is_trace_id_random(self) -> bool:
        return _forced_ids.get() is None


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    if name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:  # pragma: no cover - a dependency of the package; absent only in trimmed installs
            raise RuntimeError("the otlp exporter needs opentelemetry-exporter-otlp-proto-http") from exc
        return OTLPSpanExporter()  # endpoint, headers: the standard OTEL_EXPORTER_OTLP_* variables
    raise ValueError(f"unknown trace exporter {name!r}; expected one of {', '.join(EXPORTERS)}")


def configure_tracing(
    exporter: str, service_name: str, processor: SpanProcessor | None = None, set_global: bool = True
) -> TracerProvider | None:
    """Install this process's tracer provider; ``exporter`` "none" (and no ``processor``) leaves tracing off.

    ``processor`` replaces the exporter (tests pass an in-memory one). ``set_global`` also makes it the global
    provider, so spans of instrumented libraries join the job's trace; OpenTelemetry allows that once a process.
    """
    global _provider
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown trace exporter {exporter!r}; expected one of {', '.join(EXPORTERS)}")
    if exporter == "none" and processor is None:
        return None
    # OTEL_SERVICE_NAME, when set, names the service rather than the process kind.
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name})
    provider = TracerProvider(resource=resource, id_generator=JobIdGenerator())
    provider.add_span_processor(processor or BatchSpanProcessor(_exporter(exporter)))
    previous, _provider = _provider, provider
    if previous is not None:
        previous.shutdown()
    llm_spans.use_provider(provider)  # every LLM call's GenAI span, under the stage or agent that made it
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


def shutdown_tracing() -> None:
    """Flush and stop this process's provider (a worker process exits without running atexit hooks)."""
    global _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = None
        llm_spans.use_provider(None)


def enabled() -> bool:
    return _provider is not None


def _tracer() -> trace.Tracer:
    return (_provider or trace.get_tracer_provider()).get_tracer(TRACER_NAME)


def job_traceparent(job_id: str) -> str:
    """The job's trace context, the same in every process: trace id from the job id, a fixed root span id."""
    digest = hashlib.sha256(f"agentsearch-job:{job_id}".encode()).digest()
    try:
        trace_id = uuid.UUID(job_id).int
    except ValueError:
        trace_id = int.from_bytes(digest[:16], "big")
    span_id = int.from_bytes(digest[16:24], "big")
    return f"00-{trace_id or 1:032x}-{span_id or 1:016x}-01"


def _parent(job_id: str, traceparent: str | None) -> Context:
    if traceparent:
        context = _PROPAGATOR.extract({"traceparent": traceparent})
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
        log.debug("job %s carries a malformed traceparent %r; using the derived one", job_id, traceparent)
    return _PROPAGATOR.extract({"traceparent": job_traceparent(job_id)})


@contextmanager
def stage_span(stage: str, job_id: str, traceparent: str | None = None) -> Iterator[Span]:
    """A span for one stage task, child of the job's trace context; binds ``job_id`` for the log lines inside."""
    attributes: dict[str, AttributeValue] = {"agentsearch.job_id": job_id, "agentsearch.stage": stage}
    with log_context(job_id=job_id), _tracer().start_as_current_span(
        stage, context=_parent(job_id, traceparent), attributes=attributes
    ) as span:
        yield span


@contextmanager
def agent_span(agent_id: str, stage: str) -> Iterator[Span]:
    """A span for one agent call, child of whatever span is current (the stage's)."""
    attributes: dict[str, AttributeValue] = {"agentsearch.agent": agent_id, "agentsearch.stage": stage}
    job_id = current_ids()["job_id"]
    if job_id:
        attributes["agentsearch.job_id"] = job_id
    with _tracer().start_as_current_span(f"agent {agent_id}", attributes=attributes) as span:
        yield span


def finish_agent_span(span: Span, run: AgentRun) -> None:
    span.set_attribute("agentsearch.status", run.status)
    span.set_attribute("agentsearch.cache_hit", run.cache_hit)
    if run.status in FAILED_STATUSES:
        span.set_status(Status(StatusCode.ERROR, (run.errors or [run.status])[0][:500]))


def _ns(moment: datetime) -> int:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # SQLite hands back naive UTC
    return int(aware.timestamp() * 1e9)


def emit_job_span(
    job_id: str,
    status: str,
    started_at: datetime,
    ended_at: datetime | None = None,
    traceparent: str | None = None,
    error: str | None = None,
) -> None:
    """Record the job's root span once it has ended, with the ids its stage spans already name as parent."""
    if _provider is None:
        return
    context = trace.get_current_span(_parent(job_id, traceparent)).get_span_context()
    token = _forced_ids.set((context.trace_id, context.span_id))
    try:
        span = _tracer().start_span(
            "job",
            context=Context(),  # empty: a root span, whatever span is current in the caller
            start_time=_ns(started_at),
            attributes={"agentsearch.job_id": job_id, "agentsearch.status": status},
        )
    finally:
        _forced_ids.reset(token)
    if status == "failed":
        span.set_status(Status(StatusCode.ERROR, (error or "failed")[:500]))
    span.end(end_time=_ns(ended_at or datetime.now(UTC)))


class _Traced(Protocol):
    job_id: str
    traceparent: str | None


S = TypeVar("S", bound=_Traced)
P = ParamSpec("P")
R = TypeVar("R")


def traced_stage(stage: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Run a stage function inside its stage span; a returned state without a traceparent gets the job's."""

    def decorate(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(fn)
        def wrapper(state: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            traceparent = state.traceparent or job_traceparent(state.job_id)
            with stage_span(stage, state.job_id, traceparent):
                result = fn(state, *args, **kwargs)
            if getattr(result, "job_id", None) == state.job_id and getattr(result, "traceparent", "") is None:
                result.traceparent = traceparent  # type: ignore[attr-defined]
            return result

        return wrapper

    return decorate
