"""Conversations without HTTP (``agentsearch.pipeline.job.submit`` with ``agentsearch.pipeline.job.conversation``): the
history a job is given, the contextualizer added for it, the whole-job and agent cache keys covering the history, the
turn a success leaves,
and the refusals that write nothing (SQLite in a temporary directory, fake Redis)."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select

from agentsearch.pipeline.agents.base import AgentContext, PreSearchAgent, PreSearchInput, PreSearchOutput, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.job.conversation import HISTORY_TURNS, conversation_history
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.request import SearchRequest
from agentsearch.pipeline.job.submit import submit_job
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.conversations import ConversationRow, ConversationTurnRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID, UserRow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.refusal import Refusal
from tests.support import submission

FIRST = "What was Northwind's Q4 2025 revenue?"


services, collection_id = submission.services, submission.collection_id


def conversation(services, user_id=DEFAULT_USER_ID) -> uuid.UUID:
    with services.db.session() as s:
        row = ConversationRow(user_id=user_id, title="results")
        s.add(row)
        s.flush()
        return row.id


def submit(services, user_id=DEFAULT_USER_ID, **body):
    return submit_job(services, user_id, SearchRequest(**body))


def answer(services, submitted, text: str, standalone: str | None = None) -> None:
    metadata = {"standalone_query": standalone} if standalone else {}
    assert JobStore(services.db).succeed(str(submitted.job_id), {"answer": text, "complete": True,
                                                                 "metadata": metadata}, [], {})


def count(services, row) -> int:
    with services.db.session() as s:
        return s.scalar(select(func.count()).select_from(row))


def test_a_success_records_the_turn_and_the_next_job_gets_it_as_history(services, collection_id):
    cid = conversation(services)
    first = submit(services, collection_id=collection_id, query=FIRST, conversation_id=cid)
    assert first.state.history is None and [s.agent_id for s in first.specs] == []  # nothing to follow yet
    answer(services, first, "Q4 2025 revenue reached $412 million [1].")
    follow = submit(services, collection_id=collection_id, query="and in 2024?", conversation_id=cid)
    assert follow.state.conversation_id == str(cid)
    assert follow.state.history == [{"role": "user", "content": FIRST},
                                    {"role": "assistant", "content": "Q4 2025 revenue reached $412 million [1]."}]
    # Added first among the pre-search agents, since the collection's agents do not list it.
    assert [(s.agent_id, s.priority) for s in follow.specs] == [("query_contextualizer", -1)]
    answer(services, follow, "$349 million [1].", standalone="Northwind Q4 2024 revenue")
    with services.db.session() as s:
        turns = s.scalars(select(ConversationTurnRow).order_by(ConversationTurnRow.created_at)).all()
        assert [(t.job_id, t.question, t.standalone_query, t.status) for t in turns] == [
            (first.job_id, FIRST, FIRST, "succeeded"),
            (follow.job_id, "and in 2024?", "Northwind Q4 2024 revenue", "succeeded")]
        # The history carries each turn's standalone query: the next follow-up builds on a complete question.
        assert conversation_history(s, DEFAULT_USER_ID, cid)[2] == {"role": "user",
                                                                    "content": "Northwind Q4 2024 revenue"}


def test_failed_and_cancelled_jobs_leave_no_turn(services, collection_id):
    cid = conversation(services)
    jobs = JobStore(services.db)
    jobs.fail(str(submit(services, collection_id=collection_id, query=FIRST, conversation_id=cid).job_id), "boom")
    jobs.cancel(str(submit(services, collection_id=collection_id, query="Q3?", conversation_id=cid).job_id))
    assert count(services, ConversationTurnRow) == 0


def test_the_history_is_bounded_to_the_newest_turns(services, collection_id):
    cid = conversation(services)
    for i in range(HISTORY_TURNS + 2):
        answer(services, submit(services, collection_id=collection_id, query=f"Northwind revenue {2010 + i}",
                                conversation_id=cid, use_cache=False), f"answer {i}")
    with services.db.session() as s:
        history = conversation_history(s, DEFAULT_USER_ID, cid)
    assert len(history) == 2 * HISTORY_TURNS
    assert history[-2]["content"] == f"Northwind revenue {2010 + HISTORY_TURNS + 1}"


def test_the_same_follow_up_in_two_conversations_never_shares_a_cached_answer(services, collection_id):
    a, b = conversation(services), conversation(services)
    answer(services, submit(services, collection_id=collection_id, query=FIRST, conversation_id=a), "412 [1]")
    answer(services, submit(services, collection_id=collection_id, query="What did Contoso earn in Q4 2025?",
                            conversation_id=b), "99 [1]")
    in_a = submit(services, collection_id=collection_id, query="and in 2024?", conversation_id=a)
    answer(services, in_a, "349 [1]", standalone="Northwind Q4 2024 revenue")
    in_b = submit(services, collection_id=collection_id, query="and in 2024?", conversation_id=b)
    assert not in_b.cache_hit and in_b.state is not None
    # The same history given explicitly is the same question: that one may be answered from the cache.
    with services.db.session() as s:
        job_a = s.get(JobRow, in_a.job_id)
        explicit = submit(services, collection_id=collection_id, query="and in 2024?",
                          history=job_a.initial_state["history"])
        without = submit(services, collection_id=collection_id, query="and in 2024?").job_id
        key_without = s.get(JobRow, without).cache_key
    assert explicit.cache_hit and key_without != job_a.cache_key


def test_an_explicit_history_is_checked_and_bounded():
    with pytest.raises(ValidationError) as bad:
        SearchRequest(collection_id=uuid.uuid4(), query="q", history=[{"role": "system", "content": "x"}])
    assert bad.value.errors()[0]["loc"] == ("history", 0, "role")
    with pytest.raises(ValidationError) as bad:
        SearchRequest(collection_id=uuid.uuid4(), query="q", history=[{"role": "user", "content": ""}])
    assert bad.value.errors()[0]["loc"] == ("history", 0, "content")
    with pytest.raises(ValidationError) as bad:
        SearchRequest(collection_id=uuid.uuid4(), query="q", history=[{"role": "user", "content": "x"}] * 21)
    assert bad.value.errors()[0]["loc"] == ("history",)


def test_a_missing_or_foreign_conversation_is_a_404_and_both_forms_a_422_with_nothing_written(services,
                                                                                                  collection_id):
    other = uuid.uuid4()
    with services.db.session() as s:
        s.add(UserRow(id=other, name="mallory"))
    theirs, missing = conversation(services, other), uuid.uuid4()
    for cid in (theirs, missing):
        with pytest.raises(Refusal) as refused:
            submit(services, collection_id=collection_id, query="and in 2024?", conversation_id=cid)
        assert (refused.value.status, refused.value.detail) == (404, f"conversation {cid} not found")
    mine = conversation(services)
    with pytest.raises(Refusal) as refused:
        submit(services, collection_id=collection_id, query="q", conversation_id=mine,
               history=[{"role": "user", "content": FIRST}])
    assert refused.value.status == 422 and refused.value.errors[0]["loc"] == ("body", "history")
    assert count(services, JobRow) == 0


class Echo(PreSearchAgent):
    agent_id = "echo_history"

    def run(self, inp, ctx):
        return PreSearchOutput(query=f"{inp.query} {len(ctx.conversation_history or [])}")


def test_the_agent_result_cache_covers_the_history(tmp_path, redis_client):
    runner = AgentRunner(AgentRegistry([Echo]), redis_client, Settings(data_dir=tmp_path))
    spec = AgentSpec(agent_id="echo_history", stage=Stage.PRE_SEARCH)
    inp = PreSearchInput(query="and in 2024?")

    def ctx(history):
        return AgentContext(pipeline_stage=Stage.PRE_SEARCH, conversation_history=history)

    one = [{"role": "user", "content": FIRST}]
    two = [{"role": "user", "content": "What did Contoso earn?"}, {"role": "assistant", "content": "99"}]
    first, _ = runner.run(spec, inp, ctx(one))
    again, _ = runner.run(spec, inp, ctx(one))
    other, out = runner.run(spec, inp, ctx(two))
    assert (first.cache_hit, again.cache_hit, other.cache_hit) == (False, True, False) and out.query.endswith(" 2")
