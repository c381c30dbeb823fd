"""What flows between the stages of a job: retrieved documents, the sources an answer cites, reasoning steps.

They belong to neither the agents nor retrieval: retrieval makes ``Document``s, agents read and rewrite them, the
answer cites them as ``Source``s.

Usage::

    doc = Document(id="q4-report#0", title="Q4 report", text="Revenue rose 12%.", score=0.81)
    Source(document_id=doc.id, title=doc.title, score=doc.score)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Document(BaseModel):
    """A retrieved document (or chunk) as it flows between stages."""

    id: str
    title: str = ""
    text: str
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)


class Source(BaseModel):
    document_id: str
    title: str
    score: float


class CotStep(BaseModel):
    step: int
    thought: str
    evidence: list[str] = Field(default_factory=list)
