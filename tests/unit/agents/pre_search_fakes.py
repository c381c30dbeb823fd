"""What the pre-search agents' tests share: the sample corpus plus a hydrogen document of its own, and a fake
toolbox (``FakeTools``) with the same methods as ``agentsearch.pipeline.agents.toolbox.AgentTools``: BM25 keyword
search, the collection vocabulary, acronyms mined with the project's miner, embeddings from the embedder it is given,
and an optional LLM; ``StubLLM`` gives scripted replies without a server.

Usage::

    from tests.unit.agents.pre_search_fakes import CORPUS, FakeTools, ctx_with, inp

    out = SpellChecker().run(inp("reveune projecions"), ctx_with(FakeTools(CORPUS)))
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from agentsearch.pipeline.agents.base import AgentContext, Document, PreSearchInput, Stage
from agentsearch.pipeline.platform.llm import LLMReply, reply_json
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import words
from agentsearch.pipeline.text.acronyms import mine_acronyms

REPO = Path(__file__).resolve().parents[3]
SAMPLE_FILE = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
SAMPLE = [json.loads(line) for line in SAMPLE_FILE.read_text().splitlines() if line]
HYDROGEN = {
    "id": "nw-hydrogen-pilot",
    "title": "Northwind Hydrogen Pilot at Harrow Ridge",
    "text": (
        "Northwind Energy will install a 20 MW electrolyser next to the Harrow Ridge solar farm. The electrolyser "
        "splits water into hydrogen with surplus midday solar power that would otherwise be curtailed. Construction "
        "starts in the fourth quarter (Q4) of 2025, and the first hydrogen is expected in the second half of 2026. "
        "The hydrogen will be sold to a fertiliser plant 12 kilometres away under a ten-year offtake contract."
    ),
}
CORPUS = [*SAMPLE, HYDROGEN]
COLLECTION = "3f1c1f8e-4a53-4c4b-9a57-2d1b3a5c0e01"
ANALYZER = KeywordAnalyzer("english")


class FakeTools:
    """``AgentTools`` over an in-memory list of documents; records what the agents asked for."""

    def __init__(self, documents: list[dict], embedder=None, llm=None) -> None:
        self.documents = documents
        self.texts = [f"{d['title']}. {d['text']}" for d in documents]
        self._terms = [ANALYZER.terms(t) for t in self.texts]
        self._df = Counter(t for terms in self._terms for t in set(terms))
        self._avg_len = sum(map(len, self._terms)) / len(self._terms)
        self.embedder = embedder
        self.llm = llm
        self.calls: list[tuple] = []

    def for_user(self, user_id: str | None) -> FakeTools:
        # The runner binds the toolbox to the job's user; these documents are everyone's.
        return self

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        self.calls.append(("search", collection_id, query, top_k, strategy))
        n, found = len(self.documents), []
        for doc, terms in zip(self.documents, self._terms):
            tf, score = Counter(terms), 0.0
            for term in ANALYZER.terms(query):
                if tf[term]:
                    idf = math.log(1 + (n - self._df[term] + 0.5) / (self._df[term] + 0.5))
                    score += idf * tf[term] * 2.2 / (tf[term] + 1.2 * (0.25 + 0.75 * len(terms) / self._avg_len))
            if score > 0:
                found.append(Document(id=doc["id"], title=doc["title"], text=doc["text"], score=score))
        return sorted(found, key=lambda d: d.score, reverse=True)[:top_k]

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(("embed", len(texts)))
        return self.embedder.embed(texts)

    def vocabulary(self, collection_id: str) -> dict[str, int]:
        self.calls.append(("vocabulary", collection_id))
        return dict(Counter(w for t in self.texts for w in words(t)))

    def acronyms(self, collection_id: str) -> dict[str, str]:
        self.calls.append(("acronyms", collection_id))
        return mine_acronyms(self.texts)


class StubLLM:
    """The smallest LLM client: ``reply`` / ``complete`` / ``complete_json`` give scripted replies and keep the
    messages they got (a context of unknown size: prompts are budgeted by estimate)."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.messages: list[list[dict]] = []

    def reply(self, messages, timeout_s=20.0, **kwargs) -> LLMReply:
        self.messages.append(messages)
        return LLMReply(self.replies.pop(0), "stop")

    def complete(self, messages, timeout_s=20.0, **kwargs) -> str:
        return self.reply(messages, timeout_s).text

    def complete_json(self, messages, timeout_s=20.0, **kwargs):
        return reply_json(self.reply(messages, timeout_s))


def ctx_with(tools) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id=COLLECTION, tools=tools)


def inp(query: str, **metadata) -> PreSearchInput:
    return PreSearchInput(query=query, collection_id=COLLECTION, metadata=metadata)


PLAIN = AgentContext(pipeline_stage=Stage.PRE_SEARCH)
