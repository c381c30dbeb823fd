"""Agents a third party might ship in its own module; loaded by ``AgentRegistry.discover(extra_modules=[...])``.

Not a test module (no ``test_`` prefix). Besides three agents, it holds what discovery must leave alone: the base
classes it imports, a built-in agent it imports, and a class that is not an agent.
"""

from __future__ import annotations

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    ResponseAgent,
    ResponseAgentInput,
)
from agentsearch.pipeline.agents.builtin.language_detector import LanguageDetector  # noqa: F401 - imported, defined elsewhere


class YearScoper(PreSearchAgent):
    agent_id = "year_scoper"
    version = "2"
    description = "Appends a fiscal year to queries that name none."

    class Config(AgentConfig):
        year: int = Field(2025, ge=1990, le=2100)

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        return PreSearchOutput(query=f"{inp.query} {self.config.year}", metadata={"year": self.config.year})


class TopTrimmer(PostSearchAgent):
    agent_id = "top_trimmer"
    description = "Keeps only the best few documents."

    class Config(AgentConfig):
        keep: int = Field(3, ge=1, le=50)

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        best = sorted(inp.documents, key=lambda d: d.score, reverse=True)[: self.config.keep]
        return PostSearchOutput(documents=best)


class PlainTextAnswer(ResponseAgent):
    agent_id = "plain_text_answer"
    description = "The answer as a text file."

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        return AgentArtifact(
            agent_id=self.agent_id,
            type="txt",
            data=inp.answer.encode(),
            filename="answer.txt",
            content_type="text/plain",
        )


class CitationFormatter:
    """Not an agent: a helper class living next to the agents."""

    def format(self, n: int) -> str:
        return f"[{n}]"
