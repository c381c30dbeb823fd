"""Submitting a search job: the request checked against the settings and the registry, answered by an earlier job
when one fits, else a queued job row with its first state, which the caller puts on the queues.

An earlier job answers in two cases: the same ``Idempotency-Key`` (the client sent the request again), or an
identical request (same query, options, agent configs and collection epochs: the cache key) whose job succeeded
completely, in which case a new job row points at its stored response and nothing runs.

A request the service will not take raises ``Refusal`` (``agentsearch.pipeline.refusal``): the field at fault for a 422,
otherwise a status and its words. Nothing is written then.

Given the caller as an ``Actor``, a search answered by an earlier job is put in the audit trail in the very
transaction that answers it (one commit: a cache hit costs a read and little more); a new job's row is the
caller's to write once the job is on the queues (``audit_search``), as ``Submission.audited`` says.

Usage::

    submitted = submit_job(services, user_id, request, idempotency_key="retry-7", actor=Actor(user_id, "as_XXXX"))
    if submitted.state is not None:                          # a new job: the caller enqueues it
        task_ids = enqueue_job(str(submitted.job_id), submitted.specs, submitted.state, timeout_s)
        JobStore(services.db).record_tasks(str(submitted.job_id), task_ids)
    if not submitted.audited:
        with services.db.session() as s:
            audit_search(s, Actor(user_id, "as_XXXX"), request, submitted)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agentsearch.pipeline.agentic.spec import AgenticSpec, checked_spec
from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.job.conversation import conversation_history, explicit_history
from agentsearch.pipeline.job.filter_scans import refuse_scanning_filter
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.request import SearchRequest
from agentsearch.pipeline.job.stage_budget import effective, over_deadline
from agentsearch.pipeline.platform.kv import canonical_hash
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.agents import AgentConfigRow, CollectionAgentRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.refusal import Refusal, invalid, invalid_fields, missing
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.filters import MetadataFilter, filter_problems
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.audit import Actor, record_reads
from agentsearch.pipeline.security.document_access import job_access
from agentsearch.pipeline.security.key_limits import KeyLimits
from agentsearch.pipeline.services import Services

CONTEXTUALIZER = "query_contextualizer"


@dataclass(frozen=True)
class Submission:
    """What a submit decided. ``state`` is set for a new job, which the caller enqueues; without it an earlier job
    answered: the same Idempotency-Key (``replayed``) or a stored response (``cache_hit``, a new row pointing at
    it). ``audited``: its search is in the audit trail already (``submit_job`` was given the actor).
    ``collections``: every collection the request reads (its own first, ``also_search``, its profiles'), each
    once: the search is in the trail of each."""

    job_id: uuid.UUID
    status: str
    cached: bool
    replayed: bool = False
    cache_hit: bool = False
    audited: bool = False
    collections: tuple[uuid.UUID, ...] = ()
    specs: list[AgentSpec] = field(default_factory=list)
    state: JobState | None = None

    @classmethod
    def of(cls, job: JobRow, **kw) -> Submission:
        return cls(job_id=job.id, status=job.status, cached=job.cached_from is not None, **kw)


def submit_job(services: Services, user_id: uuid.UUID, request: SearchRequest,
                  idempotency_key: str | None = None, within: frozenset[uuid.UUID] | None = None,
                  actor: Actor | None = None) -> Submission:
    """Check the request, then answer it from an earlier job or create its job (queued, not yet enqueued).
    ``within``: the only collections the caller's key sees (None: all the user's); any other is missing.
    ``actor``: who searches; an earlier job's answer is audited in its transaction (``Submission.audited``)."""
    settings = services.settings
    query, top_k, search, agentic = _checked(request, settings, services.registry)
    named_at = _where_named(request, agentic)
    read = tuple(named_at)
    jobs = JobStore(services.db)
    with services.db.session() as s:
        if idempotency_key:
            earlier = jobs.by_idempotency_key(s, user_id, idempotency_key)
            if earlier is not None and not KeyLimits(collections=within).sees_job(earlier):
                # Made with another key of the user's: the replay would hand over a job this key may not see.
                raise Refusal(409, "this Idempotency-Key belongs to a job over collections this API key does not "
                                   "see; send another Idempotency-Key")
            if earlier is not None:
                return _audited(s, actor, request, Submission.of(earlier, replayed=True, collections=read))
        epochs, collections = _epochs(s, named_at, user_id, settings, within)
        refuse_scanning_filter(s, request.filter, [c.id for c in collections], settings.max_scan_chunks)
        top_k, search = _with_collection_search(collections[0].search_settings, request, top_k, search)
        # Over a team collection with restricted documents every search of the job finds only what the caller's
        # document groups let it: the filter rides in the search overrides, so each search applies it and the
        # cache key covers it. The groups themselves ride in the state, for the agents' own reading.
        access = job_access(s, epochs, user_id, teams=[collection.team_id for collection in collections])
        if access is not None and access.searched is not None:
            search["filter"] = access.applied(search.get("filter"))
        stage_timeouts = _stage_timeouts(collections[0], request, settings)
        history = _history(s, request, user_id, within)
        if request.agents is not None:
            specs = ad_hoc_specs(request.agents, services.registry)
        else:
            specs = collection_specs(s, request.collection_id, services.registry)
        if history:
            specs = with_contextualizer(specs, services.registry)
        snapshot = [spec.model_dump(mode="json") for spec in specs]
        cache_key = canonical_hash(
            [query, top_k, request.cot, search, snapshot, epochs, settings.embedding_model, settings.openai_model,
             *([agentic.model_dump(mode="json")] if agentic else []),
             # The turns a follow-up is read after: the same words in another conversation are another question.
             # Without history the key is as it always was.
             *([{"history": history}] if history else []),
             # What its agents may read follows the caller's document groups: members share an answer only when
             # they hold the same. Without groups the key is as it always was.
             *([{"groups": access.held}] if access is not None and access.held else [])]
        )
        hit = None
        # Skipping what was seen makes each run's answer depend on the runs before it: never answered from cache.
        if request.use_cache and not (agentic and agentic.seen.enabled):
            hit = jobs.find_cached(s, user_id, cache_key, shared_with=Access(s, user_id).sees_job)
            if hit is None:
                services.metrics.record_cache("job", False)
        # Chosen here, not by the database, so the state (or a cached response) names its job in the same INSERT.
        job_id = uuid.uuid4()
        state = None if hit is not None else JobState(
            job_id=str(job_id),
            collection_id=str(request.collection_id),
            user_id=str(user_id),
            query=query,
            original_query=query,
            top_k=top_k,
            cot=request.cot,
            search=search,
            collections=epochs,
            agentic=agentic.model_dump(mode="json") if agentic else None,
            conversation_id=str(request.conversation_id) if request.conversation_id else None,
            history=history or None,
            # Not part of the cache key: a response an agent's stage budget cut short is never reused, and a
            # complete one is the same whatever the budget was (assemble_response).
            stage_timeouts=stage_timeouts,
            access_tokens=access.held if access is not None else None,
        )
        try:
            job = jobs.create(s, job_id, user_id, request.collection_id, query,
                              request=request.model_dump(mode="json"), deadline_s=settings.job_deadline_s,
                              snapshot=snapshot, state=state, idempotency_key=idempotency_key,
                              cache_key=cache_key, answered_from=hit,
                              access_groups=access.held if access is not None else None)
        except IntegrityError:
            raise Refusal(409, "a job with this Idempotency-Key is being created") from None
        if hit is not None:
            # The whole job is answered from the stored response: no Celery, no agents.
            return _audited(s, actor, request, Submission.of(job, cache_hit=True, collections=read))
        return Submission.of(job, specs=specs, state=state, collections=read)


def audit_search(s: Session, actor: Actor, request: SearchRequest, submitted: Submission) -> None:
    """The search's rows in the audit trail, in the caller's transaction: one per collection it reads, so a team
    whose collection was searched beside another (``also_search``, a profile's) has the search in its own trail."""
    record_reads(s, actor, "search", submitted.collections or (request.collection_id,),
                 target=("job", submitted.job_id),
                 details={"query": request.query, "cache_hit": submitted.cache_hit, "replayed": submitted.replayed,
                          "also_search": [str(c) for c in request.also_search or []][:20]})


def _audited(s: Session, actor: Actor | None, request: SearchRequest, submitted: Submission) -> Submission:
    # Written before the submission's transaction commits: the answer and its record commit together, and a row
    # that cannot be written fails the request (500) as a transaction of its own would.
    if actor is None:
        return submitted
    audit_search(s, actor, request, submitted)
    return replace(submitted, audited=True)


def _checked(request: SearchRequest, settings: Settings, registry: AgentRegistry
             ) -> tuple[str, int, dict, AgenticSpec | None]:
    """The request's query, top_k, search overrides and agentic part, each checked in the order a client reads
    the errors: the first one found is the one refused."""
    query = request.query.strip()
    if not query:
        raise invalid(("body", "query"), "query must not be empty")
    if len(query) > settings.max_query_chars:
        raise invalid(("body", "query"), f"query is {len(query)} characters; the limit is {settings.max_query_chars}")
    top_k = request.top_k or settings.default_top_k
    if top_k > settings.max_top_k:
        raise invalid(("body", "top_k"), f"top_k may be at most {settings.max_top_k}")
    if request.agents is not None:
        for i, agent_id in enumerate(request.agents):
            if agent_id not in registry:
                raise invalid(("body", "agents", i), f"unknown agent id {agent_id!r}")
        if len(set(request.agents)) != len(request.agents):
            raise invalid(("body", "agents"), "an agent is listed twice")
    search = dict(request.search or {})
    if "top_k" in search:
        raise invalid(("body", "search", "top_k"), "set top_k at the top level of the request")
    if "filter" in search:
        raise invalid(("body", "search", "filter"), "set filter at the top level of the request")
    if request.filter is not None:
        problems = filter_problems(request.filter)
        if problems:
            errors = [{"loc": ("body", "filter", *loc), "msg": msg, "type": kind} for loc, msg, kind in problems]
            raise Refusal(422, problems[0][1], errors)
        # Kept normalised with the search overrides: every search of the job (each collection, each iteration,
        # each agent's) builds its SearchConfig from them, and the job's cache key covers them.
        search["filter"] = MetadataFilter.model_validate(request.filter).as_json()
    try:
        SearchConfig(**{**settings.search_defaults(), **search, "top_k": top_k})
    except ValidationError as exc:
        raise invalid_fields(("body", "search"), exc) from None
    return query, top_k, search, _agentic(request, settings)


def _with_collection_search(saved: dict | None, request: SearchRequest, top_k: int, search: dict
                            ) -> tuple[int, dict]:
    """The collection's search settings (``agentsearch.pipeline.eval.gate``, checked when saved) under the request's
    own: what the request says wins, what it leaves out the collection sets."""
    if not saved:
        return top_k, search
    rest = {k: v for k, v in saved.items() if k != "top_k"}
    return request.top_k or saved.get("top_k") or top_k, {**rest, **search}


def _agentic(request: SearchRequest, settings: Settings) -> AgenticSpec | None:
    """The agentic part of a search request; None for the single pass."""
    if request.mode != "iterative":
        for name in ("iterative", "profiles", "seen"):
            if getattr(request, name) is not None:
                raise invalid(("body", name), f"{name} needs mode 'iterative'")
        return None
    return checked_spec(request.iterative, request.profiles, request.seen, settings)


def _where_named(request: SearchRequest, agentic: AgenticSpec | None) -> dict[uuid.UUID, tuple]:
    """Every collection the job searches, with where the request named it first: an error points at that entry."""
    named_at: dict[uuid.UUID, tuple] = {request.collection_id: ("body", "collection_id")}
    for i, extra in enumerate(request.also_search or []):
        named_at.setdefault(extra, ("body", "also_search", i))
    for i, profile in enumerate(agentic.profiles if agentic else []):
        for j, extra in enumerate(profile.collections):
            named_at.setdefault(extra, ("body", "profiles", i, "collections", j))
    return named_at


def _epochs(s: Session, named_at: dict[uuid.UUID, tuple], user_id: uuid.UUID, settings: Settings,
            within: frozenset[uuid.UUID] | None = None) -> tuple[dict[str, int], list[CollectionRow]]:
    """Each collection's index epoch (part of the cache key), and the rows read (the job's own first: the rest of
    the submission reads them, not the database again). The main collection missing is a 404, as reading it would
    be; another one is the field that named it. Another user's collection is missing too, and so is one outside
    the caller's key (``within``)."""
    epochs = {}
    collections = []
    access = Access(s, user_id)  # a team's collection is searched by any member: viewer is the least role
    for i, (collection_id, loc) in enumerate(named_at.items()):
        collection = s.get(CollectionRow, collection_id)
        if (collection is None or access.held(collection) is None
                or (within is not None and collection_id not in within)):
            if i == 0:
                raise missing("collection", collection_id)
            raise invalid(loc, f"collection {collection_id} not found")
        if collection.embedding_model != settings.embedding_model:
            raise Refusal(
                409, f"collection {collection.name!r} was indexed with {collection.embedding_model!r} but the "
                f"service embeds queries with {settings.embedding_model!r}; re-ingest it or configure that model",
            )
        epochs[str(collection_id)] = collection.index_epoch
        collections.append(collection)
    return epochs, collections


def _stage_timeouts(collection: CollectionRow, request: SearchRequest, settings: Settings) -> dict[str, float] | None:
    """The job's stage budgets: the collection's, each overridden by the request's; none longer than the job's
    deadline (a collection's may have been set under a longer one)."""
    asked = request.stage_timeouts.given() if request.stage_timeouts is not None else None
    if asked and (problem := over_deadline(asked, settings.job_deadline_s)) is not None:
        raise invalid(("body", "stage_timeouts", problem[0]), problem[1])
    merged = effective(collection.stage_timeouts, asked)
    if merged:
        merged = {stage: min(value, settings.job_deadline_s) for stage, value in merged.items()}
    return merged


def _history(s: Session, request: SearchRequest, user_id: uuid.UUID,
             within: frozenset[uuid.UUID] | None = None) -> list[dict[str, str]]:
    """The earlier messages the job's question follows: its conversation's turns, or the request's own history.
    A missing or foreign conversation is a 404 naming it, like any other row the user cannot see."""
    if request.conversation_id is not None and request.history is not None:
        raise invalid(("body", "history"), "give conversation_id or history, not both")
    if request.conversation_id is not None and within is not None:
        # A conversation's turns answer questions over any of the user's collections (agentsearch.api.scopes).
        raise Refusal(403, "a conversation spans every collection of the user; this API key is limited to some "
                           "collections: send the earlier turns as history instead")
    if request.conversation_id is not None:
        return conversation_history(s, user_id, request.conversation_id)
    return explicit_history(request.history or [])


def with_contextualizer(specs: list[AgentSpec], registry: AgentRegistry) -> list[AgentSpec]:
    """A job with history reads its question as a follow-up: the ``query_contextualizer`` runs first among the
    pre-search agents (with its default config) unless the agents already list it, as configured."""
    if CONTEXTUALIZER in (spec.agent_id for spec in specs) or CONTEXTUALIZER not in registry:
        return specs
    first = min((spec.priority for spec in specs if spec.stage == Stage.PRE_SEARCH), default=0)
    agent = registry.get(CONTEXTUALIZER)
    added = AgentSpec(agent_id=CONTEXTUALIZER, stage=Stage.PRE_SEARCH, priority=first - 1,
                      timeout_s=agent.default_timeout_s)
    return [added, *specs]


def ad_hoc_specs(agent_ids: list[str], registry: AgentRegistry) -> list[AgentSpec]:
    """Agents named in the request run with their default configs, in the order given."""
    return [
        AgentSpec(agent_id=a, stage=registry.get(a).stage, priority=i * 10, timeout_s=registry.get(a).default_timeout_s)
        for i, a in enumerate(agent_ids)
    ]


def collection_specs(s: Session, collection_id: uuid.UUID, registry: AgentRegistry) -> list[AgentSpec]:
    """The collection's enabled agent configs, as the job's snapshot of what runs, each with its fallback's spec
    (an enabled config; one level: the fallback's own fallback is not followed)."""
    rows = s.execute(
        select(AgentConfigRow, CollectionAgentRow)
        .join(CollectionAgentRow, CollectionAgentRow.agent_config_id == AgentConfigRow.id)
        .where(CollectionAgentRow.collection_id == collection_id, CollectionAgentRow.enabled, AgentConfigRow.enabled)
    ).all()
    fallback_ids = {link.fallback_agent_config_id for _, link in rows if link.fallback_agent_config_id is not None}
    fallbacks: dict[uuid.UUID | None, AgentConfigRow] = {
        cfg.id: cfg
        for cfg in s.scalars(select(AgentConfigRow).where(AgentConfigRow.id.in_(fallback_ids), AgentConfigRow.enabled))
    } if fallback_ids else {}

    def spec_of(cfg: AgentConfigRow, priority: int, **extra) -> AgentSpec:
        return AgentSpec(
            agent_id=cfg.agent_id,
            stage=cfg.trigger_stage,
            config=cfg.config,
            config_id=str(cfg.id),
            priority=priority,
            # Resolved now, so the snapshot says what ran and Celery's backstop limits follow the agent's deadline.
            timeout_s=cfg.timeout_s or registry.get(cfg.agent_id).default_timeout_s,
            cache_ttl_s=cfg.cache_ttl_s,
            breaker_fail_max=cfg.breaker_fail_max,
            breaker_reset_timeout_s=cfg.breaker_reset_timeout_s,
            **extra,
        )

    specs = []
    for cfg, link in rows:
        priority = link.priority if link.priority is not None else cfg.priority
        fallback = fallbacks.get(link.fallback_agent_config_id)
        # The fallback runs as the step it stands in for: at the same priority, without a fallback of its own.
        specs.append(spec_of(cfg, priority, critical=bool(link.critical),
                             fallback=spec_of(fallback, priority) if fallback is not None else None))
    return specs
