"""What flows between the stages of a job: retrieved documents, the sources an answer cites, reasoning steps, and
the check of each citation against its source.

They belong to neither the agents nor retrieval: retrieval makes ``Document``s, agents read and rewrite them, the
answer cites them as ``Source``s.

Usage::

    doc = Document(id="q4-report#0", title="Q4 report", text="Revenue rose 12%.", score=0.81)
    Source(document_id=doc.id, title=doc.title, score=doc.score, location=location_of(doc))   # {"page": 3} or None
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class Document(BaseModel):
    """A retrieved document (or chunk) as it flows between stages."""

    id: str
    title: str = ""
    text: str
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)


Location = dict[str, Any]
LOCATION_DESCRIPTION = ('Where in its file the passage stands (agentsearch.pipeline.parsing.parsed): {"page": k}, '
                        '{"slide": k}, '
                        '{"sheet": name, "row": r} or {"sheet": name, "rows": [first, last]}, {"section": "A > B"}; '
                        "null for a document sent as text.")


def location_of(doc: Document) -> Location | None:
    """The location of a retrieved passage: its chunk's, as ingestion stored it; None when it has none."""
    location = doc.metadata.get("location")
    return dict(location) if isinstance(location, dict) and location else None


def link_of(doc: Document) -> str | None:
    """Where a retrieved document came from, when a source brought it (``agentsearch.pipeline.sources``): its page,
    feed entry's link or file."""
    url = doc.metadata.get("source_url")
    return url if isinstance(url, str) and url else None


class Source(BaseModel):
    document_id: str
    title: str
    score: float
    location: Location | None = Field(None, description=LOCATION_DESCRIPTION)
    url: str | None = Field(None, description="The page, feed entry or file a source brought the document from.")


class CotStep(BaseModel):
    step: int
    thought: str
    evidence: list[str] = Field(default_factory=list)


CitationStatus = Literal["supported", "partial", "unsupported"]


class Citation(BaseModel):
    """One answer sentence checked against one source it cites (``agentsearch.pipeline.job.answer.citations``): where in
    the source's text it is said (``span``, character offsets into that ``Document.text``; None when unsupported),
    how well (``status``, ``score`` in [0, 1]) and, when not fully supported, why (``reason``)."""

    sentence: str = Field(description="The answer's sentence as written, citation markers included.")
    source: int = Field(ge=1, description="The cited source's number n: the n-th entry of the sources.")
    document_id: str
    location: Location | None = Field(None, description=LOCATION_DESCRIPTION)
    span: tuple[int, int] | None = Field(None, description="[start, end) in the source's text.")
    status: CitationStatus
    score: float = Field(ge=0.0, le=1.0)
    reason: str | None = None
