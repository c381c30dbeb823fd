"""Feedback on answers: a thumbs up or down with an optional comment, and a collection's feedback by week.

What is stored and how it is counted is ``agentsearch.pipeline.job.feedback``; this route finds the job or the
collection with the role the route table gives it (``agentsearch.api.route_rules``), so a key that cannot read the
job gets 404 and a member below admin 403 on a collection's feedback. Rating counts, like every route's, against the
caller's requests per minute (``agentsearch.api.rate_limits``): a flood gets 429.

Usage::

    POST /v1/jobs/{id}/feedback               {"rating": "down", "comment": "...", "source": "hr/leave"}  -> 201
    GET  /v1/collections/{id}/feedback?weeks=8                                                          -> by week
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Query, Request, Response

from agentsearch.api.auth import CurrentUser
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.schemas import FeedbackCreate
from agentsearch.api.services import AppServices
from agentsearch.pipeline.job.feedback import MAX_WEEKS, give_feedback, weekly_feedback
from agentsearch.pipeline.security.document_access import held_tokens, job_visible

router = APIRouter(tags=["feedback"], route_class=GuardedRoute)


@router.post("/v1/jobs/{job_id}/feedback", status_code=201, responses={200: {"description": "the same rating again"}})
def rate_job(job_id: uuid.UUID, body: FeedbackCreate, user_id: CurrentUser, request: Request,
             services: AppServices, response: Response) -> dict[str, Any]:
    """Rate the job's answer, or one of its sources (``source``: its document id); rating it again replaces the
    first rating (201 when new or changed, 200 when the same)."""
    with services.db.session() as s:
        job = Reach(request, s, user_id).job(job_id)
        row, changed = give_feedback(s, job, user_id, body.rating, body.comment, body.source)
        out = {"job_id": str(job.id), "rating": row.rating, "comment": row.comment, "source": row.source or None}
        collection_id = str(job.collection_id)
    if changed:
        services.metrics.record_feedback(collection_id, body.rating)
    else:
        response.status_code = 200
    return out


@router.get("/v1/collections/{collection_id}/feedback")
def collection_feedback(collection_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices,
                        weeks: int = Query(8, ge=1, le=MAX_WEEKS)) -> dict[str, Any]:
    """The collection's ratings by week (oldest first) and the latest ones with their comments, for its admins."""
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        tokens = held_tokens(s, user_id)
        return weekly_feedback(s, collection.id, weeks,
                               shown=lambda job: job.access_groups is None or job_visible(s, job, tokens))
