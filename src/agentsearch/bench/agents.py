"""Agents that stand still or wait, for the benchmarks; workers load them through ``AGENTSEARCH_AGENT_MODULES``.

- ``bench_noop_00`` ... ``bench_noop_99``: pre-search agents that hand the query back unchanged. One class per id
  because a job lists each agent once; they keep the contract's defaults (cacheable, default timeout), so a job
  with a new query takes the runner's whole path: breaker check, cache lookup and lock, the call in its deadline
  thread, the cache write, the breaker and metrics records.
- ``bench_skip_search``: hands the query back and asks for no search, so a job is made of its agent steps and
  the steps every job has (search, answer, assemble) without their variable work.
- ``bench_sleep_pre`` and ``bench_sleep_post``: sleep ``SLEEP_S`` and pass their input through, standing in for an
  agent that waits on an LLM; not cacheable, so every job waits.
"""

from __future__ import annotations

import time

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)

NOOP_AGENTS = 100
SLEEP_S = 1.0


def noop_agent_ids(count: int) -> list[str]:
    if not 0 <= count <= NOOP_AGENTS:
        raise ValueError(f"between 0 and {NOOP_AGENTS} no-op agents, not {count}")
    return [f"bench_noop_{i:02d}" for i in range(count)]


class _NoopAgent(PreSearchAgent):
    description = "Hands the query back unchanged (benchmark of the per-agent hop)."

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        return PreSearchOutput(query=inp.query)


for _agent_id in noop_agent_ids(NOOP_AGENTS):
    # Module-level names: the registry registers the Agent classes it finds among a module's members.
    globals()[_agent_id] = type(_agent_id, (_NoopAgent,), {"agent_id": _agent_id, "__module__": __name__})
del _agent_id


class SkipSearch(PreSearchAgent):
    agent_id = "bench_skip_search"
    description = "Hands the query back and asks for no search (benchmark of the per-agent hop)."

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        return PreSearchOutput(query=inp.query, skip_search=True)


class SleepConfig(AgentConfig):
    sleep_s: float = Field(SLEEP_S, ge=0, le=60)


class SleepPre(PreSearchAgent):
    agent_id = "bench_sleep_pre"
    description = "Sleeps, then hands the query back (an LLM's latency without its CPU)."
    Config = SleepConfig
    config: SleepConfig
    cacheable = False

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        time.sleep(self.config.sleep_s)
        return PreSearchOutput(query=inp.query)


class SleepPost(PostSearchAgent):
    agent_id = "bench_sleep_post"
    description = "Sleeps, then hands the documents back (an LLM's latency without its CPU)."
    Config = SleepConfig
    config: SleepConfig
    cacheable = False

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        time.sleep(self.config.sleep_s)
        return PostSearchOutput(documents=inp.documents)
