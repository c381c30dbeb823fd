"""Drill 4: agents that hang and agents that flap.

A hung agent (it never returns) must not hold its job past the agent's timeout plus 2 s. A flapping agent's
circuit breaker, shared through Redis, must open for every worker process after ``fail_max`` failures, let one
trial call through after ``reset_timeout``, close when that call succeeds and open again when it fails.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from agentsearch.pipeline.agents.runner import breaker_name
from agentsearch.pipeline.platform.breakers import AgentBreaker
from agentsearch.pipeline.platform.kv import canonical_hash
from tests.chaos.agents import ChaosFlapper
from tests.chaos.harness import record, search_body, submit, use_agents, wait_until

AGENT_TIMEOUT_S = 3.0
# A job takes 1-2 s here: the reset timeout must outlast a few of them, or the "open" phase would already see the
# half-open trial (a first run with 2 s did exactly that).
FAIL_MAX, RESET_S = 3, 10


def run_job(stack, query: str, timeout_s: float = 120) -> dict:
    with stack.http() as http:
        job_id, codes = submit(http, search_body(stack, query))
        assert job_id, codes
    return stack.wait_terminal([job_id], timeout_s)[job_id]


def duration(row: dict) -> float:
    return round((row["finished_at"] - row["created_at"]).total_seconds(), 2)


def runs_of(row: dict, agent_id: str) -> list[dict]:
    return [r for r in row["agent_runs"] if r["agent_id"] == agent_id]


@pytest.mark.timeout(600)
def test_a_hung_agent_ends_its_job_within_its_timeout_plus_2_s(stack):
    stack.wait_workers_ready()
    tag = uuid.uuid4().hex[:6]
    use_agents(stack)
    baseline = [duration(run_job(stack, f"Northwind revenue 2025 [base-{tag}-{i}]")) for i in range(3)]
    figures = {"agent_timeout_s": AGENT_TIMEOUT_S, "job_s_without_agents": baseline}
    for agent_id in ("chaos_hang", "chaos_hang_responder"):
        use_agents(stack, {"agent_id": agent_id, "timeout_s": AGENT_TIMEOUT_S})
        rows = [run_job(stack, f"Northwind revenue 2025 [{agent_id}-{tag}-{i}]") for i in range(3)]
        figures[agent_id] = {
            "job_s": [duration(r) for r in rows],
            "statuses": [r["status"] for r in rows],
            "agent_status": [runs_of(r, agent_id)[0]["status"] for r in rows],
        }
    record("4a_hung_agent", figures)

    for agent_id in ("chaos_hang", "chaos_hang_responder"):
        assert figures[agent_id]["statuses"] == ["succeeded"] * 3
        assert figures[agent_id]["agent_status"] == ["timeout"] * 3
        assert max(figures[agent_id]["job_s"]) <= AGENT_TIMEOUT_S + 2, figures[agent_id]


@pytest.mark.timeout(600)
def test_a_flapping_agents_breaker_opens_everywhere_half_opens_and_closes(stack):
    stack.wait_workers_ready()
    tag = uuid.uuid4().hex[:6]
    switch = stack.workdir / f"switch-{tag}"
    switch.write_text("fail")
    config = {"switch": str(switch), "log_dir": str(stack.call_logs)}
    use_agents(stack, {"agent_id": "chaos_flapper", "config": config, "timeout_s": 10,
                       "breaker_fail_max": FAIL_MAX, "breaker_reset_timeout_s": RESET_S},
               # Keeps each job busy a moment so concurrent jobs spread over both worker processes.
               {"agent_id": "chaos_step", "config": {"work_s": 0.3}, "priority": 10})
    (user_id,), = stack.sql("SELECT id FROM users WHERE name = %s", stack.user)
    name = breaker_name("chaos_flapper", f"user:{user_id}",
                        canonical_hash(ChaosFlapper.Config(**config).model_dump(mode="json")))
    breaker = AgentBreaker(name, redis.Redis.from_url(stack.redis_url), FAIL_MAX, RESET_S)
    calls = lambda: len([e for e in stack.events("flapper") if tag in e["query"]])  # noqa: E731
    n = iter(range(10_000))

    def status_of(row: dict) -> str:
        return runs_of(row, "chaos_flapper")[0]["status"]

    opening = [status_of(run_job(stack, f"Flap [{tag}-{next(n)}]")) for _ in range(FAIL_MAX)]
    opened_at, state_after_fail_max = time.monotonic(), breaker.state
    # Several at once, so both worker processes meet the open circuit.
    with ThreadPoolExecutor(6) as pool:
        rows = list(pool.map(lambda i: run_job(stack, f"Flap [{tag}-open-{i}]"), range(6)))
    refused = [runs_of(r, "chaos_flapper")[0] for r in rows]
    calls_while_open = calls() - FAIL_MAX
    open_phase_s = time.monotonic() - opened_at
    assert open_phase_s < RESET_S, "the open phase outlasted the reset timeout: the measurement would be void"

    wait_until(breaker.admits, RESET_S + 10, "the open circuit admitting a trial call once its reset timeout is over")
    # Half-open, still failing: one trial call, and the circuit opens again at once.
    trial_failed = status_of(run_job(stack, f"Flap [{tag}-{next(n)}]"))
    reopened = breaker.state
    after_failed_trial = status_of(run_job(stack, f"Flap [{tag}-{next(n)}]"))

    wait_until(breaker.admits, RESET_S + 10, "the reopened circuit admitting a trial call again")
    switch.write_text("ok")
    trial_ok = status_of(run_job(stack, f"Flap [{tag}-{next(n)}]"))
    closed = breaker.state
    after_close = [status_of(run_job(stack, f"Flap [{tag}-{next(n)}]")) for _ in range(3)]
    figures = {
        "fail_max": FAIL_MAX, "reset_timeout_s": RESET_S, "first_calls": opening,
        "state_after_fail_max": state_after_fail_max,
        "open_phase_s": round(open_phase_s, 1), "jobs_while_open": len(refused),
        "while_open": sorted({r["status"] for r in refused}), "processes_refusing": len({r["worker"] for r in refused}),
        "agent_calls_while_open": calls_while_open, "trial_after_reset_while_failing": trial_failed,
        "state_after_failed_trial": reopened, "next_call_after_failed_trial": after_failed_trial,
        "trial_after_reset_when_healthy": trial_ok, "state_after_successful_trial": closed,
        "calls_after_closing": after_close,
    }
    record("4b_flapping_agent", figures)

    assert opening == ["error"] * FAIL_MAX and state_after_fail_max == "open"
    assert figures["while_open"] == ["circuit_open"] and calls_while_open == 0
    assert figures["processes_refusing"] >= 2, "every worker process should see the open circuit"
    assert trial_failed == "error" and reopened == "open" and after_failed_trial == "circuit_open"
    assert trial_ok == "ok" and closed == "closed" and after_close == ["ok"] * 3
