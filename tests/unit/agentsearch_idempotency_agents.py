"""Agents that count their calls in this process, for the step idempotency tests."""

from __future__ import annotations

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentContext,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    ResponseAgent,
    ResponseAgentInput,
)

CALLS: list[str] = []


class CountedRewriter(PreSearchAgent):
    agent_id = "counted_rewriter"
    description = "Appends a word to the query; counts its calls."
    cacheable = False

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        CALLS.append(self.agent_id)
        return PreSearchOutput(query=f"{inp.query} rewritten{len(CALLS)}")


class CountedNote(ResponseAgent):
    agent_id = "counted_note"
    description = "Writes a note; counts its calls (a side effect a job must not repeat)."

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        CALLS.append(self.agent_id)
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=f"note {len(CALLS)}".encode(),
                             filename="note.txt", content_type="text/plain")
