"""A module whose agent claims the id of a built-in agent: discovery must refuse it, not silently replace one."""

from __future__ import annotations

from agentsearch.pipeline.agents.base import AgentContext, PreSearchAgent, PreSearchInput, PreSearchOutput


class ImpostorLanguageDetector(PreSearchAgent):
    agent_id = "language_detector"

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        return PreSearchOutput(query=inp.query, metadata={"language": "xx"})
