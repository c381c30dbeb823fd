"""The job graph of the agentic modes, as plain data (pure functions, like ``worker.canvas``).

An agentic job runs in two canvases with the loops between them::

    chain(pre_search agents -> agentic_begin)                       the head, applied at submission
    agentic_begin -> group(agentic_iteration per loop)              each iteration enqueues the next one, or
                                                                     agentic_finish when its loop is the last to end
    chain(post_search agents -> agentic_compress -> generate_answer
          -> chord(group(response agents), assemble))                the tail, applied by agentic_finish

Usage::

    build_agentic_head(job_id, specs).apply_async((state.dump(),))
    build_agentic_tail(job_id, specs).apply_async((state.dump(),))
"""

from __future__ import annotations

from celery import chain, chord, group, signature
from celery.canvas import Signature

from pipeline.agents.base import Stage
from pipeline.job.state import AgentSpec
from worker.canvas import STEP_LIMIT_S, _agent_step, _limits, ordered, response_steps

# An iteration searches, evaluates (one LLM call, or offline signals), maybe grades and refines (an LLM call each).
ITERATION_LIMIT_S = 180.0


def _failed(job_id: str) -> Signature:
    return signature("agentsearch.job_failed", kwargs={"job_id": job_id}, immutable=False)


def build_agentic_head(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    steps = [_agent_step("agentsearch.pre_search_agent", s, default_timeout_s)
             for s in ordered(specs, Stage.PRE_SEARCH)]
    steps.append(signature("agentsearch.agentic_begin").set(**_limits(STEP_LIMIT_S)))
    canvas = chain(*steps)
    canvas.on_error(_failed(job_id))
    return canvas


def iteration_step(job_id: str, profile: str, loop_state: dict) -> Signature:
    return signature("agentsearch.agentic_iteration", args=(job_id, profile, loop_state), immutable=True).set(
        **_limits(ITERATION_LIMIT_S))


def build_loops(job_id: str, loops: dict[str, dict]) -> Signature:
    """Every loop's first iteration, side by side."""
    return group(iteration_step(job_id, profile, state) for profile, state in loops.items())


def build_agentic_tail(job_id: str, specs: list[AgentSpec], default_timeout_s: float = 30.0) -> Signature:
    steps = [_agent_step("agentsearch.post_search_agent", s, default_timeout_s)
             for s in ordered(specs, Stage.POST_SEARCH)]
    steps.append(signature("agentsearch.agentic_compress").set(**_limits(STEP_LIMIT_S)))
    steps.append(signature("agentsearch.generate_answer").set(**_limits(STEP_LIMIT_S)))
    assemble = signature("agentsearch.assemble", kwargs={"job_id": job_id}).set(**_limits(STEP_LIMIT_S))
    responders = response_steps(specs, default_timeout_s)
    if responders:
        steps.append(chord(group(responders), assemble))
    else:
        steps.append(assemble.clone(args=([],)).set(immutable=True))
    canvas = chain(*steps)
    canvas.on_error(_failed(job_id))
    return canvas
