"""Agentic modes as jobs: the request's spec, loops kept between tasks, the join of parallel loops, profile-set
runs and their schedule, and the agentic canvases (inspected, never sent to a broker)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from celery.canvas import _chain, _chord
from pydantic import ValidationError

from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.loop import IterationRecord, JudgedDocument, LoopState
from agentsearch.pipeline.agentic.scoring import Evaluation
from agentsearch.pipeline.agentic.spec import AgenticSpec, LoopStore, job_documents
from agentsearch.pipeline.agents.base import Document, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.profile_sets import claim_due, create_run
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.agentic import ProfileRunRow, ProfileSetRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID, UserRow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.worker.job_tasks import build_agentic_head, build_agentic_tail, build_loops
from tests.support.databases import migrated_sqlite

COLLECTION = str(uuid.uuid4())


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'agentic.db'}"
    migrated_sqlite(url)
    database = Database(url)
    with database.session() as s:
        s.add(CollectionRow(id=uuid.UUID(COLLECTION), user_id=DEFAULT_USER_ID, name="c", embedding_model="m",
                         index_epoch=4))
    yield database
    database.dispose()


def add_job(db) -> str:
    with db.session() as s:
        job = JobRow(user_id=DEFAULT_USER_ID, collection_id=uuid.UUID(COLLECTION), query="q")
        s.add(job)
        s.flush()
        return str(job.id)


# --- the spec -----------------------------------------------------------------------------------------------------

def test_seen_dedup_is_on_for_profiles_and_off_for_a_plain_iterative_search():
    plain = AgenticSpec.for_request({"target": 2}, None, None, test_mode=False)
    assert not plain.seen.enabled and plain.iterative.target == 2
    profiled = AgenticSpec.for_request(None, [{"name": "a"}], None, test_mode=False, window_days=3)
    assert profiled.seen.enabled and profiled.seen.window_days == 3 and profiled.seen.near_duplicate == 0.9
    assert not AgenticSpec.for_request(None, [{"name": "a"}], {"enabled": False}, test_mode=False).seen.enabled
    with pytest.raises(ValidationError):
        AgenticSpec.for_request({"target": 0}, None, None, test_mode=False)
    with pytest.raises(ValidationError, match="must not exceed 1"):  # each part valid, the combination not
        AgenticSpec.for_request({"search": {"recency_weight": 0.6}},
                                [{"name": "a", "search": {"authority_weight": 0.6}}], None, test_mode=False)


def test_plans_render_each_profile_and_test_mode_reduces_them_all():
    other = str(uuid.uuid4())
    spec = AgenticSpec.for_request({"target": 4}, [
        {"name": "research", "query_template": "{query} studies", "target": 3},
        {"name": "news", "collections": [other], "max_iterations": 3},
    ], None, test_mode=False)
    research, news = spec.plans("solar", {COLLECTION: 4, other: 7})
    assert (research.query, research.config.target) == ("solar studies", 3)
    assert [t.collection_id for t in research.targets] == [COLLECTION, other]  # the job's collections
    assert [(t.collection_id, t.epoch, t.name) for t in news.targets] == [(other, 7, f"c_{uuid.UUID(other).hex}")]
    assert news.config.target == 4 and news.config.max_iterations == 3
    reduced = spec.plans("solar", {COLLECTION: 4}, test_mode=True)
    assert {(p.config.max_iterations, p.config.target, p.config.per_iteration) for p in reduced} == {(1, 1, 2)}
    (single,) = AgenticSpec.for_request(None, None, None, test_mode=True).plans("solar", {COLLECTION: 4})
    assert single.profile == "" and single.config.target == 1


# --- loops between tasks --------------------------------------------------------------------------------------------

def judged(doc_id: str, overall: float) -> JudgedDocument:
    return JudgedDocument(document=Document(id=doc_id, text="t", metadata={"collection_id": COLLECTION}),
                          evaluation=Evaluation(document_id=doc_id, overall=overall, decision="keep"),
                          iteration=1, query="q")


def finished(query: str, kept: list[JudgedDocument], target: int = 2) -> LoopState:
    record = IterationRecord(iteration=1, queries=[query], threshold=4.0, base_threshold=4.0, method="offline",
                             evaluated=len(kept), skipped_memo=0, kept=len(kept), discarded=0, kept_total=len(kept))
    return LoopState(query=query, config=IterativeConfig(target=target), budget=1, iteration=1, queries=[query],
                     kept=kept, history=[record], stop_reason="budget_exhausted")


def test_only_the_loop_that_ends_last_is_told_to_merge(db):
    job_id = add_job(db)
    store = LoopStore(db)
    start = LoopState.start("q", IterativeConfig())
    assert store.start(job_id, "a", start) and store.start(job_id, "b", start)
    assert not store.start(job_id, "a", start)  # a redelivered begin does not fork the loop
    done_a = finished("q a", [judged("x", 4.5)])
    assert store.save(job_id, "a", done_a) and not store.save(job_id, "a", done_a)  # stale second save
    assert store.finish(job_id, "a", done_a) is False  # b still runs
    assert set(store.running(job_id)) == {"b"}  # where a retried job would pick up
    assert store.finish(job_id, "b", finished("q b", [])) is True
    assert store.finish(job_id, "b", finished("q b", [])) is False  # a redelivered last task merges nothing twice
    assert set(store.states(job_id)) == {"a", "b"} and store.states(job_id)["a"].kept[0].document.id == "x"


def test_job_documents_merge_profiles_by_category_and_keep_the_best_first():
    spec = AgenticSpec.for_request(None, [{"name": "research"}, {"name": "news"}], None, test_mode=False)
    states = {"research": finished("r", [judged("p1", 4.2), judged("shared", 4.0)]),
              "news": finished("n", [judged("n1", 4.9), judged("shared", 4.6)])}
    documents, summary = job_documents(spec, states, limit=10)
    assert summary["results"]["by_category_count"] == {"research": 1, "news": 2}
    assert summary["results"]["total"] == 3
    assert [(d.id, d.metadata["category"]) for d in documents] == [
        ("n1", "news"), ("shared", "news"), ("p1", "research")]
    assert set(summary["loops"]) == {"research", "news"} and summary["seen"]["enabled"]
    documents, summary = job_documents(AgenticSpec(), {"": finished("q", [judged("a", 4.1)])}, limit=10)
    assert [d.id for d in documents] == ["a"] and summary["loop"]["stop_reason"] == "budget_exhausted"


# --- profile sets -----------------------------------------------------------------------------------------------------

def add_set(db, schedule_s: float | None, due_in_s: float) -> uuid.UUID:
    with db.session() as s:
        row = ProfileSetRow(user_id=DEFAULT_USER_ID, name=f"set-{uuid.uuid4().hex[:6]}",
                            collection_id=uuid.UUID(COLLECTION), query="solar",
                            profiles=[{"name": "news", "query_template": "{query} news", "target": 2}],
                            options={"iterative": {"max_iterations": 2}}, schedule_s=schedule_s,
                            next_run_at=utcnow() + timedelta(seconds=due_in_s) if schedule_s else None)
        s.add(row)
        s.flush()
        return row.id


def test_a_due_set_is_claimed_once_and_its_next_run_moves_on(db):
    due, later, unscheduled = add_set(db, 3600, -5), add_set(db, 3600, 600), add_set(db, None, 0)
    assert claim_due(db) == [due]
    assert claim_due(db) == []
    with db.session() as s:
        next_run = s.get(ProfileSetRow, due).next_run_at
    assert next_run.replace(tzinfo=None) > (utcnow() + timedelta(seconds=3500)).replace(tzinfo=None)
    assert later and unscheduled


def test_a_run_is_a_queued_job_with_its_spec_and_a_link_to_the_set(tmp_path, db):
    set_id = add_set(db, None, 0)
    settings = Settings(data_dir=tmp_path)
    job_id, state, specs = create_run(db, settings, set_id, AgentRegistry.discover(), trigger="schedule")
    assert specs == []  # a set naming no agents: its runs end with their results alone
    assert state.query == "solar" and state.collections == {COLLECTION: 4}
    spec = AgenticSpec.model_validate(state.agentic)
    assert spec.seen.enabled and spec.source == f"profile_set:{set_id}" and spec.profiles[0].name == "news"
    with db.session() as s:
        job = s.get(JobRow, uuid.UUID(job_id))
        assert job.status == "queued" and JobState.load(job.initial_state) == state
        run = s.query(ProfileRunRow).one()
        assert (run.profile_set_id, run.trigger) == (set_id, "schedule")
    _, reduced, _ = create_run(db, Settings(data_dir=tmp_path, test_mode=True), set_id, AgentRegistry.discover())
    assert AgenticSpec.model_validate(reduced.agentic).iterative.max_iterations == 1
    other = uuid.uuid4()
    with db.session() as s:
        s.add(UserRow(id=other, name="someone-else"))
    assert create_run(db, settings, set_id, AgentRegistry.discover(), user_id=other) is None


# --- canvases ---------------------------------------------------------------------------------------------------------

SPECS = [
    AgentSpec(agent_id="language_detector", stage=Stage.PRE_SEARCH),
    AgentSpec(agent_id="deduplicator", stage=Stage.POST_SEARCH),
    AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE),
]


def test_the_head_ends_in_the_loop_start_and_the_tail_compresses_before_answering():
    head = build_agentic_head("job", SPECS)
    assert isinstance(head, _chain)
    assert [t.task for t in head.tasks] == ["agentsearch.pre_search_agent", "agentsearch.agentic_begin"]
    assert head.options["link_error"][0]["task"] == "agentsearch.job_failed"
    tail = build_agentic_tail("job", SPECS)
    assert [t.task for t in tail.tasks] == ["agentsearch.post_search_agent", "agentsearch.agentic_compress",
                                            "agentsearch.generate_answer", "celery.chord"]
    chord = tail.tasks[-1]
    assert isinstance(chord, _chord) and chord.body["task"] == "agentsearch.assemble"
    loops = build_loops("job", {"a": {"x": 1}, "b": {"x": 2}})
    assert [(t.task, t.args[1]) for t in loops.tasks] == [("agentsearch.agentic_iteration", "a"),
                                                          ("agentsearch.agentic_iteration", "b")]
    assert all(t.immutable for t in loops.tasks)
