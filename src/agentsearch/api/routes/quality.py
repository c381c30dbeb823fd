"""A collection's quality: its question set, the runs measured on it, its search settings and the gate they pass.

The set is made from the collection's own documents (``agentsearch.pipeline.eval.eval_sets``), each run goes the road
a job takes (``agentsearch.pipeline.eval.quality_runs``), and a staged change (``?stage=true``) goes live only if no
figure falls by more than the collection's tolerance (``agentsearch.pipeline.eval.gate``): otherwise 409 with both
sets of figures. Every change and every gate decision is in the audit trail. A run works in this request, held to
``eval_run_timeout_s`` (a staged change to ``quality_gate_timeout_s``).

Usage::

    POST   /v1/collections/{id}/eval-sets                 {"size": 50}            -> 201 {"questions": 50, ...}
    GET    /v1/collections/{id}/eval-sets                                         -> {"questions": [...]}
    POST   /v1/collections/{id}/eval-sets/questions       {"question", "answer", "document_id"}  -> 201
    DELETE /v1/collections/{id}/eval-sets/questions/{qid}                         -> 204
    POST   /v1/collections/{id}/eval-sets/refresh                                 -> {"dropped", "made"}
    POST   /v1/collections/{id}/eval-runs                                         -> 201 {"figures": {...}}
    GET    /v1/collections/{id}/eval-runs                                         -> {"runs": [...]} oldest first
    PUT    /v1/collections/{id}/search-settings?stage=true {"search": {"top_k": 1}} -> 200 | 409 {"figures": ...}
    PUT    /v1/collections/{id}/quality-tolerance          {"tolerance": 0.05}    -> 200 (admins)
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.schemas import EvalQuestionCreate, EvalSetCreate, SearchSettingsIn, ToleranceIn
from agentsearch.api.services import AppServices
from agentsearch.pipeline.eval.eval_sets import (
    add_question,
    drop_question,
    generate_set,
    question_out,
    rated_down_question,
    read_set,
    refresh_set,
    set_questions,
)
from agentsearch.pipeline.eval.gate import Decision, checked_search_settings, gate, run_settings
from agentsearch.pipeline.eval.quality_runs import Asked, RunSettings, measure, record_run, run_out, runs_of
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.refusal import invalid
from agentsearch.pipeline.services import Services

router = APIRouter(prefix="/v1/collections/{collection_id}", tags=["quality"], route_class=GuardedRoute)


def configured_llm(services: Services, wanted: bool = True) -> Any:
    """The service's LLM when one is configured and wanted, else None (the offline methods)."""
    from agentsearch.pipeline.platform.llm import LLMClient

    return LLMClient.from_settings(services.settings) if wanted else None


def asked_of(s, collection_id: uuid.UUID) -> list[Asked]:
    return [Asked(q.question, q.answer, q.document_id) for q in set_questions(s, collection_id)]


def tolerance_of(collection: CollectionRow, services: Services) -> float:
    return (collection.quality_tolerance if collection.quality_tolerance is not None
            else services.settings.quality_tolerance)


@router.post("/eval-sets", status_code=201)
def create_eval_set(collection_id: uuid.UUID, body: EvalSetCreate, user_id: CurrentUser, request: Request,
                    services: AppServices) -> dict[str, Any]:
    """Make the collection's question set anew from its documents (questions added by hand are kept)."""
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id, lock=True)
        summary = generate_set(s, collection, body.size or services.settings.eval_set_size,
                               llm=configured_llm(services, body.llm), seed=body.seed)
        audit(request, s, "quality.set.generate", collection_id=collection_id, target=("collection", collection_id),
              details=summary)
    return summary


@router.get("/eval-sets")
def read_eval_set(collection_id: uuid.UUID, user_id: CurrentUser, request: Request,
                  services: AppServices) -> dict[str, Any]:
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        return read_set(s, collection_id)


@router.post("/eval-sets/questions", status_code=201)
def add_eval_question(collection_id: uuid.UUID, body: EvalQuestionCreate, user_id: CurrentUser, request: Request,
                      services: AppServices) -> dict[str, Any]:
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        if body.job_id is not None:  # an answer rated down, confirmed by an editor with its correct source
            question, origin = rated_down_question(s, collection, body.job_id), "feedback"
        elif body.question:
            question, origin = body.question, "added"
        else:
            raise invalid(("body", "question"), "a question, or the job_id of an answer rated down, is required")
        row = add_question(s, collection, question, body.answer, body.document_id, origin=origin)
        audit(request, s, "quality.question.add", collection_id=collection_id, target=("eval_question", row.id),
              details={"document_id": row.document_id, "origin": origin,
                       **({"job_id": str(body.job_id)} if body.job_id else {})})
        return question_out(row)


@router.delete("/eval-sets/questions/{question_id}", status_code=204)
def delete_eval_question(collection_id: uuid.UUID, question_id: uuid.UUID, user_id: CurrentUser, request: Request,
                         services: AppServices) -> Response:
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        drop_question(s, collection_id, question_id)
        audit(request, s, "quality.question.drop", collection_id=collection_id, target=("eval_question", question_id))
    return Response(status_code=204)


@router.post("/eval-sets/refresh")
def refresh_eval_set(collection_id: uuid.UUID, user_id: CurrentUser, request: Request,
                     services: AppServices) -> dict[str, Any]:
    """Replace the questions of documents changed or deleted since they were made."""
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id, lock=True)
        read_set(s, collection_id)  # 404 without a set
        counts = refresh_set(s, collection, llm=configured_llm(services))
        audit(request, s, "quality.set.refresh", collection_id=collection_id, target=("collection", collection_id),
              details=counts)
    return counts


@router.post("/eval-runs", status_code=201)
def run_eval(collection_id: uuid.UUID, user_id: CurrentUser, request: Request,
             services: AppServices) -> dict[str, Any]:
    """Measure the collection on its set with its current settings and agents (the set refreshed first); kept."""
    import time

    from agentsearch.pipeline.job.submit import collection_specs

    llm = configured_llm(services)
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        read_set(s, collection_id)  # 404 without a set
        refresh_set(s, collection, llm=llm)
        current = run_settings(collection.search_settings, services.settings)
        current = RunSettings(current.search, current.top_k, tuple(collection_specs(s, collection_id,
                                                                                    services.registry)))
        questions = asked_of(s, collection_id)
    figures, status = measure(services, str(collection_id), questions, current, llm=llm,
                              deadline=time.monotonic() + services.settings.eval_run_timeout_s)
    with services.db.session() as s:
        row = record_run(s, collection_id, "run", status, current.as_json(), figures)
        audit(request, s, "quality.run", collection_id=collection_id, target=("eval_run", row.id),
              details={"status": status, "figures": figures})
        return run_out(row)


@router.get("/eval-runs")
def list_eval_runs(collection_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices,
                   limit: int = Query(50, ge=1, le=500)) -> dict[str, Any]:
    """The collection's latest runs, oldest first: its quality over time."""
    with services.db.session() as s:
        Reach(request, s, user_id).collection(collection_id)
        return {"collection_id": str(collection_id), "runs": [run_out(r) for r in runs_of(s, collection_id, limit)]}


@router.get("/search-settings")
def read_search_settings(collection_id: uuid.UUID, user_id: CurrentUser, request: Request,
                         services: AppServices) -> dict[str, Any]:
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id)
        return {"collection_id": str(collection_id), "search": collection.search_settings or {},
                "tolerance": tolerance_of(collection, services)}


def decided(request: Request, services: Services, collection_id: uuid.UUID, change: dict[str, Any],
            decision: Decision, current: RunSettings, staged: RunSettings) -> None:
    """Both runs kept and the decision in the audit trail; 409 with both sets of figures unless applied."""
    with services.db.session() as s:
        for kind, run, figures, status in (("current", current, decision.current, decision.statuses[0]),
                                           ("staged", staged, decision.staged, decision.statuses[1])):
            if figures:
                record_run(s, collection_id, kind, status or "done", run.as_json(), figures)
        audit(request, s, "quality.gate", collection_id=collection_id, target=("collection", collection_id),
              details={"change": change, **decision.as_json()})
    if decision.verdict != "applied":
        raise HTTPException(status_code=409, detail=decision.as_json())


def staged_gate(services: Services, collection_id: uuid.UUID, staged: RunSettings, current: RunSettings,
                questions: list[Asked], tolerance: float) -> Decision:
    return gate(services, str(collection_id), questions, current, staged, tolerance,
                services.settings.quality_gate_timeout_s, llm=configured_llm(services))


@router.put("/search-settings")
def set_search_settings(collection_id: uuid.UUID, body: SearchSettingsIn, user_id: CurrentUser, request: Request,
                        services: AppServices, stage: bool = Query(False, description="Measure the change on the "
                        "question set beside the current settings; apply it only if no figure falls past the "
                        "collection's tolerance (else 409 with both sets of figures).")) -> dict[str, Any]:
    """The collection's search settings for its jobs (a request's own values win)."""
    wanted = checked_search_settings(body.search, services.settings)
    change = {"search_settings": wanted}
    decision = None
    if stage:
        with services.db.session() as s:
            collection = Reach(request, s, user_id).collection(collection_id)
            before = collection.search_settings
            current = run_settings(before, services.settings)
            staged = run_settings(wanted, services.settings)
            questions = asked_of(s, collection_id)
            tolerance = tolerance_of(collection, services)
        decision = staged_gate(services, collection_id, staged, current, questions, tolerance)
        decided(request, services, collection_id, change, decision, current, staged)
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id, lock=True)
        if stage and collection.search_settings != before:
            raise HTTPException(status_code=409, detail="the search settings changed while the staged change ran; "
                                                        "stage it again")
        collection.search_settings = wanted or None
        audit(request, s, "collection.search_settings.set", collection_id=collection_id,
              target=("collection", collection_id), details=change)
    return {"collection_id": str(collection_id), "search": wanted,
            **({"gate": decision.as_json()} if decision is not None else {})}


@router.put("/quality-tolerance")
def set_quality_tolerance(collection_id: uuid.UUID, body: ToleranceIn, user_id: CurrentUser, request: Request,
                          services: AppServices) -> dict[str, Any]:
    """How far a figure may fall under a staged change of this collection: its admins'."""
    with services.db.session() as s:
        collection = Reach(request, s, user_id).collection(collection_id, lock=True)
        collection.quality_tolerance = body.tolerance
        audit(request, s, "collection.quality_tolerance.set", collection_id=collection_id,
              target=("collection", collection_id), details={"tolerance": body.tolerance})
        return {"collection_id": str(collection_id), "tolerance": tolerance_of(collection, services)}
