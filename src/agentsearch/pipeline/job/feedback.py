"""Feedback from the people who ask: a thumbs up or down on a job's answer, or on one of its sources, with an
optional comment; and a collection's feedback by week, for its admins.

One rating per user and thing rated: rating the same answer (or the same source of it) again replaces the first
rating, so a flood from one user moves no count past one. Only a finished answer is rated (409 before), and only a
source the answer has (422 naming ``source``). Whoever may read the job may rate it; the route finds the job first,
so a key that cannot read it gets 404.

Usage::

    with db.session() as s:
        row, changed = give_feedback(s, job, user_id, "down", comment="cites the 2023 policy", source="hr/leave")
        weekly_feedback(s, collection_id, weeks=8, shown=lambda job: True)
        # {"weeks": [{"week": "2026-11-23", "up": 3, "down": 1}, ...], "items": [{"job_id", "rating", ...}]}
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.answers import FeedbackRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.refusal import Refusal, invalid
from agentsearch.pipeline.webhooks.outbox import aware

Rating = Literal["up", "down"]
MAX_WEEKS = 52
# The feedback an admin reads one by one, newest first, beside the weekly counts.
ITEMS_SHOWN = 100


def give_feedback(s: Session, job: JobRow, user_id: uuid.UUID, rating: Rating, comment: str | None = None,
                  source: str | None = None) -> tuple[FeedbackRow, bool]:
    """The user's rating of the job's answer (``source`` None) or of one of its sources (its document id), stored
    in the caller's transaction; with whether it is new or changed (False: the same rating again)."""
    if job.status != "succeeded" or not job.response:
        raise Refusal(409, f"job {job.id} has no answer to rate yet (it is {job.status})")
    if source is not None and source not in {s_.get("document_id") for s_ in job.response.get("sources") or []}:
        raise invalid(("body", "source"), f"the answer has no source {source!r}; give one of its sources' "
                                          "document_id")
    comment = comment.strip() if comment and comment.strip() else None
    row = s.scalar(select(FeedbackRow).where(FeedbackRow.job_id == job.id, FeedbackRow.user_id == user_id,
                                             FeedbackRow.source == (source or "")))
    if row is None:
        row = FeedbackRow(job_id=job.id, collection_id=job.collection_id, user_id=user_id, rating=rating,
                          comment=comment, source=source or "", created_at=utcnow())
        s.add(row)
        s.flush()
        return row, True
    changed = row.rating != rating
    row.rating, row.comment = rating, comment if comment is not None else row.comment
    s.flush()
    return row, changed


def week_of(moment: datetime) -> str:
    """The Monday (UTC) starting the week of ``moment``, as ``YYYY-MM-DD``."""
    day = aware(moment).date()
    return (day - timedelta(days=day.weekday())).isoformat()


def weekly_feedback(s: Session, collection_id: uuid.UUID, weeks: int, shown: Callable[[JobRow], bool],
                    now: datetime | None = None) -> dict[str, Any]:
    """The collection's ratings over the last ``weeks`` weeks (this one included), counted per week, oldest first,
    a week without any with zeros; and the latest ratings one by one (``ITEMS_SHOWN``), only of jobs ``shown``
    accepts (an admin outside a job's document groups sees its rating counted, not its question or comment)."""
    now = now or utcnow()
    this_week = datetime.fromisoformat(week_of(now)).date()
    starts = [(this_week - timedelta(weeks=n)).isoformat() for n in reversed(range(weeks))]
    since = datetime.fromisoformat(starts[0]).replace(tzinfo=now.tzinfo)
    counts: dict[str, dict[str, Any]] = {week: {"week": week, "up": 0, "down": 0, "answer_up": 0, "answer_down": 0}
                                         for week in starts}
    rows = s.execute(select(FeedbackRow, JobRow)
                     .join(JobRow, JobRow.id == FeedbackRow.job_id)
                     .where(FeedbackRow.collection_id == collection_id, FeedbackRow.updated_at >= since)
                     .order_by(FeedbackRow.updated_at.desc())).all()
    items: list[dict[str, Any]] = []
    for row, job in rows:
        week = counts.get(week_of(row.updated_at))
        if week is None:
            continue
        week[row.rating] += 1
        if not row.source:
            week[f"answer_{row.rating}"] += 1
        if len(items) < ITEMS_SHOWN and shown(job):
            items.append({"job_id": str(row.job_id), "query": job.query, "rating": row.rating,
                          "comment": row.comment, "source": row.source or None, "at": aware(row.updated_at)})
    return {"collection_id": str(collection_id), "weeks": list(counts.values()), "items": items}
