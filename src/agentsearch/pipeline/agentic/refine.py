"""The next iteration's query, learned from what the last ones kept and discarded.

- ``LLMRefiner``: the prompt gives the original query, the discarded results with their scores and reasons, and
  the rules (drop terms that led to poor results, add specificity, stay concise); the reply is the new query as
  plain text. A failed call or an unusable reply (empty, cut at its token limit, a paragraph, the query again) reuses
  the original query (the next search still moves on: the seen-memo skips what was evaluated) and says so. It sees
  every discarded result of the run (the most recent ``max_discarded``), not only the last batch, so it does not
  walk back into what an earlier iteration rejected; what the model's context cannot hold is left out, the oldest
  discarded results first.
- ``OfflineRefiner``: pseudo-relevance feedback. Terms frequent in the kept documents and (nearly) absent from the
  discarded ones — and from the ``background``, the other results the search found but nobody evaluated, which keeps
  words common to the whole neighbourhood ("company", "energy") out — are added; query terms found in most
  discarded documents but in no kept one are dropped. With
  nothing kept there is nothing to learn from: the query stays, and the seen-memo makes the next search return the
  next results instead of the same ones.

Usage::

    refinement = OfflineRefiner(KeywordAnalyzer()).refine(query, current_query, kept_docs, discarded)
    refinement.query, refinement.added_terms, refinement.removed_terms
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from agentsearch.pipeline.agentic.scoring import Evaluation
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.llm import LLMClient, LLMError
from agentsearch.pipeline.platform.prompt_budget import fit
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import STOPWORDS, words

_LETTERS = re.compile(r"^[^\W\d_]+(?:-[^\W\d_]+)*$")
_FENCE = re.compile(r"^```\w*\s*|\s*```$", re.MULTILINE)
MAX_QUERY_CHARS = 1000
REPLY_TOKENS = 160


class Refinement(BaseModel):
    query: str
    method: Literal["llm", "offline", "unchanged"]
    added_terms: list[str] = Field(default_factory=list)
    removed_terms: list[str] = Field(default_factory=list)
    error: str | None = None


class Refiner(Protocol):
    def refine(self, original: str, current: str, kept: list[Document], discarded: list[tuple[Document, Evaluation]],
               background: list[Document] | None = None) -> Refinement: ...


class OfflineRefiner:
    def __init__(self, analyzer: KeywordAnalyzer, max_terms: int = 4, max_negative_share: float = 0.2,
                 min_positive_share: float = 0.5) -> None:
        self.analyzer = analyzer
        self.max_terms = max_terms
        self.max_negative_share = max_negative_share
        self.min_positive_share = min_positive_share

    def _stems(self, doc: Document) -> set[str]:
        return set(self.analyzer.terms(f"{doc.title} {doc.text}"))

    def refine(self, original: str, current: str, kept: list[Document], discarded: list[tuple[Document, Evaluation]],
               background: list[Document] | None = None) -> Refinement:
        if not kept:
            return Refinement(query=current, method="unchanged",
                              error="nothing kept yet to learn from: the same query, for its next results")
        negatives = [self._stems(d) for d, _ in discarded]
        unrelated = [self._stems(d) for d in background or []]
        positives = [self._stems(d) for d in kept]
        query_stems = set(self.analyzer.terms(current))

        def share(stem: str, sets: list[set[str]]) -> float:
            return sum(1 for s in sets if stem in s) / len(sets) if sets else 0.0

        # Ranked by how many kept documents hold the term, then by how often they use it.
        in_docs: Counter[str] = Counter()
        frequency: Counter[str] = Counter()
        form: dict[str, str] = {}
        for doc in kept:
            stems_here: set[str] = set()
            for word in words(f"{doc.title} {doc.text}"):
                if len(word) < 3 or word in STOPWORDS or not _LETTERS.match(word):
                    continue
                stems = self.analyzer.terms(word)
                if not stems or stems[0] in query_stems:
                    continue
                frequency[stems[0]] += 1
                stems_here.add(stems[0])
                form.setdefault(stems[0], word)
            in_docs.update(stems_here)
        ranked = sorted(in_docs, key=lambda stem: (-in_docs[stem], -frequency[stem], stem))
        added = [
            form[stem] for stem in ranked
            if share(stem, positives) >= self.min_positive_share and share(stem, negatives) <= self.max_negative_share
            and share(stem, unrelated) <= self.max_negative_share
        ][: self.max_terms]

        removed: list[str] = []
        kept_words = []
        for word in current.split():
            stems = self.analyzer.terms(word)
            if (stems and negatives and share(stems[0], negatives) > 0.5 and share(stems[0], positives) == 0
                    and len(current.split()) - len(removed) > 2):
                removed.append(word)
                continue
            kept_words.append(word)
        query = " ".join([*kept_words, *added]).strip() or current
        if not added and not removed:
            return Refinement(query=current, method="unchanged",
                              error="no term separates the kept results from the discarded ones")
        return Refinement(query=query, method="offline", added_terms=added, removed_terms=removed)


_PROMPT = """Refine this search query to find better results.

ORIGINAL QUERY:
{original}

CURRENT QUERY:
{current}

DISCARDED RESULTS (to avoid):
{discarded}

KEPT RESULTS (good, find more like these):
{kept}

TASK:
Refine the query to avoid low-quality results. Keep the core focus but add specificity to get better results.

RULES:
1. Remove terms that led to poor results
2. Add specific terms that match the kept results and the original intent
3. Keep the query concise (2-3 sentences at most)

Return ONLY the refined query text (no JSON, no explanation)."""


def clean_query_reply(text: str) -> str:
    """The query in a plain-text reply: fences, a "Refined query:" label and surrounding quotes removed."""
    cleaned = _FENCE.sub("", text.strip()).strip()
    cleaned = re.sub(r"^(?:refined\s+)?query\s*:\s*", "", cleaned, flags=re.IGNORECASE)
    paragraphs = [p.strip() for p in cleaned.split("\n\n") if p.strip()]
    cleaned = paragraphs[0] if paragraphs else ""
    return " ".join(cleaned.strip("\"'“”` ").split())


class LLMRefiner:
    def __init__(self, llm: LLMClient, timeout_s: float = 20.0, max_discarded: int = 20) -> None:
        self.llm, self.timeout_s, self.max_discarded = llm, timeout_s, max_discarded

    def refine(self, original: str, current: str, kept: list[Document], discarded: list[tuple[Document, Evaluation]],
               background: list[Document] | None = None) -> Refinement:
        lines = [
            f"- {d.metadata.get('url') or d.title or d.id} (Score: "
            f"{e.overall if e.overall is not None else 'n/a'}) - {e.reasoning or 'no reason given'}"
            for d, e in discarded[-self.max_discarded:]
        ]
        titles = [f"- {d.title or d.id}" for d in kept[:10]]
        # The kept titles first, then the discarded lines newest first: what the context cannot hold is the oldest.
        bare = _PROMPT.format(original=original, current=current, discarded="", kept="")
        fitted = fit(self.llm, bare, [*titles, *lines[::-1]], REPLY_TOKENS, share="in_order")
        titles, lines = fitted[: len(titles)], fitted[len(titles):][::-1]
        prompt = _PROMPT.format(original=original, current=current, discarded="\n".join(lines) or "- none",
                                kept="\n".join(titles) or "- none")
        try:
            reply = self.llm.reply([{"role": "user", "content": prompt}], timeout_s=self.timeout_s,
                                   temperature=0.3, max_tokens=REPLY_TOKENS)
        except LLMError as exc:
            return Refinement(query=original, method="unchanged", error=f"refinement call failed: {exc}")
        query = clean_query_reply(reply.text)
        problem = None
        if reply.truncated:
            problem = f"refinement reply cut at max_tokens ({REPLY_TOKENS})"
        elif not query or len(query) > MAX_QUERY_CHARS:
            problem = f"unusable refinement reply ({len(query)} characters)"
        elif _same_query(query, current) or _same_query(query, original):
            problem = "the refinement reply repeats the query"
        elif _echoes_prompt(query):
            problem = "the refinement reply repeats the prompt's instructions"
        if problem:
            return Refinement(query=original, method="unchanged", error=f"{problem}: {reply.text[:200]!r}")
        return Refinement(query=query, method="llm")


def _same_query(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


# The prompt's own lines of instruction and its section names: a small model may hand them back as its "query".
_INSTRUCTIONS = [" ".join(re.sub(r"^\d+\.\s*", "", line).lower().split()) for line in _PROMPT.splitlines()
                 if len(line.split()) >= 4 or (line.rstrip(":").isupper() and line.strip())]


def _echoes_prompt(query: str) -> bool:
    lowered = " ".join(query.lower().split())
    return any(line.rstrip(".") in lowered for line in _INSTRUCTIONS if line)
