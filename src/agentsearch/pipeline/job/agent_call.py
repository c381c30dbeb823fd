"""One agent called for a job's step: the one wrapper every agent step goes through, in one order, and the three
shapes of an agent step.

``call_agent`` wraps the agent, from the outside in:

1. the stage's budget (``agentsearch.pipeline.job.stage_budget``): each run, a fallback's included, is skipped when the
   stage's time is spent and gets at most what is left otherwise;
2. the fallback (``agentsearch.pipeline.agents.fallback``): a failed agent's fallback stands in with the same input;
3. the route (``agentsearch.pipeline.job.routing``): the ``next_agent_id`` the output names is followed, or is the last
   run's error when the stage may not follow it (pre- and post-search agents only; response agents run side by side);
4. the runner (``agentsearch.pipeline.agents.runner.AgentRunner.run``): the agent's deadline, its shared circuit breaker
   and the result cache, into the agent's own module.

The first three need the job (its state, its stage clocks, its stage's agents), so they stand here; the runner
stands below the job, with the agents, and knows none of it.

The steps, each a plain function of the state that returns a new one (or a record), so a step that runs twice with
the same input gives the same output, each in a span of the job's trace (``traced_stage``): a pre-search and a
post-search agent's step are one implementation (``agent_stage_step``), differing only in the input they build from
the state and in what they take back from the output (``STAGE_IO``); a response agent's step stores its artifact
and returns its record, never raising (the chord's callback must always run).

Usage::

    state = pre_search_step(state, spec, services.runner, stage_agents=[("intent_classifier", "c1"), ...])
    state = post_search_step(state, spec, services.runner)
    run = response_step(state, spec, services.runner, ArtifactStore.of(services))
    outcome = call_agent(state, Stage.RESPONSE, spec, services.runner, inp, default_timeout_s=30.0)
    outcome.runs, outcome.last, outcome.output
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from pydantic import BaseModel

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentContext,
    PostSearchInput,
    PreSearchInput,
    ResponseAgentInput,
    Stage,
)
from agentsearch.pipeline.agents.fallback import FallbackOutcome, run_with_fallback
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.job.artifact_names import numbered
from agentsearch.pipeline.job.artifacts import JobEnded
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.routing import StageAgent, follow, passed_over
from agentsearch.pipeline.job.stage_budget import StageBudget
from agentsearch.pipeline.observability.tracing import traced_stage
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec, ArtifactRef


def agent_context(state: JobState, stage: Stage) -> AgentContext:
    """What an agent of ``stage`` is told about the job beside its input."""
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
               default_timeout_s: float, stage_agents: Sequence[StageAgent] | None = None) -> FallbackOutcome:
    """The agent of ``spec`` run on ``inp`` in ``stage``: held to the stage's budget, its fallback standing in if it
    fails, and (given ``stage_agents``, its stage's agents in order) its route followed, recorded in ``state``."""
    budget = StageBudget.of(state, stage)
    held = runner if budget is None else budget.runner(runner, default_timeout_s)
    outcome = run_with_fallback(held, spec, inp, agent_context(state, stage))
    return outcome if stage_agents is None else _routed(state, spec, outcome, stage_agents)


def _routed(state: JobState, spec: AgentSpec, outcome: FallbackOutcome,
            stage_agents: Sequence[StageAgent]) -> FallbackOutcome:
    """The outcome after the ``next_agent_id`` its output named: recorded in the state's routes, or, when the stage
    may not follow it, the last run's error (its output then goes unused)."""
    name = getattr(outcome.output, "next_agent_id", None)
    if not name:
        return outcome
    run = outcome.last
    run.next_agent_id = name
    problem = follow(state, spec, stage_agents, name)
    if problem is None:
        return outcome
    run.status, run.success, run.errors = "error", False, [*(run.errors or []), problem]
    return dataclasses.replace(outcome, output=None)


# The three shapes of an agent step: a pre- and a post-search agent hand the state on, a response agent a record.


@traced_stage("pre_search")
def pre_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner,
                    stage_agents: Sequence[StageAgent] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One pre-search agent (``agent_stage_step``). ``stage_agents`` are the stage's agents in order
    ((agent_id, config_id)), for its routing."""
    return agent_stage_step(state, Stage.PRE_SEARCH, spec, runner, stage_agents, default_timeout_s)


@traced_stage("post_search")
def post_search_step(state: JobState, spec: AgentSpec, runner: AgentRunner,
                     stage_agents: Sequence[StageAgent] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One post-search agent (``agent_stage_step``), the pre-search agents' step on the documents."""
    return agent_stage_step(state, Stage.POST_SEARCH, spec, runner, stage_agents, default_timeout_s)


class SavesArtifacts(Protocol):
    """Where a response agent's artifact is stored (``ArtifactStore``, or a wrapper that waits out an outage)."""

    def save(self, job_id: str, artifact: AgentArtifact) -> ArtifactRef: ...


@traced_stage("response")
def response_step(state: JobState, spec: AgentSpec, runner: AgentRunner, artifacts: SavesArtifacts,
                  name_rank: int = 1, default_timeout_s: float = 30.0) -> AgentRun:
    """Run one response agent and store its artifact. Never raises: the chord's callback must always run.

    ``name_rank`` is the step's rank among the job's steps of the same agent
    (``agentsearch.pipeline.job.artifact_names``): the artifact of a second config of one agent is stored as
    ``summary-2.txt`` beside the first one's ``summary.txt``.
    """
    inp = ResponseAgentInput(
        answer=state.answer or "",
        sources=state.sources,
        query=state.original_query or state.query,
        documents=state.documents,
        collection_id=state.collection_id,
        user_id=state.user_id,
        cot_steps=state.cot_steps or None,
        metadata=state.metadata,
        citations=state.citations,
    )
    # A critical failure is not raised here (the chord must complete): assembly decides it from the records.
    # Held to the stage's budget: the chord then assembles what finished inside it, and records the rest.
    outcome = call_agent(state, Stage.RESPONSE, spec, runner, inp, default_timeout_s)
    first, run = outcome.runs[0], outcome.last
    artifact = cast("AgentArtifact | None", outcome.output)  # a response agent's output model
    if run is not first:
        first.stand_in = run  # the step's record is the agent's own run, carrying its stand-in's
    if artifact is None:
        return first
    if name_rank > 1:
        artifact = artifact.model_copy(update={"filename": numbered(artifact.filename, name_rank)})
    try:
        run.artifact = artifacts.save(state.job_id, artifact)
        run.data = {"filename": artifact.filename, "type": artifact.type, "size": len(artifact.data)}
        run.metadata = artifact.metadata
    except JobEnded as exc:
        # Cancelled while the agent rendered: the store refused the artifact, and nobody waits for it any more.
        run.status, run.success = "skipped", False
        run.errors = [str(exc)]
    except Exception as exc:  # noqa: BLE001 - a storage failure is this agent's failure, not the job's
        run.status, run.success = "error", False
        run.errors = [f"{type(exc).__name__}: {exc}"]
    return first


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
                     stage_agents: Sequence[StageAgent] | None = None, default_timeout_s: float = 30.0) -> JobState:
    """One pre- or post-search agent (``stage``) on a new state; the state it was handed stays as it was.
    ``stage_agents`` are the stage's agents in order ((agent_id, config_id)), for its routing. A critical failure
    raises, failing the job."""
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
    outcome = call_agent(state, stage, spec, runner, io.given(state), default_timeout_s, stage_agents or [])
    outcome.raise_if_critical()
    run = outcome.last
    out: Any = outcome.output  # the stage's output model: PreSearchOutput or PostSearchOutput
    if out is not None:
        run.data = io.take(state, out)
        run.metadata = out.metadata
        state.metadata.update(out.metadata)
    state.agent_runs.extend(outcome.runs)
    return state
