"""Is what was kept enough to answer the query? If not, which follow-up queries would fill the gap? And how many
iterations does a query deserve?

- ``query_aspects``: the parts a query asks about ("revenue in Q4 2025 and how it compared with 2024" has two),
  split at question marks, semicolons, "and", "or", "versus", "compared with/to", "as well as" and commas.
- ``choose_budget``: 1 iteration for a simple factual query, 2 for a composite one, 3 for a complex multi-part
  question, by the number of aspects and of content terms: each part of a question may need a search of its own,
  and a simple one is answered by the first.
- ``OfflineGrader``: an aspect is covered when one kept document holds at least ``min_coverage`` of its stemmed
  terms; sufficient when every aspect is covered. Each uncovered aspect becomes a follow-up query.
- ``LLMGrader``: asks the LLM whether the kept results are complete (they answer the core question with enough
  depth) or not (partial, tangential or unspecific), as JSON ``{"sufficient", "missing", "follow_up_queries"}``; a
  failed call or an unusable reply falls back to the offline grade and says why.

Usage::

    choose_budget("What is the notice period?")                      # 1
    grade = OfflineGrader(KeywordAnalyzer()).grade(query, kept_documents)
    grade.sufficient, grade.coverage, grade.follow_up_queries
"""

from __future__ import annotations

import re
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from pipeline.agentic.signals import coverage
from pipeline.documents import Document
from pipeline.platform.llm import LLMClient, LLMError, parse_json_reply
from pipeline.retrieval.analyzer import KeywordAnalyzer
from pipeline.text import content_terms

_SPLIT = re.compile(
    r"\?|;|,|\b(?:and|or|versus|vs\.?|as well as|compared (?:with|to)|along with|plus)\b", re.IGNORECASE
)
DOC_CHARS_IN_PROMPT = 600
MIN_ASPECT_TERMS_ALONE = 3


class Grade(BaseModel):
    sufficient: bool
    coverage: float = Field(description="Mean coverage of the query's aspects by the kept documents, 0-1.")
    missing: list[str] = Field(default_factory=list, description="Aspects the kept documents do not cover.")
    follow_up_queries: list[str] = Field(default_factory=list)
    method: Literal["llm", "offline"]
    error: str | None = None


class Grader(Protocol):
    def grade(self, query: str, kept: list[Document]) -> Grade: ...


def query_aspects(query: str) -> list[str]:
    """The query's parts that carry content terms; the whole query when it has one part."""
    parts = [" ".join(p.split()) for p in _SPLIT.split(query)]
    aspects = [p for p in parts if content_terms(p)]
    return aspects if len(aspects) > 1 else [" ".join(query.split())]


def choose_budget(query: str) -> int:
    aspects = len(query_aspects(query))
    terms = len(content_terms(query))
    if aspects == 1 and terms <= 6:
        return 1
    if aspects <= 2 and terms <= 12:
        return 2
    return 3


class OfflineGrader:
    def __init__(self, analyzer: KeywordAnalyzer, min_coverage: float = 0.6) -> None:
        self.analyzer, self.min_coverage = analyzer, min_coverage

    def grade(self, query: str, kept: list[Document]) -> Grade:
        aspects = query_aspects(query)
        texts = [f"{d.title} {d.text}" for d in kept]
        covered = [max((coverage(self.analyzer, a, t) for t in texts), default=0.0) for a in aspects]
        missing = [a for a, c in zip(aspects, covered) if c < self.min_coverage]
        lead = aspects[0]
        follow_ups = []
        for aspect in missing:
            # A short part ("how it compared with 2024") needs the query's subject to be searchable alone.
            if aspect != lead and len(content_terms(aspect)) < MIN_ASPECT_TERMS_ALONE:
                aspect = f"{lead} {aspect}"
            follow_ups.append(aspect)
        return Grade(sufficient=bool(kept) and not missing, coverage=round(sum(covered) / len(covered), 3),
                     missing=missing, follow_up_queries=follow_ups, method="offline")


_SYSTEM = (
    "You grade whether search results are sufficient to answer a query.\n"
    "Complete: they directly answer the core question, with enough depth, and you are confident of it.\n"
    "Incomplete: a partial answer, tangential material, a lack of specifics, or new questions left open.\n"
    'Reply with only JSON: {"sufficient": true|false, "missing": ["what is still missing", ...], '
    '"follow_up_queries": ["a search query for each missing part", ...]}'
)


class LLMGrader:
    def __init__(self, llm: LLMClient, fallback: OfflineGrader, timeout_s: float = 20.0,
                 max_follow_ups: int = 3) -> None:
        self.llm, self.fallback, self.timeout_s, self.max_follow_ups = llm, fallback, timeout_s, max_follow_ups

    def grade(self, query: str, kept: list[Document]) -> Grade:
        offline = self.fallback.grade(query, kept)
        sources = "\n\n".join(f"[{i}] {d.title or d.id}\n{' '.join(d.text.split())[:DOC_CHARS_IN_PROMPT]}"
                              for i, d in enumerate(kept, start=1)) or "(no results)"
        try:
            reply = self.llm.complete(
                [{"role": "system", "content": _SYSTEM},
                 {"role": "user", "content": f"Query: {query}\n\nResults:\n\n{sources}"}],
                timeout_s=self.timeout_s)
        except LLMError as exc:
            return offline.model_copy(update={"error": f"grading call failed, offline grade used: {exc}"})
        try:
            data = parse_json_reply(reply)
        except LLMError as exc:
            return offline.model_copy(update={"error": f"malformed grading reply, offline grade used: {exc}"})
        if not isinstance(data, dict) or not isinstance(data.get("sufficient"), bool):
            return offline.model_copy(
                update={"error": f"unusable grading reply, offline grade used: {str(data)[:200]}"})
        follow_ups = [" ".join(str(q).split()) for q in data.get("follow_up_queries") or [] if str(q).strip()]
        missing = [str(m) for m in data.get("missing") or [] if str(m).strip()]
        if not data["sufficient"] and not follow_ups:
            follow_ups = offline.follow_up_queries or missing
        return Grade(sufficient=data["sufficient"], coverage=offline.coverage, missing=missing,
                     follow_up_queries=[] if data["sufficient"] else follow_ups[: self.max_follow_ups], method="llm")
