"""A job's graph, read top to bottom: its steps in the order a job runs them, each a named function of the state.

    pre_search_agent*  ->  core_search (or per collection, side by side, then merge_search)  ->  post_search_agent*
      ->  generate_answer  ->  response_agent* (side by side: a chord)  ->  assemble (the chord's callback: the end)

The iterative mode runs the same steps with its loops in place of the search (``ITERATIVE_*`` below)::

    pre_search_agent*  ->  agentic_begin  ->  agentic_iteration* per loop (each enqueues the next)  ->  agentic_finish
      ->  post_search_agent*  ->  agentic_compress  ->  generate_answer  ->  response_agent*  ->  assemble

Each step is a ``Step`` (``agentsearch.pipeline.job.step_protocol``): its stage, its ledger key and its work, a plain
function ``(StepCall, input) -> output`` defined here, each calling the one module of its concern: an agent through
``agentsearch.pipeline.job.agent_call``, the search ``agentsearch.pipeline.job.search``, the answer
``agentsearch.pipeline.job.answer_step``; the end's work is ``agentsearch.pipeline.job.assembly``'s and the loops'
``agentsearch.pipeline.job.iterative``'s. ``run_step`` runs every one in the same frame (the job's check, the step
ledger, the time). Each graph is a tuple of ``Node``: the Celery task that runs a step, and how many (one; one per agent
of a stage, in order or side by side; one per collection). ``agentsearch.worker.job_tasks`` makes each node's task and
``agentsearch.worker.canvas`` its canvas from these tuples, mechanically: a new step is a function and a node here, then
its task there.

Usage::

    for node in JOB:                     # the job's graph, in order
        node.task, node.step.stage       # "agentsearch.pre_search_agent", "pre_search"
    run_step(ANSWER.step, StepCall(services, ledger), state.dump())
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

from agentsearch.pipeline.agents.base import AgentArtifact, Stage
from agentsearch.pipeline.agents.runner import worker_name
from agentsearch.pipeline.job import assembly, iterative
from agentsearch.pipeline.job.agent_call import SavesArtifacts, post_search_step, pre_search_step, response_step
from agentsearch.pipeline.job.answer_step import answer_with_settings
from agentsearch.pipeline.job.artifacts import ArtifactStore
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.search import found_in_some, merged_searches, search_or_retry
from agentsearch.pipeline.job.step_protocol import (
    DATABASE_AWAY,
    DATABASE_RETRIES,
    LONGEST_RETRY_DELAY_S,
    Cancelled,
    Retry,
    Step,
    StepCall,
    status_check,
)
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec, ArtifactRef

log = logging.getLogger("agentsearch.worker")

# How long a finished response agent's artifact waits for the database to come back before it is given up.
ARTIFACT_SAVE_WAIT_S = 30.0


# The pre-search chain: one step per agent, in order.


def pre_search_agent(call: StepCall, state: JobState) -> JobState:
    """One pre-search agent on the query; ``call.peers`` are its stage's agents, which its route may name."""
    return pre_search_step(state, call.agent, call.services.runner, stage_agents=list(call.peers),
                           default_timeout_s=call.services.settings.default_agent_timeout_s)


# The search: the job's collection, or each of several side by side and then merged.


def core_search(call: StepCall, state: JobState) -> JobState | Retry:
    """One collection searched; a search that failed outright asks to run again (``search.search_or_retry``)."""
    return search_or_retry(state, call.services, call.collection_id, call.retries)


def merged_search(call: StepCall, handed: list[dict[str, Any]]) -> JobState:
    """The merge step's input: the collections' searches its chord gathered, merged."""
    return merged_searches(handed)


def merge_search(call: StepCall, state: JobState) -> JobState:
    """The merged searches, unless every collection failed: then the job fails with why."""
    return found_in_some(state)


# The post-search chain: one step per agent, in order.


def post_search_agent(call: StepCall, state: JobState) -> JobState:
    """One post-search agent on the documents; ``call.peers`` are its stage's agents, which its route may name."""
    return post_search_step(state, call.agent, call.services.runner, stage_agents=list(call.peers),
                            default_timeout_s=call.services.settings.default_agent_timeout_s)


# The answer.


def answer(call: StepCall, state: JobState) -> JobState:
    """The answer with citations, streamed to the job's events as it is written (``answer_step``)."""
    return answer_with_settings(call.services, state)


def keep_for_assembly(call: StepCall, done: dict[str, Any]) -> None:
    """The answered state saved for the chord's callback, which receives only the response agents' records."""
    JobStore(call.services.db).progress(done["job_id"], "response", JobState.load(done), keep_state=True)


# The response chord: one step per response agent, side by side; each never raises, so the chord always ends.


def response_agent(call: StepCall, state: JobState) -> AgentRun:
    """One response agent: its artifact stored (named by ``call.name_rank``), its record handed to the chord."""
    artifacts = RetryingArtifacts(ArtifactStore.of(call.services), ARTIFACT_SAVE_WAIT_S)
    return response_step(state, call.agent, call.services.runner, artifacts, name_rank=call.name_rank,
                         default_timeout_s=call.services.settings.default_agent_timeout_s)


def response_error(call: StepCall, exc: BaseException) -> AgentRun | Retry:
    """A response agent's error outside its runner is its record, never the chord's: only a database outage asks
    for the task again first (a retry is not a failure: the chord counts this header task when the retry returns)."""
    if isinstance(exc, DATABASE_AWAY):
        if call.retries < DATABASE_RETRIES:
            return Retry(min(2 ** call.retries, LONGEST_RETRY_DELAY_S), cause=exc)
        return failed_run(call.agent, "error", exc)
    log.exception("response agent %s failed outside the runner", call.agent.agent_id)
    # Celery's soft time limit, told by name: the worker's exception, which this layer does not import.
    return failed_run(call.agent, "timeout" if type(exc).__name__ == "SoftTimeLimitExceeded" else "error", exc)


def announce(call: StepCall, record: dict[str, Any]) -> None:
    """The agent's record (and its stand-in's) added to the job's records now, so the job's events carry it as
    this agent ends rather than when the last one does. Best effort: assembly records it in any case."""
    job_id = call.job_id or ""
    try:
        JobStore(call.services.db).record_runs(job_id, AgentRun.model_validate(record).flat())
    except Exception:  # the chord must get the record whatever the database does
        log.warning("job %s: the record of %s did not reach the job's events early", job_id,
                    record.get("agent_id"), exc_info=True)


def response_skipped(call: StepCall, outcome: Cancelled) -> AgentRun:
    """A response agent's record of a job that did not wait for it."""
    why = "job cancelled" if outcome.status == "cancelled" else f"job already {outcome.status}"
    return AgentRun(agent_id=call.agent.agent_id, config_id=call.agent.config_id, stage=Stage.RESPONSE,
                    success=False, status="skipped", errors=[why])


def failed_run(spec: AgentSpec, status: str, exc: BaseException) -> AgentRun:
    return AgentRun(agent_id=spec.agent_id, config_id=spec.config_id, stage=Stage.RESPONSE, success=False,
                    status=status, errors=[f"{type(exc).__name__}: {exc}"], worker=worker_name())


class RetryingArtifacts:
    """Artifact storage whose ``save`` waits out a short database outage instead of losing a finished agent's
    artifact.

    Measured in the PostgreSQL drill (docs/reliability.md): 1 of 12 jobs in flight lost its artifact, recorded as
    the agent's error, because the database went away while the agent was rendering. Retrying the whole task would
    call the agent again; waiting here keeps its work. The task's soft time limit still bounds the wait.
    """

    def __init__(self, store: SavesArtifacts, wait_s: float) -> None:
        self.store, self.wait_s = store, wait_s

    def save(self, job_id: str, artifact: AgentArtifact) -> ArtifactRef:
        deadline, delay = time.monotonic() + self.wait_s, 0.5
        while True:
            try:
                return self.store.save(job_id, artifact)
            except DATABASE_AWAY:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def __getattr__(self, name: str):
        return getattr(self.store, name)


# The graph, as data: the steps above in order, each with the task that runs it.

Each = Literal["one", "agent", "collection"]


@dataclass(frozen=True)
class Node:
    """One place in a job's graph: the Celery task ``task`` running ``step``, once (``each="one"``), once per agent
    of ``step.agent_stage`` (one after another, or ``side_by_side``), or once per collection searched (side by
    side). ``joined_by`` is the node a side-by-side group's outputs go to (its chord's callback). ``limit`` is the
    time limit the task gets: an agent's (its timeout), a step's, the answer's (its LLM's budgets) or a loop's."""

    task: str
    step: Step
    each: Each = "one"
    side_by_side: bool = False
    joined_by: Node | None = None
    limit: Literal["agent", "step", "answer", "loop"] = "step"


PRE_SEARCH_AGENT = Node("agentsearch.pre_search_agent", Step(
    "pre_search", "", pre_search_agent, agent_stage=Stage.PRE_SEARCH), each="agent", limit="agent")
MERGE_SEARCH = Node("agentsearch.merge_search", Step(
    "core_search", "merge_search", merge_search, load=merged_search, timed_as="", hands_over=Stage.POST_SEARCH))
CORE_SEARCH = Node("agentsearch.core_search", Step(
    "core_search", "core_search", core_search, per_collection=True, hands_over=Stage.POST_SEARCH),
    each="collection", joined_by=MERGE_SEARCH)
POST_SEARCH_AGENT = Node("agentsearch.post_search_agent", Step(
    "post_search", "", post_search_agent, agent_stage=Stage.POST_SEARCH), each="agent", limit="agent")
ANSWER = Node("agentsearch.generate_answer", Step(
    "answer", "answer", answer, keep_state=True, hands_over=Stage.RESPONSE, then=keep_for_assembly), limit="answer")
ASSEMBLE = Node("agentsearch.assemble", Step(
    "assemble", "", assembly.assemble, load=assembly.for_assembly, check=assembly.assembly_check,
    cancelled=assembly.assembly_ended))
RESPONSE_AGENT = Node("agentsearch.response_agent", Step(
    "response", "", response_agent, agent_stage=Stage.RESPONSE, check=status_check, on_error=response_error,
    then=announce, cancelled=response_skipped), each="agent", side_by_side=True, joined_by=ASSEMBLE, limit="agent")

# A job, top to bottom.
JOB = (PRE_SEARCH_AGENT, CORE_SEARCH, POST_SEARCH_AGENT, ANSWER, RESPONSE_AGENT)

# The iterative mode: the head applied at submission, its loops (each iteration enqueues the next, the last loop to
# end the finish), and the tail the finish applies.
AGENTIC_BEGIN = Node("agentsearch.agentic_begin", Step(
    "agentic", "agentic_begin", iterative.begin, timed_as="", keep_state=True), limit="loop")
AGENTIC_ITERATION = "agentsearch.agentic_iteration"  # iterative.iterate, one iteration of one loop per task
AGENTIC_FINISH = "agentsearch.agentic_finish"  # iterative.merge_loops, then the tail
AGENTIC_COMPRESS = Node("agentsearch.agentic_compress", Step(
    "compress", "compress", iterative.compress, timed_as=iterative.compress_timed_as))
ITERATIVE_HEAD = (PRE_SEARCH_AGENT, AGENTIC_BEGIN)
ITERATIVE_TAIL = (POST_SEARCH_AGENT, AGENTIC_COMPRESS, ANSWER, RESPONSE_AGENT)
