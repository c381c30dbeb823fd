"""The Prometheus view of what the workers recorded in Redis, read at scrape time.

A custom ``prometheus_client`` collector: nothing is held in the API process, so every API replica exposes the same
numbers (the totals of every worker host) and a restarted API loses nothing.

Metrics (see docs/observability.md):

- ``agentsearch_agent_runs_total{agent,status}``         ok, cached, error, timeout, circuit_open, skipped
- ``agentsearch_agent_duration_seconds{agent}``          histogram of the runner's measured duration
- ``agentsearch_artifact_size_bytes{agent}``             histogram of response agents' artifacts
- ``agentsearch_cache_hits_total{cache}``, ``agentsearch_cache_misses_total{cache}``, ``agentsearch_cache_hit_ratio``
- ``agentsearch_breaker_state{agent,breaker}``           0 closed, 1 open, 2 half-open
- ``agentsearch_queue_length{queue}``                    messages waiting in the broker (Redis broker only)
- ``agentsearch_worker_abandoned_threads{worker}``      agent threads past their deadline, per worker process
- ``agentsearch_worker_threads_abandoned_total{worker}``, ``agentsearch_worker_recycles_total{worker}``
- ``agentsearch_webhook_attempts_total{outcome}``         delivered, http_error, timeout, refused, network_error,
                                                          error
- ``agentsearch_retention_pruned_total{kind}``           rows retention pruned: jobs, artifacts, agentic_loops,
                                                          profile_runs, webhook_deliveries, webhook_attempts,
                                                          conversation_turns
- ``agentsearch_answer_feedback_total{collection,rating}`` thumbs up and down on answers and their sources
- ``agentsearch_answers_total{collection,method}``       answers delivered: llm, offline
- ``agentsearch_answer_sentences_total{collection,verdict}`` the LLM's sentences: supported, partial, unsupported
- ``agentsearch_answer_fallbacks_total{collection,reason}`` budget, llm_error, unsupported, no_documents
- ``agentsearch_metrics_store_up``                       1 when the Redis holding the above could be read

Usage::

    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentSearchCollector(redis, broker=broker_redis("redis://host:6379/0")))
    generate_latest(registry)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from agentsearch.pipeline.observability.metrics import (
    AGENT_STATUSES,
    WEBHOOK_OUTCOMES,
    HistogramSample,
    MetricsSnapshot,
    read_metrics,
)
from agentsearch.pipeline.platform.breakers import shared_states

log = logging.getLogger("agentsearch.metrics")

QUEUES = ("celery", "artifacts", "ingest", "webhooks")
BREAKER_STATES = {"closed": 0.0, "open": 1.0, "half-open": 2.0}
# kombu's Redis transport keeps a queue's prioritised messages in sibling lists named queue + "\x06\x16" + step.
_PRIORITY_SEPARATOR = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)


def broker_redis(broker_url: str | None) -> redis.Redis | None:
    """A client for a Redis broker; None for any other broker (the in-process memory:// one included)."""
    if not broker_url or not broker_url.startswith(("redis://", "rediss://")):
        return None
    return redis.Redis.from_url(broker_url, socket_timeout=2, socket_connect_timeout=2)


def priority_lists(queue: str) -> list[str]:
    """The Redis lists holding a queue's waiting messages: its own (priority 0), then one per other priority step."""
    return [queue, *(f"{queue}{_PRIORITY_SEPARATOR}{step}" for step in _PRIORITY_STEPS)]


def queue_lengths(broker: redis.Redis, queues: Sequence[str] = QUEUES) -> dict[str, int]:
    pipe = broker.pipeline(transaction=False)
    for queue in queues:
        for name in priority_lists(queue):
            pipe.llen(name)
    lengths = pipe.execute()
    per_queue = 1 + len(_PRIORITY_STEPS)
    return {queue: int(sum(lengths[i * per_queue : (i + 1) * per_queue])) for i, queue in enumerate(queues)}


def _histogram(name: str, documentation: str, samples: dict[str, HistogramSample]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=["agent"])
    for agent, sample in sorted(samples.items()):
        buckets = [(b if b == "+Inf" else floatToGoString(float(b)), count) for b, count in sample.buckets]
        family.add_metric([agent], buckets, sum_value=sample.sum)
    return family


class AgentSearchCollector(Collector):
    def __init__(self, store: redis.Redis, broker: redis.Redis | None = None, queues: Sequence[str] = QUEUES) -> None:
        self.store = store
        self.broker = broker
        self.queues = tuple(queues)

    def collect(self) -> Iterable[Metric]:
        yield from self._recorded()
        yield from self._breakers()
        yield from self._queues()

    def _recorded(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("agentsearch_metrics_store_up", "1 when the Redis holding the metrics was read.")
        try:
            snapshot = read_metrics(self.store)
        except Exception as exc:  # noqa: BLE001 - a scrape reports what it can
            log.debug("metrics store unreadable: %s: %s", type(exc).__name__, exc)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        yield from self._families(snapshot)

    @staticmethod
    def _families(snapshot: MetricsSnapshot) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            "agentsearch_agent_runs", "Agent runs by outcome (cached: ok, answered by the result cache).",
            labels=["agent", "status"],
        )
        agents = sorted({agent for agent, _ in snapshot.agent_runs})
        for agent in agents:
            # Every status of a seen agent, zeros included, so rate() and ratios work from the first failure.
            for status in AGENT_STATUSES:
                runs.add_metric([agent, status], snapshot.agent_runs.get((agent, status), 0.0))
        for (agent, status), value in sorted(snapshot.agent_runs.items()):
            if status not in AGENT_STATUSES:
                runs.add_metric([agent, status], value)
        yield runs
        yield _histogram("agentsearch_agent_duration_seconds", "Agent run duration as the runner measured it.",
                         snapshot.agent_duration)
        yield _histogram("agentsearch_artifact_size_bytes", "Size of the artifacts response agents produced.",
                         snapshot.artifact_size)

        hits = CounterMetricFamily("agentsearch_cache_hits", "Cache lookups answered from the cache.", labels=["cache"])
        misses = CounterMetricFamily("agentsearch_cache_misses", "Cache lookups that had to compute.", labels=["cache"])
        ratio = GaugeMetricFamily(
            "agentsearch_cache_hit_ratio", "Hits over lookups since the counters began (rate() the counters for "
            "a recent ratio).", labels=["cache"],
        )
        for cache in sorted({cache for cache, _ in snapshot.cache}):
            hit = snapshot.cache.get((cache, "hit"), 0.0)
            miss = snapshot.cache.get((cache, "miss"), 0.0)
            hits.add_metric([cache], hit)
            misses.add_metric([cache], miss)
            if hit + miss:
                ratio.add_metric([cache], hit / (hit + miss))
        yield hits
        yield misses
        yield ratio

        current = GaugeMetricFamily(
            "agentsearch_worker_abandoned_threads", "Agent threads still running past their deadline in a worker "
            "process (a thread-pool worker starts afresh past worker_max_abandoned_threads).", labels=["worker"],
        )
        total = CounterMetricFamily("agentsearch_worker_threads_abandoned", "Agent threads a worker process "
                                    "abandoned at their deadline since it started.", labels=["worker"])
        for worker, (now, ever) in sorted(snapshot.abandoned_threads.items()):
            current.add_metric([worker], now)
            total.add_metric([worker], ever)
        recycles = CounterMetricFamily("agentsearch_worker_recycles", "Times a worker process started afresh "
                                       "because of abandoned threads.", labels=["worker"])
        for worker, count in sorted(snapshot.worker_recycles.items()):
            recycles.add_metric([worker], count)
        yield current
        yield total
        yield recycles

        attempts = CounterMetricFamily("agentsearch_webhook_attempts", "Webhook delivery attempts by outcome.",
                                       labels=["outcome"])
        if snapshot.webhook_attempts:
            for outcome in sorted({*WEBHOOK_OUTCOMES, *snapshot.webhook_attempts}):
                attempts.add_metric([outcome], snapshot.webhook_attempts.get(outcome, 0.0))
        yield attempts

        pruned = CounterMetricFamily("agentsearch_retention_pruned", "Rows pruned past their retention, by kind "
                                     "(agentsearch.pipeline.operations.retention).", labels=["kind"])
        for kind, rows in sorted(snapshot.retention_pruned.items()):
            pruned.add_metric([kind], rows)
        yield pruned

        feedback = CounterMetricFamily("agentsearch_answer_feedback", "Ratings given to answers and their sources, "
                                       "by collection and rating (agentsearch.pipeline.job.feedback).",
                                       labels=["collection", "rating"])
        for (collection, rating), count in sorted(snapshot.feedback.items()):
            feedback.add_metric([collection, rating], count)
        yield feedback
        yield from _answers(snapshot)

    def _breakers(self) -> Iterator[Metric]:
        try:
            states = shared_states(self.store)
        except Exception as exc:  # noqa: BLE001
            log.debug("breaker states unreadable: %s: %s", type(exc).__name__, exc)
            return
        gauge = GaugeMetricFamily(
            "agentsearch_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.",
            labels=["agent", "breaker"],
        )
        for name, state in sorted(states.items()):
            if state not in BREAKER_STATES:
                continue
            # Breaker names are "<agent>:<tenant scope>:<config hash>"
            # (agentsearch.pipeline.agents.runner.breaker_name), or "tool:<agent>:..." for a dependency of an agent's
            # own.
            parts = name.split(":")
            owner = ":".join(parts[:2]) if parts[0] == "tool" else parts[0]
            gauge.add_metric([owner, name], BREAKER_STATES[state])
        yield gauge

    def _queues(self) -> Iterator[Metric]:
        if self.broker is None:
            return
        try:
            lengths = queue_lengths(self.broker, self.queues)
        except Exception as exc:  # noqa: BLE001
            log.debug("broker queue lengths unreadable: %s: %s", type(exc).__name__, exc)
            return
        gauge = GaugeMetricFamily("agentsearch_queue_length", "Tasks waiting in the broker queue.", labels=["queue"])
        for queue, length in lengths.items():
            gauge.add_metric([queue], float(length))
        yield gauge


def _answers(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    """The answers' quality per collection (``agentsearch.pipeline.observability.metrics.AnswerOutcome``)."""
    families = (
        (snapshot.answers, "agentsearch_answers", "method",
         "Answers delivered, by collection and by who wrote the delivered text: the LLM or the offline answer."),
        (snapshot.answer_sentences, "agentsearch_answer_sentences", "verdict",
         "The LLM's answer sentences by their check against the sources: supported, partial (delivered, marked) "
         "or unsupported (left out)."),
        (snapshot.answer_fallbacks, "agentsearch_answer_fallbacks", "reason",
         "LLM answers replaced by the offline answer, by reason: budget, llm_error, unsupported, no_documents."),
    )
    for counts, name, label, help_text in families:
        family = CounterMetricFamily(name, help_text, labels=["collection", label])
        for (collection, value), count in sorted(counts.items()):
            family.add_metric([collection, value], count)
        yield family
