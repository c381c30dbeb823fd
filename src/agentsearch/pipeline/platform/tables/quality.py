"""A collection's quality: its question set made from its own documents, and the runs measured on it.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


class EvalSetRow(Base):
    """A collection's one question set: how it was made and when (``agentsearch.pipeline.eval.eval_sets``)."""

    __tablename__ = "eval_sets"
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"),
                                                     primary_key=True)
    method: Mapped[str] = mapped_column(String(20))  # cloze | llm (with cloze where the LLM's was not kept)
    size: Mapped[int] = mapped_column(Integer)  # asked for
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    refreshed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class EvalQuestionRow(Base):
    """One question of a set, with where its answer is: the document (its external id and the version it was made
    from) and the answer span's ``[start, end)`` in the document's text."""

    __tablename__ = "eval_questions"
    __table_args__ = (Index("ix_eval_questions_collection", "collection_id", "created_at"),)
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("eval_sets.collection_id", ondelete="CASCADE"))
    question: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    document_id: Mapped[str] = mapped_column(String(512))
    version: Mapped[str | None] = mapped_column(String(64))
    start: Mapped[int | None] = mapped_column(Integer)
    end: Mapped[int | None] = mapped_column(Integer)
    origin: Mapped[str] = mapped_column(String(10))  # cloze | llm | added
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class EvalRunRow(Base):
    """One measurement of a collection on its set: the settings it ran with and its figures
    (``agentsearch.pipeline.eval.quality_runs``). ``kind``: ``run`` (asked for), ``current`` and ``staged`` (the
    two sides of a gated change); ``status``: ``done`` or ``timed_out`` (figures of the questions it reached)."""

    __tablename__ = "eval_runs"
    __table_args__ = (Index("ix_eval_runs_collection", "collection_id", "created_at"),)
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(10), default="run")
    status: Mapped[str] = mapped_column(String(10), default="done")
    settings: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    figures: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    questions: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
