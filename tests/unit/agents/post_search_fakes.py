"""What the post-search agents' tests share: the sample corpus, the real MiniLM embedder remembering its vectors,
and a fake toolbox (``FakeTools``) with real embeddings, cosine search over in-memory documents and an optional
LLM.

Usage::

    from tests.unit.agents.post_search_fakes import FakeTools, ctx_with, run

    out = run(Reranker(), documents, "query", ctx_with(FakeTools(embedder, documents)))
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from agentsearch.pipeline.agents.base import AgentContext, Document, PostSearchInput, Stage
from agentsearch.pipeline.agents.references import collection_missing
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.embedder import Embedder

TRUSTED_ID = "7d1c2f4e-5b6a-4c3d-9e8f-0a1b2c3d4e5f"  # the trusted collection
REPO = Path(__file__).resolve().parents[3]
SAMPLE_LINES = (REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl").read_text().splitlines()
CORPUS = {d["id"]: Document(**d) for d in map(json.loads, SAMPLE_LINES)}
POST = AgentContext(pipeline_stage=Stage.POST_SEARCH)


class CachedEmbedder:
    """The real embedder, remembering vectors by text: the tests embed the same passages many times."""

    def __init__(self) -> None:
        self._embedder = Embedder("all-MiniLM-L6-v2")
        self._vectors: dict[str, list[float]] = {}

    def embed(self, texts: list[str]) -> list[list[float]]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        self._vectors.update(zip(todo, self._embedder.embed(todo)))
        return [self._vectors[t] for t in texts]


class FakeTools:
    """What ``ctx.tools`` offers agents, over in-memory documents: real embeddings, cosine search, an optional LLM."""

    def __init__(self, embedder: CachedEmbedder, documents: list[Document] = (), llm: LLMClient | None = None,
                 owned: tuple[str, ...] | None = None) -> None:
        self._embedder = embedder
        self.documents = list(documents)
        self.llm = llm
        self.searches: list[tuple[str, str, int, str]] = []
        self._vectors = None
        # The collections the job's user owns (AgentTools bound to a user): the trusted one unless told otherwise.
        self.owned = set(owned) if owned is not None else {TRUSTED_ID}

    def owned_collection(self, collection_id: str) -> str:
        if collection_id not in self.owned:
            raise collection_missing(collection_id)
        return collection_id

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts)

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        self.owned_collection(collection_id)  # as AgentTools does
        self.searches.append((collection_id, query, top_k, strategy))
        if self._vectors is None:
            self._vectors = np.asarray(self.embed([f"{d.title}. {d.text}" for d in self.documents]))
        sims = self._vectors @ np.asarray(self.embed([query])[0])
        return [self.documents[i].model_copy(update={"score": float(sims[i])}) for i in np.argsort(-sims)[:top_k]]


def ctx_with(tools) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.POST_SEARCH, tools=tools)


def run(agent, documents, query="q", ctx=POST):
    return agent.run(PostSearchInput(documents=documents, query=query), ctx)
