"""Conversations: a user's follow-up questions, each job's question and answer kept as a turn.

A search asks in a conversation with ``conversation_id`` on ``POST /v1/search``; when its job succeeds, the question
as asked, the standalone query it was searched as and the answer become the conversation's next turn
(``agentsearch.pipeline.job.conversation``). Another user's conversation answers 404 exactly like one that does not
exist, here and on ``POST /v1/search``. Forgetting a conversation removes its turns; its jobs stay.

Usage::

    POST   /v1/conversations              {"title": "Northwind results"}        -> 201 {"id": ..., "turns": []}
    GET    /v1/conversations                                                    -> the user's, newest first
    GET    /v1/conversations/{id}                                               -> with its turns, oldest first
    DELETE /v1/conversations/{id}                                               -> 204
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from agentsearch.api.auth import CurrentUser
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.services import AppServices
from agentsearch.pipeline.ingestion.cited import stale_marks
from agentsearch.pipeline.job.conversation import conversations_of, forget_conversation, readable_turns, turns_of
from agentsearch.pipeline.platform.tables.conversations import ConversationRow, ConversationTurnRow

router = APIRouter(prefix="/v1/conversations", tags=["conversations"], route_class=GuardedRoute)


class ConversationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field("", max_length=200, description="A name for the conversation, for its owner's lists.")


def _out(row: ConversationRow, turn_count: int) -> dict[str, Any]:
    return {"id": str(row.id), "title": row.title, "turn_count": turn_count, "created_at": row.created_at,
            "updated_at": row.updated_at}


def _turn(turn: ConversationTurnRow, stale: dict[uuid.UUID, dict[str, str]]) -> dict[str, Any]:
    return {"job_id": str(turn.job_id), "status": turn.status, "question": turn.question,
            "standalone_query": turn.standalone_query, "answer": turn.answer, "created_at": turn.created_at,
            "stale": stale.get(turn.job_id)}


@router.post("", status_code=201)
def create_conversation(body: ConversationCreate, user_id: CurrentUser, services: AppServices) -> dict[str, Any]:
    """Start a conversation; pass its id as ``conversation_id`` to ``POST /v1/search``."""
    with services.db.session() as s:
        row = ConversationRow(user_id=user_id, title=body.title.strip())
        s.add(row)
        s.flush()
        return {**_out(row, 0), "turns": []}


@router.get("")
def list_conversations(user_id: CurrentUser, services: AppServices) -> list[dict[str, Any]]:
    with services.db.session() as s:
        return [_out(row, n) for row, n in conversations_of(s, user_id)]


@router.get("/{conversation_id}")
def read_conversation(conversation_id: uuid.UUID, user_id: CurrentUser, request: Request,
                      services: AppServices) -> dict[str, Any]:
    """The conversation with its turns, oldest first: each with its job's id, question, answer, status and time, and
    ``stale``, the documents its answer cites that changed or were deleted since (null: none).
    A turn whose job the user may no longer read (a document group left since) is not shown."""
    with services.db.session() as s:
        row = Reach(request, s, user_id).owned(ConversationRow, conversation_id, "conversation")
        turns = readable_turns(s, user_id, turns_of(s, row.id))
        stale = stale_marks(s, [t.job_id for t in turns])
        return {**_out(row, len(turns)), "turns": [_turn(t, stale) for t in turns]}


@router.delete("/{conversation_id}", status_code=204)
def delete_conversation(conversation_id: uuid.UUID, user_id: CurrentUser, request: Request,
                        services: AppServices) -> Response:
    """Forget the conversation and its turns; the jobs stay. A job of it still running leaves no turn."""
    with services.db.session() as s:
        # Locked as a job's end locks it to record a turn: the two never cross.
        forget_conversation(s, Reach(request, s, user_id).owned(ConversationRow, conversation_id, "conversation",
                                                                lock=True))
    return Response(status_code=204)
