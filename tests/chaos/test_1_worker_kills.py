"""Drill 1: jobs keep their promises while worker processes die.

200 jobs are submitted while one of the two worker processes is SIGKILLed every 5 s (a prefork child: its node
hands the task back at once); once during the run a whole node is SIGKILLed (its messages stay unacknowledged, so
the reaper has to notice the silent node) and a replacement node is started. Every job must end ``succeeded``, or
``failed`` with a reason, within its deadline plus one reaper period; no agent call whose output was stored may run
again (one whose process died before its output was stored must: that is at-least-once delivery).

A second drill scales a node down the way an orchestrator does (SIGTERM, then SIGKILL after a grace period) while it
runs a long agent step: soft shutdown must hand the step back before the SIGKILL lands.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter

import pytest

from tests.chaos.harness import (
    JOB_DEADLINE_S,
    REAPER_INTERVAL_S,
    SOFT_SHUTDOWN_S,
    latency_figures,
    record,
    search_body,
    side_effects,
    submit,
    submit_paced,
    use_drill_agents,
)

JOBS = 200
KILL_EVERY_S = 5.0
NODE_KILL_AT_S = 40.0
SUBMIT_PER_S = 4.0
# A scaled-down node's exit after its soft shutdown timeout: its pool stopped (billiard's handler threads poll
# every second), its connections closed, the interpreter torn down with the embedding model it holds: 1.8-2.8 s
# measured (docs/reliability.md); the 5 s the drill once left (an 8 s grace) was overrun at load average 10-15.
EXIT_ROOM_S = 9.0


class Killer(threading.Thread):
    """SIGKILLs one worker process every ``every_s``, alternating nodes; once, a whole node, then starts another."""

    def __init__(self, stack, every_s: float, node_kill_at_s: float | None) -> None:
        super().__init__(daemon=True)
        self.stack, self.every_s, self.node_kill_at_s = stack, every_s, node_kill_at_s
        self.stop = threading.Event()
        self.children_killed = 0
        self.kills: list[tuple[int, float]] = []
        self.nodes_killed: list[str] = []
        self.replacement: int | None = None

    def run(self) -> None:
        started, turn = time.monotonic(), 0
        # A kill every ``every_s`` is the fault itself, not a state to wait for.
        while not self.stop.wait(self.every_s):
            alive = self.stack.alive_workers()
            if self.node_kill_at_s is not None and not self.nodes_killed and \
                    time.monotonic() - started >= self.node_kill_at_s and len(alive) >= 2:
                victim = alive[-1]
                self.kills += [(pid, time.time()) for pid in self.stack.worker_children(victim)]
                self.stack.kill_worker(victim, signal.SIGKILL)
                self.nodes_killed.append(self.stack.worker_names[victim])
                self.replacement = self.stack.add_worker()
                continue
            turn += 1
            for index in alive[turn % len(alive):] + alive[:turn % len(alive)]:
                children = self.stack.worker_children(index)
                if children:
                    pid = random.choice(children)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.children_killed += 1
                    self.kills.append((pid, time.time()))
                    break


@pytest.mark.timeout(1500)
def test_jobs_survive_worker_processes_killed_every_5_s(stack):
    stack.wait_workers_ready()
    use_drill_agents(stack, work_s=0.1)
    tag = uuid.uuid4().hex[:6]
    queries = [f"What was Northwind Energy's revenue in 2024? [kill-{tag}-{i}]" for i in range(JOBS)]
    killer = Killer(stack, KILL_EVERY_S, NODE_KILL_AT_S)
    started = time.monotonic()
    killer.start()
    try:
        ids, codes = submit_paced(stack, [search_body(stack, q) for q in queries], SUBMIT_PER_S)
        accepted = [j for j in ids if j]
        # Every job's own deadline (a retried job gets a fresh one) plus one reaper period, then a margin.
        rows = stack.wait_terminal(accepted, timeout_s=2 * JOB_DEADLINE_S + 4 * REAPER_INTERVAL_S)
    finally:
        killer.stop.set()
        killer.join()
    elapsed = time.monotonic() - started
    if killer.replacement is not None:
        stack.wait_worker_ready(killer.replacement)

    statuses = Counter(r["status"] for r in rows.values())
    lost = [j for j in accepted if rows.get(j, {}).get("status") not in ("succeeded", "failed", "cancelled")]
    late = [r["id"] for r in rows.values() if r["finished_at"] and r["deadline_at"]
            and (r["finished_at"] - r["deadline_at"]).total_seconds() > REAPER_INTERVAL_S + 1]
    failed_without_reason = [r["id"] for r in rows.values() if r["status"] == "failed" and not r["error"]]
    artifacts = dict(stack.sql("SELECT job_id::text, count(*) FROM artifacts WHERE job_id = ANY(%s::uuid[]) "
                               "AND filename = 'chaos.txt' GROUP BY job_id", accepted))
    succeeded = [r for r in rows.values() if r["status"] == "succeeded"]
    done_twice = [r["id"] for r in rows.values() if sum(e["stage"] == "done" for e in r["stage_log"] or []) > 1]
    records_twice = [r["id"] for r in succeeded
                     if Counter(a["agent_id"] for a in r["agent_runs"]).most_common(1)[0][1] > 1]
    figures = {
        "jobs_submitted": JOBS, "jobs_accepted": len(accepted), "submit_status_codes": dict(codes),
        "statuses": dict(statuses), "lost_jobs": len(lost), "ended_after_deadline_plus_reaper_period": len(late),
        "failed_without_reason": len(failed_without_reason),
        "failure_reasons": dict(Counter((r["error"] or "")[:80] for r in rows.values() if r["status"] == "failed")),
        "worker_processes_killed": killer.children_killed, "nodes_killed": len(killer.nodes_killed),
        "jobs_retried_by_reaper": sum(1 for r in rows.values() if r["attempts"] > 1),
        "pre_search_side_effects": side_effects(stack, "step", set(queries), killer.kills),
        "response_side_effects": side_effects(stack, "responder", set(queries), killer.kills),
        "succeeded_without_artifact": sum(1 for r in succeeded if artifacts.get(r["id"], 0) == 0),
        "artifact_rows_over_one_per_job": sum(1 for n in artifacts.values() if n > 1),
        "jobs_finished_twice": len(done_twice), "agent_recorded_twice_in_a_job": len(records_twice),
        "latency": latency_figures(rows), "drill_s": round(elapsed, 1),
    }
    record("1_worker_kills", figures)

    assert not lost, f"jobs that never ended: {lost[:5]}"
    assert not late and not failed_without_reason
    # An agent call whose process died before its output was stored has to run again (at-least-once); a call
    # whose output was stored must never run again.
    assert figures["pre_search_side_effects"]["duplicated_with_output_stored"] == 0
    assert figures["response_side_effects"]["duplicated_with_output_stored"] == 0
    assert figures["artifact_rows_over_one_per_job"] == 0 and figures["succeeded_without_artifact"] == 0
    assert not done_twice and not records_twice


@pytest.mark.timeout(600)
def test_a_scaled_down_worker_hands_its_running_step_back(stack):
    while len(stack.alive_workers()) < 2:
        stack.add_worker()
    stack.wait_workers_ready()
    # The grace before SIGKILL is the soft shutdown's timeout and then room for the node's own exit, as deployed
    # (Kubernetes and compose: 240 s for a 60 s soft shutdown, 180 s of room), here EXIT_ROOM_S; the step, signalled
    # as it starts, outlasts the grace, so a node that waited for its step instead would be killed.
    work_s, grace_s = 15.0, SOFT_SHUTDOWN_S + EXIT_ROOM_S
    use_drill_agents(stack, work_s=work_s)
    query = f"How much battery storage does Northwind operate? [scale-{uuid.uuid4().hex[:6]}]"
    with stack.http() as http:
        job_id, _ = submit(http, search_body(stack, query))
    stack.wait_calls("step", {query}, timeout_s=120)
    pid = next(e["pid"] for e in stack.events("step") if e["query"] == query)
    node = next(i for i in stack.alive_workers() if pid in stack.worker_children(i))
    # The orchestrator's way: SIGTERM, then SIGKILL when the grace period is over.
    signalled = time.monotonic()
    stack.kill_worker(node, signal.SIGTERM)
    proc = stack.worker_procs[node]
    try:
        proc.wait(grace_s)
        exited_in_s = round(time.monotonic() - signalled, 1)
    except subprocess.TimeoutExpired:  # still running after the grace period
        stack.kill_worker(node, signal.SIGKILL)
        exited_in_s = None
    rows = stack.wait_terminal([job_id], timeout_s=JOB_DEADLINE_S)
    ended_in_s = round(time.monotonic() - signalled, 1)
    replacement = stack.add_worker()
    stack.wait_worker_ready(replacement)
    effects = side_effects(stack, "step", {query})
    pids = {e["pid"] for e in stack.events("step") if e["query"] == query}
    figures = {"status": rows[job_id]["status"], "node_exited_after_sigterm_s": exited_in_s,
               "soft_shutdown_timeout_s": SOFT_SHUTDOWN_S, "grace_before_sigkill_s": grace_s,
               "job_ended_after_sigterm_s": ended_in_s, "step_work_s": work_s,
               "step_ran_in_processes": len(pids), "attempts": rows[job_id]["attempts"], **effects}
    record("1b_scale_down", figures)

    assert rows[job_id]["status"] == "succeeded"
    assert exited_in_s is not None, "the node ignored SIGTERM until it was killed"
    # Handed back at once, not found by the reaper a minute later: one attempt, run again on another process.
    assert rows[job_id]["attempts"] == 1 and len(pids) == 2
    assert ended_in_s < SOFT_SHUTDOWN_S + work_s + 20
    assert effects["duplicated_side_effects"] == 0
