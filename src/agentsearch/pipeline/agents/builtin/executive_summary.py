"""Response: a plain-text executive summary, its key points within a word limit.

Usage::

    agent = ExecutiveSummary({"max_words": 120})
    artifact = agent.run(ResponseAgentInput(answer=..., sources=..., query=...), ctx)
    artifact.data.decode()   # "Executive summary: <query>\n\nKey points:\n- ...\n\nSources:\n[1] ..."
"""

from __future__ import annotations

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentSkipped,
    ResponseAgent,
    ResponseAgentInput,
)
from agentsearch.pipeline.text import split_sentences, words


def _fit(text: str, budget: int) -> str:
    tokens = text.split()
    return text if len(tokens) <= budget else " ".join(tokens[:budget]) + " …"


class ExecutiveSummary(ResponseAgent):
    agent_id = "executive_summary"
    version = "1"
    description = "Plain-text key points of the answer within a word limit, with the sources listed."
    default_timeout_s = 10.0

    class Config(AgentConfig):
        max_words: int = Field(150, ge=20, le=2000, description="Limit for the whole summary, headings included.")
        max_points: int = Field(5, ge=1, le=20)
        filename: str = Field("executive_summary.txt", pattern=r"^[\w.-]+\.txt$")

    config: Config

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        if not inp.answer.strip():
            raise AgentSkipped("no answer to summarise")
        heading = f"Executive summary: {inp.query}"
        source_lines = [f"[{i}] {s.title}" for i, s in enumerate(inp.sources, start=1)]
        budget = self.config.max_words - len(words(heading)) - 3  # "Key points:" and "Sources:"
        lines: list[str] = []
        for sentence in split_sentences(inp.answer)[: self.config.max_points]:
            point = "- " + sentence
            if len(point.split()) > budget:
                if budget > 3:
                    lines.append(_fit(point, budget - 1))  # the ellipsis is a word too
                budget = 0
                break
            lines.append(point)
            budget -= len(point.split())
        sources: list[str] = []
        for line in source_lines:
            if len(line.split()) > budget:
                break
            sources.append(line)
            budget -= len(line.split())
        text = "\n".join([heading, "", "Key points:", *lines, "", "Sources:", *sources]) + "\n"
        return AgentArtifact(
            agent_id=self.agent_id,
            type="txt",
            data=text.encode("utf-8"),
            filename=self.config.filename,
            content_type="text/plain; charset=utf-8",
            metadata={"words": len(text.split()), "points": len(lines), "max_words": self.config.max_words},
        )
