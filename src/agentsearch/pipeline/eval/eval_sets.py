"""A collection's question set: made from its documents, read, edited, and refreshed for documents that changed.

Passages are drawn across the collection's indexed documents (a seeded shuffle, one question per document before a
second from any): with an LLM each question is the model's, checked (``agentsearch.pipeline.eval.questions``), else
the offline cloze question. Only documents every member finds (no document groups) are drawn, so the set, which
every reader of the collection reads, shows nothing of a restricted document. Each question keeps the document's
version (``documents.version``); a refresh drops the questions of documents changed or gone since and makes new ones
from what the documents say now.

Usage::

    with db.session() as s:
        summary = generate_set(s, collection, size=50, llm=None)   # {"questions": 50, "method": "cloze", ...}
        read_set(s, collection.id)                                  # {"questions": [...], ...}
        refresh_set(s, collection)                                  # {"dropped": 2, "made": 2}
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.eval.questions import MadeQuestion, Rarity, cloze_question, llm_question
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.answers import FeedbackRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.quality import EvalQuestionRow, EvalSetRow
from agentsearch.pipeline.refusal import invalid, missing
from agentsearch.pipeline.security.document_access import visible_documents

MAX_SET_SIZE = 500
# Documents whose words tell how rare a word is: a sample is enough for rarity, and bounds what one request reads.
RARITY_SAMPLE = 2000
NO_GROUPS: tuple[str, ...] = ()


def make_questions(documents: Sequence[tuple[str, str, str]], size: int, rarity: Rarity, llm: Any = None,
                   seed: int | None = 0, shape: str = "line") -> list[MadeQuestion]:
    """Up to ``size`` questions from ``documents`` (id, title, text), spread across them: a seeded shuffle (``seed``
    None: in the order given), each document's most salient sentence first, its next ones only once every document
    gave one. ``shape``: the offline question's (``agentsearch.pipeline.eval.questions``)."""
    order = list(documents)
    if seed is not None:
        random.Random(seed).shuffle(order)  # noqa: S311 - a reproducible draw, not a secret
    made: list[MadeQuestion] = []
    rank = 0
    while len(made) < size and order:
        left = []
        for doc_id, title, text in order:
            if len(made) >= size:
                break
            question = (llm_question(llm, doc_id, title, text, rarity, rank, shape=shape) if llm is not None
                        else cloze_question(doc_id, title, text, rarity, rank, shape))
            if question is not None:
                made.append(question)
                left.append((doc_id, title, text))
        order, rank = left, rank + 1
    return made


def _drawable(s: Session, collection: CollectionRow):
    return visible_documents(select(DocumentRow).where(DocumentRow.collection_id == collection.id,
                                                       DocumentRow.status == "indexed"), collection, NO_GROUPS)


def _rarity(s: Session, collection: CollectionRow, seed: int) -> tuple[Rarity, list[uuid.UUID]]:
    ids = list(s.scalars(_drawable(s, collection).with_only_columns(DocumentRow.id).order_by(DocumentRow.id)))
    random.Random(seed).shuffle(ids)  # noqa: S311 - a reproducible draw, not a secret
    texts = s.scalars(select(DocumentRow.text).where(DocumentRow.id.in_(ids[:RARITY_SAMPLE])))
    return Rarity.of(list(texts)), ids


def _rows(s: Session, collection_id: uuid.UUID, made: list[MadeQuestion],
          versions: dict[str, str | None]) -> list[EvalQuestionRow]:
    rows = [EvalQuestionRow(collection_id=collection_id, question=q.question, answer=q.answer,
                            document_id=q.document_id, version=versions.get(q.document_id), start=q.start, end=q.end,
                            origin=q.origin) for q in made]
    s.add_all(rows)
    return rows


def _questions_from(s: Session, doc_ids: list[uuid.UUID], size: int, rarity: Rarity, llm: Any
                    ) -> tuple[list[MadeQuestion], dict[str, str | None]]:
    """Questions from these documents, in their order (drawn already), read a batch at a time until ``size`` are
    made."""
    made: list[MadeQuestion] = []
    versions: dict[str, str | None] = {}
    batch = max(size * 2, 20)
    for at in range(0, len(doc_ids), batch):
        wanted = doc_ids[at:at + batch]
        by_id = {d.id: d for d in s.scalars(select(DocumentRow).where(DocumentRow.id.in_(wanted)))}
        docs = [by_id[i] for i in wanted if i in by_id]
        versions.update({d.external_id: d.version for d in docs})
        made += make_questions([(d.external_id, d.title or "", d.text) for d in docs], size - len(made), rarity,
                               llm, seed=None)
        if len(made) >= size:
            break
    return made, versions


def generate_set(s: Session, collection: CollectionRow, size: int, llm: Any = None, seed: int = 0) -> dict[str, Any]:
    """The collection's set made anew (questions added by hand are kept); refused (422 ``size``) past the limit."""
    if not 1 <= size <= MAX_SET_SIZE:
        raise invalid(("body", "size"), f"size must be between 1 and {MAX_SET_SIZE}")
    rarity, ids = _rarity(s, collection, seed)
    made, versions = _questions_from(s, ids, size, rarity, llm)
    row = s.get(EvalSetRow, collection.id)
    if row is None:
        row = EvalSetRow(collection_id=collection.id, method="llm" if llm is not None else "cloze", size=size)
        s.add(row)
        s.flush()
    row.method, row.size = ("llm" if llm is not None else "cloze"), size
    row.created_at, row.refreshed_at = utcnow(), None
    # The questions people gave (by hand, or from an answer rated down) are kept; only the made ones are remade.
    s.execute(delete(EvalQuestionRow).where(EvalQuestionRow.collection_id == collection.id,
                                            EvalQuestionRow.origin.in_(("cloze", "llm"))))
    _rows(s, collection.id, made, versions)
    s.flush()
    return {"collection_id": str(collection.id), "method": row.method, "questions": len(made),
            "by_origin": {o: sum(q.origin == o for q in made) for o in ("llm", "cloze")},
            "documents": len({q.document_id for q in made})}


def question_out(row: EvalQuestionRow) -> dict[str, Any]:
    return {"id": str(row.id), "question": row.question, "answer": row.answer, "document_id": row.document_id,
            "version": row.version, "location": {"start": row.start, "end": row.end}, "origin": row.origin,
            "created_at": row.created_at}


def set_row(s: Session, collection_id: uuid.UUID) -> EvalSetRow:
    row = s.get(EvalSetRow, collection_id)
    if row is None:
        raise missing("question set of collection", collection_id)
    return row


def set_questions(s: Session, collection_id: uuid.UUID) -> list[EvalQuestionRow]:
    return list(s.scalars(select(EvalQuestionRow).where(EvalQuestionRow.collection_id == collection_id)
                          .order_by(EvalQuestionRow.created_at, EvalQuestionRow.id)))


def read_set(s: Session, collection_id: uuid.UUID) -> dict[str, Any]:
    row = set_row(s, collection_id)
    questions = set_questions(s, collection_id)
    return {"collection_id": str(collection_id), "method": row.method, "size": row.size,
            "created_at": row.created_at, "refreshed_at": row.refreshed_at,
            "questions": [question_out(q) for q in questions]}


def rated_down_question(s: Session, collection: CollectionRow, job_id: uuid.UUID) -> str:
    """The question of a job of ``collection`` whose answer someone rated down: what an editor adds to the set,
    with the source that should have answered it."""
    job = s.get(JobRow, job_id)
    if job is None or job.collection_id != collection.id:
        raise invalid(("body", "job_id"), f"job {job_id} is not a job of this collection")
    down = s.scalar(select(FeedbackRow.id).where(FeedbackRow.job_id == job_id, FeedbackRow.source == "",
                                                 FeedbackRow.rating == "down").limit(1))
    if down is None:
        raise invalid(("body", "job_id"), f"job {job_id}'s answer was not rated down")
    return job.query


def add_question(s: Session, collection: CollectionRow, question: str, answer: str, document_id: str,
                 origin: str = "added") -> EvalQuestionRow:
    """A question of the caller's: the document must be one every member finds, and hold the answer verbatim.
    ``origin``: ``added``, or ``feedback`` for the question of an answer rated down (``rated_down_question``)."""
    set_row(s, collection.id)
    doc = s.scalar(_drawable(s, collection).where(DocumentRow.external_id == document_id))
    if doc is None:
        raise invalid(("body", "document_id"), f"document {document_id!r} not found among the indexed documents")
    at = doc.text.casefold().find(answer.strip().casefold())
    if not answer.strip() or at < 0:
        raise invalid(("body", "answer"), "the answer must be a span of the document's text")
    end = at + len(answer.strip())
    row = EvalQuestionRow(collection_id=collection.id, question=question.strip(), answer=doc.text[at:end],
                          document_id=doc.external_id, version=doc.version, start=at, end=end, origin=origin)
    s.add(row)
    s.flush()
    return row


def drop_question(s: Session, collection_id: uuid.UUID, question_id: uuid.UUID) -> None:
    row = s.get(EvalQuestionRow, question_id)
    if row is None or row.collection_id != collection_id:
        raise missing("question", question_id)
    s.delete(row)


def refresh_set(s: Session, collection: CollectionRow, llm: Any = None, seed: int = 0) -> dict[str, int]:
    """The questions of documents changed (another version) or gone since they were made dropped, and as many made
    anew: first from those documents as they are now, then from others the set does not use yet."""
    questions = set_questions(s, collection.id)
    if not questions:
        return {"dropped": 0, "made": 0}
    now = {d.external_id: d for d in s.scalars(_drawable(s, collection).where(
        DocumentRow.external_id.in_({q.document_id for q in questions})))}
    stale = [q for q in questions if q.document_id not in now or now[q.document_id].version != q.version]
    if not stale:
        return {"dropped": 0, "made": 0}
    rarity, ids = _rarity(s, collection, seed)
    changed = [now[q.document_id].id for q in stale if q.document_id in now]
    # Documents the set still asks about are not drawn again, so the set stays spread across the collection.
    used = {now[q.document_id].id for q in questions if q not in stale and q.document_id in now}
    others = [i for i in ids if i not in set(changed) and i not in used]
    made, versions = _questions_from(s, list(dict.fromkeys(changed)) + others, len(stale), rarity, llm)
    for q in stale:
        s.delete(q)
    _rows(s, collection.id, made, versions)
    set_row(s, collection.id).refreshed_at = utcnow()
    s.flush()
    return {"dropped": len(stale), "made": len(made)}
