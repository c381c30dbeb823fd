"""Worker-side measurements, aggregated in the shared Redis so that the API can expose them for every host.

Agents run in worker processes on several hosts while ``/metrics`` is served by the API, so nothing is kept in
process memory: each agent run adds to Redis hashes (counters, and histograms as one counter per fixed bucket) in
one pipelined round trip. ``read_metrics`` reads them all back in one more; ``exposition`` turns that into
Prometheus families.

Recording never fails the caller: with Redis unreachable a measurement is dropped (logged at debug) and recording
pauses for ``retry_after_s``, so an outage does not add a connection timeout to every agent run.

Usage::

    recorder = MetricsRecorder(redis)
    recorder.record_agent_run(run, cache_lookup=True, artifact_bytes=None)
    recorder.record_search(SearchOutcome.read(state.metadata))   # the search result and query-embedding caches
    recorder.record_cache("job", hit=False)               # the whole-job cache, by whoever consults it
    recorder.record_answer(collection_id, state.metadata["answer"])   # by method, sentence verdict, fallback reason
    snapshot = read_metrics(redis)
    snapshot.agent_runs[("translator", "ok")]             # 12.0
    snapshot.agent_duration["translator"].count           # 12.0
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.client import Pipeline

from agentsearch.pipeline.records.agent_runs import AgentRun
from agentsearch.pipeline.retrieval.outcome import SearchOutcome

log = logging.getLogger("agentsearch.metrics")

KEY_PREFIX = "agentsearch:metrics"
AGENT_RUNS_KEY = f"{KEY_PREFIX}:agent_runs"
AGENT_DURATION_KEY = f"{KEY_PREFIX}:agent_duration_seconds"
ARTIFACT_SIZE_KEY = f"{KEY_PREFIX}:artifact_size_bytes"
CACHE_KEY = f"{KEY_PREFIX}:cache"
# Per worker process ("host:pid"): agent threads past their deadline, and how often the process started afresh.
ABANDONED_THREADS_KEY = f"{KEY_PREFIX}:abandoned_threads"
RECYCLES_KEY = f"{KEY_PREFIX}:worker_recycles"
WEBHOOK_ATTEMPTS_KEY = f"{KEY_PREFIX}:webhook_attempts"
RETENTION_PRUNED_KEY = f"{KEY_PREFIX}:retention_pruned"
# Per collection and rating: the thumbs up and down its answers got (agentsearch.pipeline.job.feedback).
FEEDBACK_KEY = f"{KEY_PREFIX}:answer_feedback"
# Per collection: answers by who wrote the delivered text, the LLM's sentences by verdict, fallbacks by reason.
ANSWERS_KEY = f"{KEY_PREFIX}:answers"
ANSWER_SENTENCES_KEY = f"{KEY_PREFIX}:answer_sentences"
ANSWER_FALLBACKS_KEY = f"{KEY_PREFIX}:answer_fallbacks"
# A process that has not reported for this long is gone (scaled down, killed): its gauge is no longer shown.
WORKER_REPORT_TTL_S = 3600.0

# Agents range from a regex (milliseconds) to an LLM call or a rendered PDF (tens of seconds).
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)
# Up to the default artifact limit (20 MiB) and beyond it, since refused artifacts are measured too.
ARTIFACT_BUCKETS_BYTES: tuple[float, ...] = tuple(
    float(b) for b in (1 << 10, 10 << 10, 100 << 10, 1 << 20, 5 << 20, 10 << 20, 20 << 20, 50 << 20)
)

# Every outcome an agent run can have; "cached" is an ok run answered from the agent result cache.
AGENT_STATUSES = ("ok", "cached", "error", "timeout", "circuit_open", "skipped")
CACHES = ("agent", "search", "embedding", "job")
# An answer's text is the LLM's (its supported sentences, maybe with quotes) or the offline one; the LLM's sentences
# are judged supported, partial (delivered, marked) or unsupported (left out); a fallback to the offline answer is
# the LLM's budget running out, its failing, none of its sentences supported, or nothing retrieved to answer from.
ANSWER_METHODS = ("llm", "offline")
SENTENCE_VERDICTS = ("supported", "partial", "unsupported")
FALLBACK_REASONS = ("budget", "llm_error", "unsupported", "no_documents")
# Every outcome of a webhook delivery attempt (agentsearch.pipeline.webhooks.sender.SendResult).
WEBHOOK_OUTCOMES = ("delivered", "http_error", "timeout", "refused", "network_error", "error")


def _field(*parts: str) -> str:
    # JSON, not a separator: agent ids are free text from third-party packages.
    return json.dumps(parts, separators=(",", ":"))


def _parts(raw: bytes | str) -> tuple[str, ...]:
    return tuple(json.loads(raw))


def outcome(run: AgentRun) -> str:
    return "cached" if run.status == "ok" and run.cache_hit else run.status


@dataclass(frozen=True)
class AnswerOutcome:
    """What an answer step's record (``metadata.answer``) says for the answer metrics."""

    method: str  # ANSWER_METHODS
    verdicts: dict[str, int]  # SENTENCE_VERDICTS: the LLM's sentences; empty without an LLM draft
    fallback: str | None  # FALLBACK_REASONS, when an LLM was asked and the offline answer was delivered

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> AnswerOutcome:
        method = "llm" if record.get("method") == "llm" else "offline"
        judged = record.get("llm_sentences") or {}
        verdicts = {v: int(judged.get(v) or 0) for v in SENTENCE_VERDICTS} if judged else {}
        fallback = None
        if method == "offline" and record.get("fallback_reason"):
            if record.get("llm_cut"):
                fallback = "budget"
            elif record.get("degraded"):
                fallback = "llm_error"
            else:  # judged and nothing supported, or (no draft) nothing retrieved to answer from
                fallback = "unsupported" if judged else "no_documents"
        return cls(method, verdicts, fallback)


def _observe(pipe: Pipeline, key: str, buckets: tuple[float, ...], label: str, value: float) -> None:
    """Count ``value`` in the one bucket it falls into (le is inclusive); the reader makes them cumulative."""
    index = bisect_left(buckets, value)
    upper = "+Inf" if index == len(buckets) else repr(buckets[index])
    pipe.hincrby(key, _field(label, upper), 1)
    pipe.hincrbyfloat(key, _field(label, "sum"), value)


class MetricsRecorder:
    def __init__(self, redis_client: redis.Redis, retry_after_s: float = 30.0) -> None:
        self._redis = redis_client
        self.retry_after_s = retry_after_s
        self._paused_until = 0.0
        self._lock = threading.Lock()

    @property
    def redis(self) -> redis.Redis:
        return self._redis

    def record_agent_run(self, run: AgentRun, cache_lookup: bool = False, artifact_bytes: int | None = None,
                         pipe: Pipeline | None = None) -> None:
        """``cache_lookup``: the agent result cache was asked (hit or miss); ``artifact_bytes``: what it produced.

        ``pipe``: a pipeline on this recorder's Redis that the caller sends with writes of its own (one round trip
        for both); the caller reports a failed send with ``dropped``.
        """

        def fill(pipe: Pipeline) -> None:
            pipe.hincrby(AGENT_RUNS_KEY, _field(run.agent_id, outcome(run)), 1)
            _observe(pipe, AGENT_DURATION_KEY, DURATION_BUCKETS_S, run.agent_id, run.duration_ms / 1000)
            if cache_lookup:
                pipe.hincrby(CACHE_KEY, _field("agent", "hit" if run.cache_hit else "miss"), 1)
            if artifact_bytes is not None:
                _observe(pipe, ARTIFACT_SIZE_KEY, ARTIFACT_BUCKETS_BYTES, run.agent_id, float(artifact_bytes))

        if pipe is None:
            self._write(fill)
        elif time.monotonic() >= self._paused_until:
            fill(pipe)

    def record_cache(self, cache: str, hit: bool) -> None:
        """One lookup in a cache other than the agents' (``search``, ``embedding``, the whole-job ``job`` cache)."""
        self._write(lambda pipe: pipe.hincrby(CACHE_KEY, _field(cache, "hit" if hit else "miss"), 1))

    def record_search(self, search: SearchOutcome | Mapping[str, Any]) -> None:
        """A search's outcome (``SearchOutcome``): its result cache, and on a miss its embedding cache."""
        outcome = SearchOutcome.of(search)
        if outcome.cache_hit is None:
            return  # skipped by a pre-search agent: no cache was asked
        hit, embedding_hit = outcome.cache_hit, outcome.embedding_cache_hit

        def fill(pipe: Pipeline) -> None:
            pipe.hincrby(CACHE_KEY, _field("search", "hit" if hit else "miss"), 1)
            # A cached result repeats the embedding flag of the search that stored it: not a lookup of this one.
            if not hit and embedding_hit is not None:
                pipe.hincrby(CACHE_KEY, _field("embedding", "hit" if embedding_hit else "miss"), 1)

        self._write(fill)

    def record_abandoned_threads(self, worker: str, current: int, total: int) -> None:
        """A worker process's agent threads still running past their deadline, and all it ever abandoned."""
        report = json.dumps({"current": current, "total": total, "at": time.time()})
        self._write(lambda pipe: pipe.hset(ABANDONED_THREADS_KEY, worker, report))

    def record_recycle(self, worker: str) -> None:
        self._write(lambda pipe: pipe.hincrby(RECYCLES_KEY, worker, 1))

    def record_webhook_attempt(self, outcome: str) -> None:
        """One webhook delivery attempt and how it ended (``WEBHOOK_OUTCOMES``)."""
        self._write(lambda pipe: pipe.hincrby(WEBHOOK_ATTEMPTS_KEY, outcome, 1))

    def record_retention(self, counts: Mapping[str, int]) -> None:
        """Rows a retention run pruned, per kind (``agentsearch.pipeline.operations.retention``); zeros too, so every
        kind is exposed from the first run."""

        def fill(pipe: Pipeline) -> None:
            for kind, rows in counts.items():
                pipe.hincrby(RETENTION_PRUNED_KEY, kind, int(rows))

        self._write(fill)

    def record_feedback(self, collection_id: str, rating: str) -> None:
        """One rating (``up``, ``down``) given to an answer, or a source of it, over the collection."""
        self._write(lambda pipe: pipe.hincrby(FEEDBACK_KEY, _field(collection_id, rating), 1))

    def record_answer(self, collection_id: str, record: Mapping[str, Any]) -> None:
        """One delivered answer over the collection, from its step's record (``AnswerOutcome.of``)."""
        outcome = AnswerOutcome.of(record)

        def fill(pipe: Pipeline) -> None:
            pipe.hincrby(ANSWERS_KEY, _field(collection_id, outcome.method), 1)
            for verdict, count in outcome.verdicts.items():
                pipe.hincrby(ANSWER_SENTENCES_KEY, _field(collection_id, verdict), count)
            if outcome.fallback:
                pipe.hincrby(ANSWER_FALLBACKS_KEY, _field(collection_id, outcome.fallback), 1)

        self._write(fill)

    def _write(self, fill: Callable[[Pipeline], object]) -> None:
        if time.monotonic() < self._paused_until:
            return
        try:
            pipe = self._redis.pipeline(transaction=False)
            fill(pipe)
            pipe.execute()
        except Exception as exc:  # noqa: BLE001 - a lost measurement must never cost an agent run
            self.dropped(f"{type(exc).__name__}: {exc}")

    def dropped(self, why: str) -> None:
        """A write with measurements in it failed: recording pauses for ``retry_after_s``."""
        with self._lock:
            self._paused_until = time.monotonic() + self.retry_after_s
        log.debug("metrics not recorded (%s); paused for %g s", why, self.retry_after_s)


@dataclass
class HistogramSample:
    """Cumulative bucket counts in ``buckets`` order (the last is +Inf), the sum, and the count."""

    buckets: list[tuple[str, float]]
    sum: float

    @property
    def count(self) -> float:
        return self.buckets[-1][1] if self.buckets else 0.0


@dataclass
class MetricsSnapshot:
    agent_runs: dict[tuple[str, ...], float] = field(default_factory=dict)  # (agent, status)
    agent_duration: dict[str, HistogramSample] = field(default_factory=dict)
    artifact_size: dict[str, HistogramSample] = field(default_factory=dict)
    cache: dict[tuple[str, ...], float] = field(default_factory=dict)  # (cache, "hit" | "miss")
    abandoned_threads: dict[str, tuple[float, float]] = field(default_factory=dict)  # worker: (current, total)
    worker_recycles: dict[str, float] = field(default_factory=dict)
    webhook_attempts: dict[str, float] = field(default_factory=dict)  # outcome: attempts
    retention_pruned: dict[str, float] = field(default_factory=dict)  # kind: rows
    feedback: dict[tuple[str, ...], float] = field(default_factory=dict)  # (collection, "up" | "down")
    answers: dict[tuple[str, ...], float] = field(default_factory=dict)  # (collection, method)
    answer_sentences: dict[tuple[str, ...], float] = field(default_factory=dict)  # (collection, verdict)
    answer_fallbacks: dict[tuple[str, ...], float] = field(default_factory=dict)  # (collection, reason)


def _counters(raw: dict[bytes, bytes]) -> dict[tuple[str, ...], float]:
    return {_parts(k): float(v) for k, v in raw.items()}


def _histograms(raw: dict[bytes, bytes], buckets: tuple[float, ...]) -> dict[str, HistogramSample]:
    bounds = [repr(b) for b in buckets] + ["+Inf"]
    per_label: dict[str, dict[str, float]] = {}
    for key, value in raw.items():
        label, slot = _parts(key)
        per_label.setdefault(label, {})[slot] = float(value)
    samples = {}
    for label, slots in per_label.items():
        running, cumulative = 0.0, []
        for bound in bounds:
            running += slots.get(bound, 0.0)
            cumulative.append((bound, running))
        total = slots.get("sum", 0.0)
        samples[label] = HistogramSample(cumulative, 0.0 if math.isnan(total) else total)
    return samples


def read_metrics(redis_client: redis.Redis) -> MetricsSnapshot:
    """Everything the workers recorded, in one round trip. Raises ``RedisError`` when Redis cannot be read."""
    pipe = redis_client.pipeline(transaction=False)
    for key in (AGENT_RUNS_KEY, AGENT_DURATION_KEY, ARTIFACT_SIZE_KEY, CACHE_KEY, ABANDONED_THREADS_KEY,
                RECYCLES_KEY, WEBHOOK_ATTEMPTS_KEY, RETENTION_PRUNED_KEY, FEEDBACK_KEY, ANSWERS_KEY,
                ANSWER_SENTENCES_KEY, ANSWER_FALLBACKS_KEY):
        pipe.hgetall(key)
    (runs, durations, sizes, caches, abandoned, recycles, webhooks, pruned, feedback, answers, sentences,
     fallbacks) = pipe.execute()
    return MetricsSnapshot(
        agent_runs=_counters(runs),
        agent_duration=_histograms(durations, DURATION_BUCKETS_S),
        artifact_size=_histograms(sizes, ARTIFACT_BUCKETS_BYTES),
        cache=_counters(caches),
        abandoned_threads=_worker_reports(abandoned),
        worker_recycles={_text(k): float(v) for k, v in recycles.items()},
        webhook_attempts={_text(k): float(v) for k, v in webhooks.items()},
        retention_pruned={_text(k): float(v) for k, v in pruned.items()},
        feedback=_counters(feedback),
        answers=_counters(answers),
        answer_sentences=_counters(sentences),
        answer_fallbacks=_counters(fallbacks),
    )


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _worker_reports(raw: dict[bytes, bytes]) -> dict[str, tuple[float, float]]:
    now, reports = time.time(), {}
    for worker, value in raw.items():
        report = json.loads(value)
        if now - report["at"] <= WORKER_REPORT_TTL_S or report["current"]:
            reports[_text(worker)] = (float(report["current"]), float(report["total"]))
    return reports
