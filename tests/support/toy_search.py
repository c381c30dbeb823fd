"""A small in-memory search for loop tests: documents ranked by the share of the query's stemmed terms they hold.

Usage::

    search = ToySearch([Document(id="a", title="...", text="..."), ...])
    search("wind turbine", 5)        # best first, with scores in [0, 1]
    search.calls                     # [("wind turbine", 5)]
"""

from __future__ import annotations

from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer


class ToySearch:
    def __init__(self, documents: list[Document], collection_id: str = "toy") -> None:
        self.documents = documents
        self.collection_id = collection_id
        self.analyzer = KeywordAnalyzer()
        self.calls: list[tuple[str, int]] = []

    def __call__(self, query: str, top_k: int) -> list[Document]:
        self.calls.append((query, top_k))
        wanted = set(self.analyzer.terms(query))
        scored = []
        for doc in self.documents:
            have = set(self.analyzer.terms(f"{doc.title} {doc.text}"))
            share = len(wanted & have) / len(wanted) if wanted else 0.0
            if share > 0:
                scored.append((share, doc))
        scored.sort(key=lambda s: (-s[0], s[1].id))
        return [d.model_copy(update={"score": round(s, 6),
                                     "metadata": {**d.metadata, "collection_id": self.collection_id}})
                for s, d in scored[:top_k]]
