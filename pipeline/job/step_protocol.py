"""The one protocol of a job's steps: what a step is, what it hands on, and the run every step gets.

A ``Step`` is the stage the job shows while it runs, its key in the step ledger and its work: one function from the
job's state to the next state (or to a record: a response agent's ``AgentRun``). ``run_step`` gives every step the
same frame, in this order:

1. the check of the job before the work: the progress write (the stage it begins, the records of the steps before
   it, and whether the job goes on, in one round trip), or for a step that runs beside others of its stage a read
   of the job's status; the ledger's read is waited for beside it;
2. the step ledger: a step whose output is stored already hands that on and does not work again;
3. the work, timed into ``timings_ms``; the clock of the stage it hands over to starts as it ends;
4. the ledger's write (the first output stored wins), then what the step does with its output (``then``).

What comes back is the output to hand on, as JSON, or a typed outcome: ``Cancelled`` (the job was cancelled or has
ended: the rest of the chain passes through without work) or ``Retry`` (the work asks to run again later, before
anything was stored). Nothing here knows Celery: ``worker.job_tasks.step_task`` is the one wrapper that turns these
into a task's return value or its retry. Nor does it open the step's span of the job's trace: each stage function
opens its own (``pipeline.observability.tracing.traced_stage``), so a stage called alone, as the answer's benchmarks
and the tracing tests call it, is traced the same as in a task.

Usage::

    step = Step("answer", "answer", answer_work, keep_state=True, hands_over=Stage.RESPONSE)
    out = run_step(step, state, JobStore(db), ledger)       # a dict to hand on, Cancelled or Retry
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from pipeline.agents.base import Stage
from pipeline.job.ledger import StepLedger
from pipeline.job.stage_budget import start_clock
from pipeline.job.state import JobState
from pipeline.job.store import TERMINAL, JobStore
from pipeline.platform import overlap


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


@dataclass(frozen=True)
class Step:
    """One step of a job, run at most once per job however often its message arrives (``run_step``).

    ``stage`` is what the job shows while the step runs and ``key`` its name in the step ledger. ``work`` takes the
    state the step was handed and returns the next state, a record (a pydantic model) or a ``Retry``. ``timed_as``
    is the entry of ``timings_ms`` the step's time is added to (its ``stage`` if not given; ``""``: not timed);
    ``keep_state`` keeps the state the step begins with in the job's row; ``hands_over`` is the stage whose clock
    starts when the work ends. ``beside_others`` marks a step that runs side by side with others of its stage (the
    response agents): it reads the job's status rather than writing its progress. ``on_error`` turns an error of
    the step into its output (a step that must never raise), or into a ``Retry``; ``then`` receives the output
    handed on, stored now or before. ``cancelled`` is the step's record of a job that did not go on (None: the
    state passes through as it was handed).
    """

    stage: str
    key: str
    work: Callable[[JobState], JobState | BaseModel | Retry]
    timed_as: str | None = None
    keep_state: bool = False
    hands_over: Stage | None = None
    beside_others: bool = False
    on_error: Callable[[BaseException], BaseModel | Retry] | None = None
    then: Callable[[dict[str, Any]], None] | None = None
    cancelled: Callable[[Cancelled], BaseModel] | None = None


def run_step(step: Step, state: JobState, jobs: JobStore, ledger: StepLedger,
             started: float | None = None) -> Outcome:
    """Run ``step`` on ``state`` in the frame every step shares (see the module's docstring). ``started`` is when
    the step's task began (``time.perf_counter``), for its time: the state's reading counts."""
    started = time.perf_counter() if started is None else started
    try:
        done = _stored_or_cancelled(step, state, jobs, ledger)
        if isinstance(done, Cancelled):
            return done
        if done is None:  # not run before for this job (a redelivered message or a retried job finds it done)
            # The agent runner's writes to the cache's Redis are sent as it ends and their answers read after the
            # ledger's write: the two round trips are waited for together.
            with overlap.scope():
                output = step.work(state)
                if isinstance(output, Retry):
                    return output  # before the ledger's write: a redelivered copy must work again
                done = ledger.put(state.job_id, step.key, _handed_on(step, output, started))
    except BaseException as exc:  # a step with ``on_error`` never raises (a chord waits for it)
        if step.on_error is None:
            raise
        output = step.on_error(exc)
        if isinstance(output, Retry):
            return output
        done = ledger.put(state.job_id, step.key, output.model_dump(mode="json"))
    if step.then is not None:
        step.then(done)
    return done


def _stored_or_cancelled(step: Step, state: JobState, jobs: JobStore,
                         ledger: StepLedger) -> dict[str, Any] | Cancelled | None:
    """The check before the work: ``Cancelled``, the output a run before stored, or None (the step works)."""
    if step.beside_others:
        status = jobs.status(state.job_id)
        if status == "cancelled":
            return Cancelled(status)
        done = ledger.get(state.job_id, step.key)
        if done is None and status in TERMINAL:
            return Cancelled(status)  # a late copy: the job no longer waits for it
        return done
    # Asked before the progress write and read after it: the two round trips are waited for together.
    answer = ledger.ask(state.job_id, step.key)
    try:
        # One write per step: the stage it begins, the records of the steps before it (the state it was handed)
        # and the cancellation check. Its own record is written by the next step, which receives it: a second
        # write at the end made every agent step wait for the database twice.
        going_on = jobs.progress(state.job_id, step.stage, state, keep_state=step.keep_state)
    finally:
        done = answer()
    return done if going_on else Cancelled()


def _handed_on(step: Step, output: JobState | BaseModel, started: float) -> dict[str, Any]:
    if not isinstance(output, JobState):
        return output.model_dump(mode="json")
    if step.hands_over is not None:
        start_clock(output, step.hands_over)
    timed_as = step.stage if step.timed_as is None else step.timed_as
    if timed_as:
        spent = (time.perf_counter() - started) * 1000
        output.timings_ms[timed_as] = round(output.timings_ms.get(timed_as, 0.0) + spent, 3)
    return output.dump()
