"""Agents' heavy setup done as a worker starts, not by the first job that meets each agent in each process.

The runner calls an agent's ``warm_up`` before its first run in a process (``agentsearch.pipeline.agents.runner``).
Measured on the uncached default job (BENCHMARKS.md, "the default job"): with two prefork processes, the first job each
process served paid for the spell checker's English dictionary (2 to 20 s on a busy 2-core machine), langdetect's
profiles (about 1 s) and the PDF fonts, inside its deadline. ``worker_init`` runs in the worker's main process before
the pool forks, so what is loaded here (kept on the agent classes, ``Loaded``) is inherited by every pool process, a
replacement for a dead one too; a thread-pool worker serves its steps in this very process. A warm-up that fails
is logged and left to the first run, as before. A worker of the default queue also loads the language model its
search and answer steps read texts with (``warm_language_model``).

Usage: nothing to call; ``agentsearch.worker.app`` names this module in ``HOOK_MODULES``.
"""

from __future__ import annotations

import logging
import time

from celery.signals import worker_init

from agentsearch.pipeline.agents.base import Agent, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.retrieval import language
from agentsearch.worker.app import ARTIFACTS_QUEUE, DEFAULT_QUEUE, app

log = logging.getLogger("agentsearch.worker")


def warm_agents(registry: AgentRegistry, stages: set[Stage] | None = None) -> dict[str, float]:
    """``warm_up`` of every registered agent that has one (of ``stages``, or all), with its default config;
    seconds each took."""
    took: dict[str, float] = {}
    for cls in registry:
        if cls.warm_up is Agent.warm_up or (stages is not None and cls.stage not in stages):
            continue  # nothing to load, or never run by this worker
        started = time.perf_counter()
        try:
            cls().warm_up()
        except Exception:  # its first run tries again, within its deadline
            log.warning("agent %s not warmed up at start", cls.agent_id, exc_info=True)
            continue
        took[cls.agent_id] = round(time.perf_counter() - started, 3)
    return took


def stages_served(queues: set[str] | None) -> set[Stage] | None:
    """The agent stages whose steps reach a worker consuming ``queues`` (None: every stage): response agents on
    the artifacts queue, the others on the default queue; an ingest-only worker runs no agent."""
    if not queues:
        return None
    stages: set[Stage] = set()
    if DEFAULT_QUEUE in queues:
        stages |= {Stage.PRE_SEARCH, Stage.POST_SEARCH}
    if ARTIFACTS_QUEUE in queues:
        stages.add(Stage.RESPONSE)
    return stages


@worker_init.connect
def _warm_agents_before_fork(**_kwargs) -> None:
    settings = get_settings()
    if settings.embedded:
        return  # the embedded worker shares the command's process: its first job warms what it uses
    try:  # the queues this worker consumes were chosen before worker_init
        queues = set(app.amqp.queues.consume_from or ())
    except Exception:  # noqa: BLE001 - warm every agent rather than none
        queues = None
    took = warm_agents(AgentRegistry.discover(settings.agent_modules), stages_served(queues))
    log.info("agents warmed up at start: %s", ", ".join(f"{a} {s:g} s" for a, s in took.items()) or "none")
    if not queues or DEFAULT_QUEUE in queues:
        warm_language_model()


def warm_language_model() -> None:
    """py3langid's model, which the search and the answer read a text's language with (74 MiB), loaded as the
    worker starts: before the pool forks (its processes share it), and before the first jobs, whose steps would
    otherwise wait for it while their own memory stacks on its unpacking (30 MiB more for a moment; BENCHMARKS.md,
    the thread-pool worker's memory). A load that fails is logged and left to the first text, as before."""
    started = time.perf_counter()
    try:
        language.warm_up()
    except Exception:  # the first text tries again
        log.warning("language model not loaded at start", exc_info=True)
        return
    log.info("language model loaded at start: %.3g s", time.perf_counter() - started)
