"""Post-search: drop near-duplicate documents, keeping the best-scored of each group.

Similarity is the Jaccard overlap of word shingles, so reworded copies of one press release collapse while
documents that merely share a topic stay.

Usage::

    agent = Deduplicator({"threshold": 0.6})
    out = agent.run(PostSearchInput(documents=docs, query="q"), ctx)
    out.metadata["duplicates_removed"]   # how many were dropped
"""

from __future__ import annotations

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    Document,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)
from agentsearch.pipeline.text import words


def shingles(text: str, size: int) -> set[tuple[str, ...]]:
    tokens = words(text)
    if len(tokens) < size:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def jaccard(a: set, b: set) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


class Deduplicator(PostSearchAgent):
    agent_id = "deduplicator"
    version = "1"
    description = "Removes near-duplicate documents (word-shingle Jaccard), keeping the best-scored."
    default_timeout_s = 10.0

    class Config(AgentConfig):
        threshold: float = Field(0.5, gt=0.0, le=1.0,
                                 description="Jaccard similarity at or above which two are duplicates.")
        shingle_size: int = Field(3, ge=1, le=10)

    config: Config

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        kept: list[Document] = []
        kept_shingles: list[set[tuple[str, ...]]] = []
        removed: list[dict[str, str]] = []
        for doc in sorted(inp.documents, key=lambda d: d.score, reverse=True):
            sh = shingles(f"{doc.title} {doc.text}", self.config.shingle_size)
            twin = next((k for k, ks in zip(kept, kept_shingles) if jaccard(sh, ks) >= self.config.threshold), None)
            if twin is None:
                kept.append(doc)
                kept_shingles.append(sh)
            else:
                removed.append({"document_id": doc.id, "duplicate_of": twin.id})
        return PostSearchOutput(documents=kept, metadata={"duplicates_removed": len(removed), "duplicates": removed})
