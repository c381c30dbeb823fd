"""What an answer step produces (``Answer``), its sources, and the answers given when there is nothing to say."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentsearch.pipeline.documents import Citation, CotStep, Document, Source, link_of, location_of
from agentsearch.pipeline.platform.settings import ANSWER_LLM_TIMEOUT_S as ANSWER_LLM_TIMEOUT_S

NO_RESULTS = "No documents in the collection matched the query."
NO_TEXT = "The documents that matched the query hold no text to quote."
# ANSWER_LLM_TIMEOUT_S, the LLM's whole budget for the answer (retries included), is the default of
# AGENTSEARCH_ANSWER_LLM_TIMEOUT_S. The answer step's Celery limit follows the setting
# (agentsearch.worker.job_tasks.answer_limit_s), so a slow endpoint ends in the extractive fallback, not a killed task.
DEFAULT_MAX_SENTENCES = 3

Embed = Callable[[list[str]], list[list[float]]]


class AnswerSink(Protocol):
    """Where an answer's text goes as it is made (``agentsearch.pipeline.job.answer_stream.AnswerChannel``)."""

    def quick(self, text: str) -> None: ...

    def write(self, piece: str) -> None: ...

    def reset(self, reason: str) -> None: ...


@dataclass
class Answer:
    text: str
    sources: list[Source]
    cot_steps: list[CotStep] = field(default_factory=list)
    method: str = "extractive"  # extractive | llm
    fallback_reason: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    # Set when the answer's sentences were already judged (an LLM answer,
    # ``agentsearch.pipeline.job.answer.grounding``); None when the answer step is still to check them.
    citations: list[Citation] | None = None

    def metadata(self) -> dict[str, Any]:
        """What the job records in ``metadata.answer``."""
        return {"method": self.method, "fallback_reason": self.fallback_reason, **self.info}


def llm_failure(exc: Exception, budget_s: float, setting: str) -> tuple[str, dict[str, Any] | None]:
    """Why an LLM call of the answer step gave nothing, and, when its budget ran out, the cut as the record keeps
    it (``{"setting": ..., "budget_s": ...}``): the reason then begins by naming the setting, so a user who sees
    the offline answer sees what to raise."""
    error = f"{type(exc).__name__}: {exc}"
    if not getattr(exc, "budget_spent", False):
        return error, None
    return f"the LLM's reply was cut at {budget_s:g} s by {setting} ({error})", {"setting": setting,
                                                                                  "budget_s": budget_s}


def sources_of(documents: list[Document]) -> list[Source]:
    return [Source(document_id=d.id, title=d.title or d.id, score=round(d.score, 6), location=location_of(d),
                   url=link_of(d)) for d in documents]
