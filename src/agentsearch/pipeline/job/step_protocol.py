"""The one protocol of a job's steps: what a step is, what it is handed, and the run every step gets.

A ``Step`` is a declaration (``agentsearch.pipeline.job.workflow`` declares the job's, in order): the stage the job
shows while it runs, its key in the step ledger and its work, one named function from what its task was handed
(``StepCall``: the agent, the collection, the retries, this process's services) and the job's state to the next state
(or to a record: a response agent's ``AgentRun``). ``run_step`` gives every step the same frame, in this order:

1. the check of the job before the work (``check``): the progress write (the stage it begins, the records of the
   steps before it, and whether the job goes on, in one round trip), or for a step that runs beside others of its
   stage a read of the job's status, or for the job's end the status its assembly read; the ledger's read is
   waited for beside it;
2. the step ledger: a step whose output is stored already hands that on and does not work again;
3. the work, timed into ``timings_ms``; the clock of the stage it hands over to starts as it ends;
4. the ledger's write (the first output stored wins), then what the step does with its output (``then``).

What comes back is the output to hand on, as JSON, or a typed outcome: ``Cancelled`` (the job was cancelled or has
ended: the rest of the chain passes through without work) or ``Retry`` (the work asks to run again later, before
anything was stored). Nothing here knows Celery: ``agentsearch.worker.job_tasks.step_task`` is the one wrapper that
turns these into a task's return value or its retry. Nor does it open the step's span of the job's trace: each stage
function opens its own (``agentsearch.pipeline.observability.tracing.traced_stage``), so a stage called alone, as the
answer's benchmarks and the tracing tests call it, is traced the same as in a task.

Usage::

    ANSWER = Step("answer", "answer", answer, keep_state=True, hands_over=Stage.RESPONSE)   # answer(call, state)
    out = run_step(ANSWER, StepCall(services, ledger), state)   # a dict to hand on, Cancelled or Retry
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import exc as sql_errors

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import TERMINAL, JobStore
from agentsearch.pipeline.job.ledger import StepLedger, step_key
from agentsearch.pipeline.job.routing import StageAgent
from agentsearch.pipeline.job.stage_budget import start_clock
from agentsearch.pipeline.platform import redis_pipelining
from agentsearch.pipeline.records.agent_runs import AgentSpec

if TYPE_CHECKING:  # types only: a step gets this process's services handed in, and the tests hand in fakes
    from agentsearch.pipeline.services import Services


@dataclass(frozen=True)
class Cancelled:
    """The job was cancelled or has ended before the step's work: nothing was done. ``status`` is the job's when
    the check read it (a step that writes its progress learns only that the job does not go on)."""

    status: str | None = None


@dataclass(frozen=True)
class Retry:
    """The work asks to run again in ``countdown`` seconds; nothing was stored, so a copy of the step works again.
    ``max_retries`` overrides the task's own limit; ``cause`` is the error that asked for it, if any."""

    countdown: float
    max_retries: int | None = None
    cause: BaseException | None = None


Outcome = dict[str, Any] | Cancelled | Retry

# The database going away (a restart, a failover) is waited out by retrying the step with backoff (1, 2, 4 ... 30 s,
# about four minutes in all), not turned into a failed job (agentsearch.worker.app.DB_RETRY). A step's output is in the
# ledger before its last write, so a retry after the work is done does not do the work again.
DATABASE_AWAY = (sql_errors.OperationalError, sql_errors.InterfaceError, sql_errors.TimeoutError)
DATABASE_RETRIES = 12
LONGEST_RETRY_DELAY_S = 30


@dataclass(frozen=True)
class StepCall:
    """What one run of a step is handed beside the state: this process's services and step ledger, the message's
    arguments (``spec``: an agent step's agent; ``peers``: its stage's agents in order, for its routing;
    ``collection_id``: one collection's search; ``name_rank``: a response agent's rank among the job's configs of
    it; ``job_id``: the job, which the end is told beside its response agents' records), how often its
    task ran before (``retries``) and when the task began (``started``, ``time.perf_counter``: the state's reading
    counts in the step's time)."""

    services: Services
    ledger: StepLedger
    spec: AgentSpec | None = None
    peers: tuple[StageAgent, ...] = ()
    collection_id: str | None = None
    name_rank: int = 1
    job_id: str | None = None
    retries: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def agent(self) -> AgentSpec:
        """The agent of an agent step (its message's ``spec``)."""
        if self.spec is None:
            raise ValueError("an agent step's call names its agent (spec)")
        return self.spec


def load_state(call: StepCall, handed: Any) -> JobState:
    """What most steps work on: the state their task was handed."""
    return JobState.load(handed)


@dataclass(frozen=True)
class Step:
    """One step of a job, run at most once per job however often its message arrives (``run_step``).

    ``stage`` is what the job shows while the step runs and ``key`` its name in the step ledger (``""``: not kept
    there, for the job's end, whose second run finds the job ended). An agent's step (``agent_stage``) shows
    ``<stage>:<agent_id>`` and is kept under its agent (``agentsearch.pipeline.job.ledger.step_key``); a step
    ``per_collection`` is kept under ``<key>:<collection_id>``. ``load`` turns what the task was handed into the work's
    input (the state, by default). ``work`` takes the call and that input and returns the next state, a record (a
    pydantic model) or a ``Retry``. ``timed_as`` is the entry of ``timings_ms`` the step's time is added to (its
    ``stage`` if not given; ``""``: not timed; a function of the input: the entry it names); ``keep_state`` keeps the
    state the step begins with in the job's row; ``hands_over`` is the stage whose clock starts when the work ends.
    ``check`` is the check before the work: ``progress_check`` by default, ``status_check`` for a step that runs side by
    side with others of its stage (the response agents). ``on_error`` turns an error of the step into its output
    (a step that must never raise), or into a ``Retry``; ``then`` receives the output handed on, stored now or
    before. ``cancelled`` is the step's record of a job that did not go on (None: the state passes through as it
    was handed).
    """

    stage: str
    key: str
    work: Callable[[StepCall, Any], JobState | BaseModel | Retry]
    agent_stage: Stage | None = None
    per_collection: bool = False
    load: Callable[[StepCall, Any], Any] = load_state
    timed_as: str | Callable[[Any], str] | None = None
    keep_state: bool = False
    hands_over: Stage | None = None
    check: Check | None = None
    on_error: Callable[[StepCall, BaseException], BaseModel | Retry] | None = None
    then: Callable[[StepCall, dict[str, Any]], None] | None = None
    cancelled: Callable[[StepCall, Cancelled], BaseModel] | None = None

    def stage_of(self, call: StepCall) -> str:
        return f"{self.stage}:{call.agent.agent_id}" if self.agent_stage is not None else self.stage

    def key_of(self, call: StepCall) -> str:
        if self.agent_stage is not None:
            return step_key(self.agent_stage, call.agent)
        return f"{self.key}:{call.collection_id or ''}" if self.per_collection else self.key


# The check before the work: the output a run before stored, Cancelled, or None (the step works).
Check = Callable[[Step, StepCall, Any, JobStore], "dict[str, Any] | Cancelled | None"]


def progress_check(step: Step, call: StepCall, state: JobState, jobs: JobStore) -> dict[str, Any] | Cancelled | None:
    """The progress write, which is also the cancellation check, with the ledger's read beside it."""
    # Asked before the progress write and read after it: the two round trips are waited for together.
    answer = call.ledger.ask(state.job_id, step.key_of(call))
    try:
        # One write per step: the stage it begins, the records of the steps before it (the state it was handed)
        # and the cancellation check. Its own record is written by the next step, which receives it: a second
        # write at the end made every agent step wait for the database twice.
        going_on = jobs.progress(state.job_id, step.stage_of(call), state, keep_state=step.keep_state)
    finally:
        done = answer()
    return done if going_on else Cancelled()


def status_check(step: Step, call: StepCall, state: JobState, jobs: JobStore) -> dict[str, Any] | Cancelled | None:
    """A step beside others of its stage: the job's status read, not its progress written."""
    status = jobs.status(state.job_id)
    if status == "cancelled":
        return Cancelled(status)
    done = call.ledger.get(state.job_id, step.key_of(call))
    if done is None and status in TERMINAL:
        return Cancelled(status)  # a late copy: the job no longer waits for it
    return done


def run_step(step: Step, call: StepCall, handed: Any) -> tuple[Outcome, Any]:
    """Run ``step`` on what its task was ``handed`` in the frame every step shares (see the module's docstring):
    the outcome, and the input the work was given (``step.load``'s)."""
    jobs, key = JobStore(call.services.db), step.key_of(call)
    inp = step.load(call, handed)
    try:
        done = (step.check or progress_check)(step, call, inp, jobs)
        if isinstance(done, Cancelled):
            return done, inp
        if done is None:  # not run before for this job (a redelivered message or a retried job finds it done)
            # The agent runner's writes to the cache's Redis are sent as it ends and their answers read after the
            # ledger's write: the two round trips are waited for together.
            with redis_pipelining.scope():
                output = step.work(call, inp)
                if isinstance(output, Retry):
                    return output, inp  # before the ledger's write: a redelivered copy must work again
                done = _kept(call, inp.job_id, key, _handed_on(step, inp, output, call.started))
    except BaseException as exc:  # a step with ``on_error`` never raises (a chord waits for it)
        if step.on_error is None:
            raise
        output = step.on_error(call, exc)
        if isinstance(output, Retry):
            return output, inp
        done = _kept(call, inp.job_id, key, output.model_dump(mode="json"))
    if step.then is not None:
        step.then(call, done)
    return done, inp


def _kept(call: StepCall, job_id: str, key: str, output: dict[str, Any]) -> dict[str, Any]:
    """The output handed on: the first one the ledger stored for the step (``output`` for a step not kept)."""
    return call.ledger.put(job_id, key, output) if key else output


def _handed_on(step: Step, inp: Any, output: JobState | BaseModel, started: float) -> dict[str, Any]:
    if not isinstance(output, JobState):
        return output.model_dump(mode="json")
    if step.hands_over is not None:
        start_clock(output, step.hands_over)
    timed_as = step.stage if step.timed_as is None else step.timed_as
    if callable(timed_as):
        timed_as = timed_as(inp)
    if timed_as:
        spent = (time.perf_counter() - started) * 1000
        output.timings_ms[timed_as] = round(output.timings_ms.get(timed_as, 0.0) + spent, 3)
    return output.dump()
