"""The job graph of the agentic modes, as plain data (pure functions, like ``worker.canvas``).

An agentic job runs in two canvases with the loops between them::

    chain(pre_search agents -> agentic_begin)                       the head, applied at submission
    agentic_begin -> group(agentic_iteration per loop)              each iteration enqueues the next one, or
                                                                     agentic_finish when its loop is the last to end
    chain(post_search agents -> agentic_compress -> write_answer
          -> chord(group(response agents), assemble))                the tail, applied by agentic_finish

The steps every job shares are the task objects of ``worker.job_tasks``. The loop's own tasks (``worker.agentic_tasks``)
are named here instead, and register under these names: they apply these canvases themselves (begin starts the
loops, each iteration its successor, finish the tail), so importing them here would make an import circle.

Usage::

    build_agentic_head(job_id, specs).apply_async((state.dump(),))
    build_agentic_tail(job_id, specs).apply_async((state.dump(),))
"""

from __future__ import annotations

from celery import chain, group, signature
from celery.canvas import Signature

from pipeline.agents.base import Stage
from pipeline.agents.records import AgentSpec
from worker.canvas import (
    STEP_LIMIT_S,
    fail_job_on_error,
    limits,
    respond_and_assemble,
    stage_signatures,
    step_signature,
)
from worker.job_tasks import agentic_compress, post_search_agent, pre_search_agent, write_answer

# The tasks worker.agentic_tasks.agentic_begin and worker.agentic_tasks.agentic_iteration.
AGENTIC_BEGIN = "agentsearch.agentic_begin"
AGENTIC_ITERATION = "agentsearch.agentic_iteration"
# An iteration searches, evaluates (one LLM call, or offline signals), maybe grades and refines (an LLM call each).
ITERATION_LIMIT_S = 180.0


def build_agentic_head(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    steps = stage_signatures(pre_search_agent, specs, Stage.PRE_SEARCH, default_timeout_s)
    steps.append(signature(AGENTIC_BEGIN).set(**limits(STEP_LIMIT_S)))
    return fail_job_on_error(chain(*steps), job_id)


def iteration_signature(job_id: str, profile: str, loop_state: dict) -> Signature:
    return signature(AGENTIC_ITERATION, args=(job_id, profile, loop_state), immutable=True).set(
        **limits(ITERATION_LIMIT_S))


def build_loops(job_id: str, loops: dict[str, dict]) -> Signature:
    """Every loop's first iteration, side by side."""
    return group(iteration_signature(job_id, profile, state) for profile, state in loops.items())


def build_agentic_tail(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    steps = stage_signatures(post_search_agent, specs, Stage.POST_SEARCH, default_timeout_s)
    steps.append(step_signature(agentic_compress))
    steps.append(step_signature(write_answer))
    steps.append(respond_and_assemble(job_id, specs, default_timeout_s))
    return fail_job_on_error(chain(*steps), job_id)
