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
  depth) or not (partial, tangential or unspecific), as JSON ``{"sufficient", "missing", "follow_up_queries"}``
  (asked by schema); a failed call or an unusable reply (not JSON, cut at its token limit) falls back to the offline
  grade and says why. The results shown are those the model's context holds (``Grade.budget`` says when some
  were cut or left out); follow-ups that repeat the query or run to a paragraph are dropped.

Usage::

    choose_budget("What is the notice period?")                      # 1
    grade = OfflineGrader(KeywordAnalyzer()).grade(query, kept_documents)
    grade.sufficient, grade.coverage, grade.follow_up_queries
"""

from __future__ import annotations

import re
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from agentsearch.pipeline.agentic.signals import coverage
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.llm import LLMClient, LLMError, reply_json
from agentsearch.pipeline.platform.prompt_budget import fit_texts
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import content_terms

_SPLIT = re.compile(
    r"\?|;|,|\b(?:and|or|versus|vs\.?|as well as|compared (?:with|to)|along with|plus)\b", re.IGNORECASE
)
DOC_CHARS_IN_PROMPT = 600
REPLY_TOKENS = 256
MAX_LISTED = 3
MAX_FOLLOW_UP_CHARS = 200
MIN_ASPECT_TERMS_ALONE = 3


class Grade(BaseModel):
    sufficient: bool
    coverage: float = Field(description="Mean coverage of the query's aspects by the kept documents, 0-1.")
    missing: list[str] = Field(default_factory=list, description="Aspects the kept documents do not cover.")
    follow_up_queries: list[str] = Field(default_factory=list)
    method: Literal["llm", "offline"]
    error: str | None = None
    budget: str | None = Field(None, description="What of the results was cut to fit the model's context.")


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


_PLACEHOLDERS = frozenset({"what is still missing", "a search query for each missing part"})


class LLMGrader:
    def __init__(self, llm: LLMClient, fallback: OfflineGrader, timeout_s: float = 20.0,
                 max_follow_ups: int = 3) -> None:
        self.llm, self.fallback, self.timeout_s, self.max_follow_ups = llm, fallback, timeout_s, max_follow_ups

    def grade(self, query: str, kept: list[Document]) -> Grade:
        offline = self.fallback.grade(query, kept)
        blocks = [f"[{i}] {d.title or d.id}\n{' '.join(d.text.split())[:DOC_CHARS_IN_PROMPT]}"
                  for i, d in enumerate(kept, start=1)]
        system = {"role": "system", "content": _SYSTEM}
        fitted = fit_texts(self.llm, [system, {"role": "user", "content": f"Query: {query}\n\nResults:\n\n"}],
                           blocks, REPLY_TOKENS)
        if blocks and not fitted.texts:
            return offline.model_copy(update={"error": f"offline grade used: {fitted.note()}"})
        sources = "\n\n".join(fitted.texts) or "(no results)"
        schema = {"type": "object", "required": ["sufficient", "missing", "follow_up_queries"], "properties": {
            "sufficient": {"type": "boolean"},
            "missing": {"type": "array", "maxItems": MAX_LISTED, "items": {"type": "string", "maxLength": 200}},
            "follow_up_queries": {"type": "array", "maxItems": MAX_LISTED,
                                  "items": {"type": "string", "maxLength": MAX_FOLLOW_UP_CHARS}}}}
        try:
            reply = self.llm.reply([system, {"role": "user", "content": f"Query: {query}\n\nResults:\n\n{sources}"}],
                                   timeout_s=self.timeout_s, max_tokens=REPLY_TOKENS, json_schema=schema)
        except LLMError as exc:
            return offline.model_copy(update={"error": f"grading call failed, offline grade used: {exc}"})
        try:
            data = reply_json(reply)
        except LLMError as exc:
            return offline.model_copy(update={"error": f"malformed grading reply, offline grade used: {exc}"})
        if not isinstance(data, dict) or not isinstance(data.get("sufficient"), bool):
            return offline.model_copy(
                update={"error": f"unusable grading reply, offline grade used: {str(data)[:200]}"})
        follow_ups = usable_queries(data.get("follow_up_queries"), query)
        # Nothing is missing from what the model calls sufficient; the prompt's own placeholders are not aspects.
        missing = [] if data["sufficient"] else [
            str(m) for m in data.get("missing") or [] if str(m).strip() and str(m).strip() not in _PLACEHOLDERS]
        if not data["sufficient"] and not follow_ups:
            follow_ups = offline.follow_up_queries or usable_queries(missing, query)
        return Grade(sufficient=data["sufficient"], coverage=offline.coverage, missing=missing,
                     follow_up_queries=[] if data["sufficient"] else follow_ups[: self.max_follow_ups], method="llm",
                     budget=fitted.note())


def usable_queries(values, query: str) -> list[str]:
    """The follow-up queries worth a search: text, not the query again, not a paragraph; in order, once each."""
    seen = {" ".join(query.lower().split())}
    out = []
    for value in values if isinstance(values, list) else []:
        text = " ".join(str(value).split())
        if text and len(text) <= MAX_FOLLOW_UP_CHARS and text.lower() not in seen:
            seen.add(text.lower())
            out.append(text)
    return out
