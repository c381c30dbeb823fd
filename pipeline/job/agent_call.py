"""One agent called for a step of a job: the runner wrapped in the one order every agent step uses.

The wrapping, from the inside out:

1. the stage's budget (``pipeline.job.stage_budget``): each run, a fallback's included, is skipped when the stage's
   time is spent and gets at most what is left otherwise;
2. the fallback (``pipeline.agents.fallback``): a failed agent's fallback stands in with the same input;
3. the route (``pipeline.job.routing``): the ``next_agent_id`` the output names is followed, or is the last run's
   error when the stage may not follow it (pre- and post-search agents only; response agents run side by side).

A pre-search and a post-search agent's step are one implementation (``agent_stage_step``): the two differ only in
the input they build from the state and in what they take back from the output (``STAGE_IO``).

Usage::

    outcome = call_agent(state, Stage.RESPONSE, spec, services.runner, inp, default_timeout_s=30.0)
    state = agent_stage_step(state, Stage.PRE_SEARCH, spec, services.runner, peers=peers)
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from pipeline.agents.base import AgentContext, PostSearchInput, PreSearchInput, Stage
from pipeline.agents.fallback import FallbackOutcome, run_with_fallback
from pipeline.agents.runner import AgentRunner
from pipeline.job.routing import Peer, follow, passed_over
from pipeline.job.stage_budget import StageBudget
from pipeline.job.state import JobState

if TYPE_CHECKING:  # the agent's record types, for annotations only
    from pipeline.agents.records import AgentSpec


def agent_context(state: JobState, stage: Stage) -> AgentContext:
    return AgentContext(
        collection_id=state.collection_id,
        user_id=state.user_id,
        query=state.query,
        retrieved_documents=state.documents if stage != Stage.PRE_SEARCH else None,
        search_metadata=state.metadata,
        pipeline_stage=stage,
        previous_agent_results=state.runs_in(stage),
        collection_epoch=state.collections.get(state.collection_id, 0),
        search_filter=state.search.get("filter"),
        access_tokens=state.access_tokens,
        conversation_id=state.conversation_id,
        conversation_history=state.history,
    )


def call_agent(state: JobState, stage: Stage, spec: AgentSpec, runner: AgentRunner, inp: BaseModel,
               default_timeout_s: float, peers: Sequence[Peer] | None = None) -> FallbackOutcome:
    """The agent of ``spec`` run on ``inp`` in ``stage``: held to the stage's budget, its fallback standing in if it
    fails, and (given ``peers``, its stage's agents in order) its route followed, recorded in ``state``."""
    budget = StageBudget.of(state, stage)
    held = runner if budget is None else budget.runner(runner, default_timeout_s)
    outcome = run_with_fallback(held, spec, inp, agent_context(state, stage))
    return outcome if peers is None else _routed(state, spec, outcome, peers)


def _routed(state: JobState, spec: AgentSpec, outcome: FallbackOutcome, peers: Sequence[Peer]) -> FallbackOutcome:
    """The outcome after the ``next_agent_id`` its output named: recorded in the state's routes, or, when the stage
    may not follow it, the last run's error (its output then goes unused)."""
    name = getattr(outcome.output, "next_agent_id", None)
    if not name:
        return outcome
    run = outcome.last
    run.next_agent_id = name
    problem = follow(state, spec, peers, name)
    if problem is None:
        return outcome
    run.status, run.success, run.errors = "error", False, [*(run.errors or []), problem]
    return dataclasses.replace(outcome, output=None)


@dataclass(frozen=True)
class StageIO:
    """What a stage's agent is given from the state, and what the state takes back from its output (``data`` is
    the record's summary of it)."""

    given: Callable[[JobState], BaseModel]
    take: Callable[[JobState, Any], dict]
    copies_documents: bool = False  # the documents are the agent's input, which it may change in place


def _pre_search_input(state: JobState) -> BaseModel:
    return PreSearchInput(query=state.query, collection_id=state.collection_id, user_id=state.user_id,
                          metadata=state.metadata)


def _take_query(state: JobState, out) -> dict:
    state.query = out.query
    state.skip_search = state.skip_search or out.skip_search
    return {"query": out.query, "skip_search": out.skip_search}


def _post_search_input(state: JobState) -> BaseModel:
    return PostSearchInput(documents=state.documents, query=state.query, collection_id=state.collection_id,
                           user_id=state.user_id, metadata=state.metadata)


def _take_documents(state: JobState, out) -> dict:
    data = {"documents_in": len(state.documents), "documents_out": len(out.documents)}
    state.documents = out.documents
    return data


STAGE_IO: dict[Stage, StageIO] = {
    Stage.PRE_SEARCH: StageIO(_pre_search_input, _take_query),
    Stage.POST_SEARCH: StageIO(_post_search_input, _take_documents, copies_documents=True),
}


def agent_stage_step(state: JobState, stage: Stage, spec: AgentSpec, runner: AgentRunner,
                     peers: Sequence[Peer] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One pre- or post-search agent (``stage``) on a new state; the state it was handed stays as it was.
    ``peers`` are the stage's agents in order ((agent_id, config_id)), for its routing. A critical failure raises,
    failing the job."""
    io = STAGE_IO[stage]
    # A new state whose own containers are the ones this step changes (metadata, records, routes, clocks): a deep
    # copy of all of it took longer than the rest of a no-op agent's step.
    update = {"metadata": copy.deepcopy(state.metadata), "agent_runs": list(state.agent_runs),
              "routes": dict(state.routes), "stage_clock": dict(state.stage_clock)}
    if io.copies_documents:
        update["documents"] = copy.deepcopy(state.documents)
    state = state.model_copy(update=update)
    if (skip := passed_over(state, spec)) is not None:
        state.agent_runs.append(skip)  # an earlier agent of the stage routed past it: a no-op hop
        return state
    outcome = call_agent(state, stage, spec, runner, io.given(state), default_timeout_s, peers or [])
    outcome.raise_if_critical()
    run = outcome.last
    out: Any = outcome.output  # the stage's output model: PreSearchOutput or PostSearchOutput
    if out is not None:
        run.data = io.take(state, out)
        run.metadata = out.metadata
        state.metadata.update(out.metadata)
    state.agent_runs.extend(outcome.runs)
    return state
