"""A job's conversation: the earlier turns a follow-up is asked after, and the turn a finished job leaves.

A search joins a conversation with ``conversation_id`` (the service's record of the user's earlier jobs in it) or
brings its own ``history`` (``HistoryMessage`` list, checked and bounded by the request model); never both. Either
way the job gets the history as chat messages (``{"role": "user" | "assistant", "content": ...}``, oldest first),
which its agents read as ``AgentContext.conversation_history`` and the whole-job cache key covers.

A turn is recorded when a job of a conversation **succeeds** (``record_turn``, called in the transaction that ends
it, as the webhook outbox is): the question as asked, the standalone query the job searched (the
``query_contextualizer``'s rewrite, else the question) and the answer. A job that fails or is cancelled leaves no
turn: it has no answer to follow up on, and asking again is how a client retries it. A conversation forgotten while
its job ran gets no turn either.

Usage::

    with db.session() as s:
        history = conversation_history(s, user_id, conversation_id)     # Refusal 404 for a missing or foreign id
    ...
    with db.session() as s:                                             # JobStore.succeed
        job.status = "succeeded"
        record_turn(s, job)
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.conversations import ConversationRow, ConversationTurnRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.records.job_response import JobResponse
from agentsearch.pipeline.security.access import Access

# The turns of a conversation a job is given: enough for a follow-up to be read, bounded so a long conversation
# does not grow every prompt and cache key without end.
HISTORY_TURNS = 5
MAX_HISTORY_MESSAGES = 20
MAX_MESSAGE_CHARS = 4000
# An answer in the history is cut to this: the question and the start of the answer carry what follows on.
ANSWER_CHARS = 1500


class HistoryMessage(BaseModel):
    """One message of an explicit ``history``: who said it and what."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


def owned_conversation(s: Session, user_id: uuid.UUID, conversation_id: uuid.UUID,
                       lock: bool = False) -> ConversationRow:
    """The user's conversation; another user's answers exactly as a missing one (404)."""
    return Access(s, user_id).owned(ConversationRow, conversation_id, "conversation", lock=lock)


def conversations_of(s: Session, user_id: uuid.UUID) -> list[tuple[ConversationRow, int]]:
    """The user's conversations, the latest changed first, each with its number of turns."""
    counts = (select(ConversationTurnRow.conversation_id, func.count().label("n"))
              .group_by(ConversationTurnRow.conversation_id).subquery())
    rows = s.execute(select(ConversationRow, func.coalesce(counts.c.n, 0))
                     .outerjoin(counts, counts.c.conversation_id == ConversationRow.id)
                     .where(ConversationRow.user_id == user_id)
                     .order_by(ConversationRow.updated_at.desc(), ConversationRow.id))
    return list(rows.tuples().all())


def forget_conversation(s: Session, row: ConversationRow) -> None:
    """The conversation and its turns gone; their jobs stay. The caller holds its row locked, as a job's end does to
    record a turn, so the two never cross."""
    s.execute(delete(ConversationTurnRow).where(ConversationTurnRow.conversation_id == row.id))
    s.delete(row)


def turns_of(s: Session, conversation_id: uuid.UUID, limit: int | None = None) -> list[ConversationTurnRow]:
    """The conversation's turns, oldest first (the newest ``limit`` of them when given)."""
    query = select(ConversationTurnRow).where(ConversationTurnRow.conversation_id == conversation_id)
    if limit is not None:
        newest = query.order_by(ConversationTurnRow.created_at.desc(), ConversationTurnRow.id.desc()).limit(limit)
        return list(reversed(s.scalars(newest).all()))
    return list(s.scalars(query.order_by(ConversationTurnRow.created_at, ConversationTurnRow.id)).all())


def as_messages(turns: list[ConversationTurnRow]) -> list[dict[str, str]]:
    """Turns as the chat messages agents read: each turn's standalone query (complete by itself, so the next
    follow-up builds on it), then its answer."""
    messages: list[dict[str, str]] = []
    for turn in turns:
        messages.append({"role": "user", "content": turn.standalone_query or turn.question})
        if turn.answer:
            messages.append({"role": "assistant", "content": turn.answer[:ANSWER_CHARS]})
    return messages


def readable_turns(s: Session, user_id: uuid.UUID, turns: list[ConversationTurnRow]) -> list[ConversationTurnRow]:
    """The turns whose job the user may still read (``Access.sees_job``): an answer found in documents of a group
    it has left since is no longer its to see, in the conversation or in a follow-up's history. A turn whose job
    retention removed stays (there is nothing left to check it by)."""
    access = Access(s, user_id)
    jobs = {job.id: job for job in s.scalars(select(JobRow).where(JobRow.id.in_([t.job_id for t in turns])))}
    return [t for t in turns if t.job_id not in jobs or access.sees_job(jobs[t.job_id])]


def conversation_history(s: Session, user_id: uuid.UUID, conversation_id: uuid.UUID) -> list[dict[str, str]]:
    """The history a job of this conversation is given: its newest ``HISTORY_TURNS`` turns the user may still
    read, as messages."""
    owned_conversation(s, user_id, conversation_id)
    return as_messages(readable_turns(s, user_id, turns_of(s, conversation_id, HISTORY_TURNS)))


def explicit_history(messages: list[HistoryMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content.strip()} for m in messages if m.content.strip()]


def standalone_query(job: JobRow, response: JobResponse) -> str:
    rewritten = response.metadata.get("standalone_query")
    return rewritten if isinstance(rewritten, str) and rewritten.strip() else job.query


def record_turn(s: Session, job: JobRow) -> ConversationTurnRow | None:
    """The turn a succeeded job leaves in its conversation, in the caller's transaction. Nothing for a job outside
    a conversation, one that did not succeed, or one whose conversation is gone.

    The conversation's row is locked first: a DELETE of it waits for this transaction, or this one finds it gone;
    so a turn never points at a forgotten conversation.
    """
    conversation_id = (job.request or {}).get("conversation_id")
    if job.status != "succeeded" or not conversation_id:
        return None
    conversation = s.scalar(select(ConversationRow).where(ConversationRow.id == uuid.UUID(str(conversation_id)))
                            .with_for_update())
    if conversation is None or conversation.user_id != job.user_id:
        return None
    if s.scalar(select(ConversationTurnRow.id).where(ConversationTurnRow.job_id == job.id)) is not None:
        return None
    now = utcnow()
    response = JobResponse.load(job.response or {})
    turn = ConversationTurnRow(id=uuid.uuid4(), conversation_id=conversation.id, job_id=job.id, status=job.status,
                               question=job.query, standalone_query=standalone_query(job, response),
                               answer=response.answer, created_at=job.finished_at or now)
    s.add(turn)
    conversation.updated_at = now
    s.flush()
    return turn
