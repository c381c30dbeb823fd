"""What ``/metrics`` would expose for a Redis of recorded measurements, parsed back into samples.

Usage::

    samples = scrape(redis_client)
    value(samples, "agentsearch_agent_runs_total", agent="echo", status="ok")     # 2.0 (KeyError when not exposed)
    exposed(samples, "agentsearch_answers_total", collection="c1", method="llm")  # False when no such sample
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agentsearch.pipeline.observability.exposition import AgentSearchCollector


def scrape(store, broker=None) -> dict[str, dict[tuple, float]]:
    """The exposition text, parsed back: {sample name: {sorted label items: value}}."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentSearchCollector(store, broker=broker))
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples[name][tuple(sorted(labels.items()))]


def exposed(samples, name: str, **labels) -> bool:
    return tuple(sorted(labels.items())) in samples.get(name, {})
