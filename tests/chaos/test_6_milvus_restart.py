"""Drill 6: Milvus restarted while jobs are arriving and running, and documents sent while it is down.

Jobs are submitted at a steady rate; once a few are running, ``milvus-lite server`` is stopped and, ``DOWN_S`` later,
started again on its data dir, as a server restart does: its collections come back released. While it is down a
batch of documents is sent to a new collection. Every job must end, and no job may report success without its
documents: a search that meets Milvus away is searched again with backoff (``MILVUS_RETRY_S``, 60 s here) and a
collection found released is loaded again. The documents must end indexed, never pending.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from tests.chaos.harness import (
    JOB_DEADLINE_S,
    latency_figures,
    record,
    search_body,
    side_effects,
    submit_paced,
    use_drill_agents,
)

JOBS = 40
SUBMIT_PER_S = 2.0
# Jobs that have started their step when Milvus goes: the outage meets jobs running as well as jobs arriving.
RUNNING_AT_RESTART = 3
DOWN_S = 5.0
OUTAGE_DOCUMENTS = [
    {"id": f"milvus-outage-{i}", "title": f"Turbine log {i}",
     "text": f"Gearbox inspection {i} of the Halvard wind farm found bearing wear on turbine {i + 7}."}
    for i in range(5)
]


def _reloads(stack) -> int:
    """Searches that met a collection released by the restart and loaded it again (the workers' warnings)."""
    return sum(stack.logs[name].read_text().count("was released (a server restart?); loading it again")
               for name in stack.logs if name.startswith("worker-"))


@pytest.mark.timeout(900)
def test_no_job_succeeds_without_its_documents_when_milvus_restarts(stack):
    stack.wait_workers_ready()
    use_drill_agents(stack, work_s=0.1)
    tag = uuid.uuid4().hex[:6]
    queries = [f"How much battery storage does Northwind operate? [milvus-{tag}-{i}]" for i in range(JOBS)]
    reloads_before = _reloads(stack)
    outage: dict = {}

    def restart() -> None:
        stack.wait_calls("step", set(queries), at_least=RUNNING_AT_RESTART)
        outage["down_at"], down = datetime.now(UTC), time.monotonic()
        stack.stop_milvus()
        with stack.http() as http:  # a new collection: making it in Milvus meets the outage too
            created = http.post("/v1/collections", json={"name": f"milvus-outage-{tag}"}).json()["id"]
            http.post(f"/v1/collections/{created}/documents",
                      json={"documents": OUTAGE_DOCUMENTS}).raise_for_status()
        outage["collection_id"] = created
        # Milvus stays away for DOWN_S: the outage's length is the drill's fault, not a state to wait for.
        time.sleep(max(0.0, DOWN_S - (time.monotonic() - down)))
        stack.start_milvus()
        outage["up_at"] = datetime.now(UTC)

    with ThreadPoolExecutor(1) as restarter:
        restarted = restarter.submit(restart)
        ids, codes = submit_paced(stack, [search_body(stack, q) for q in queries], SUBMIT_PER_S, retry_s=120)
        restarted.result(timeout=300)  # its own waits are bounded; a failed one fails the drill here
    accepted = [j for j in ids if j]
    rows = stack.wait_terminal(accepted, timeout_s=JOB_DEADLINE_S + 60)

    # The documents sent while Milvus was down.
    with stack.http() as http:
        deadline = time.monotonic() + 180
        while (counts := http.get(f"/v1/collections/{outage['collection_id']}").json()["documents"])["pending"]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
    (last_marked,), = stack.sql("SELECT max(updated_at) FROM documents WHERE collection_id = %s",
                                outage["collection_id"])

    answers = {
        job_id: {"sources": sources, "degraded": degraded, "attempts": attempts or 1}
        for job_id, sources, degraded, attempts in stack.sql(
            "SELECT id::text, jsonb_array_length(coalesce(response->'sources', '[]'::jsonb)), "
            "(response->>'degraded')::boolean, (response->'metadata'->'search'->>'attempts')::int "
            "FROM jobs WHERE id = ANY(%s::uuid[])", accepted)
    }
    succeeded = [j for j, r in rows.items() if r["status"] == "succeeded"]
    without_documents = [j for j in succeeded if not answers[j]["sources"]]
    lost = [j for j in accepted if rows.get(j, {}).get("status") not in ("succeeded", "failed", "cancelled")]
    finished_after = sorted((r["finished_at"] - outage["up_at"]).total_seconds() for r in rows.values()
                            if r["finished_at"] and r["finished_at"] > outage["up_at"])
    attempts = Counter(answers[j]["attempts"] for j in succeeded)
    figures = {
        "jobs_submitted": JOBS, "jobs_accepted": len(accepted), "milvus_down_s": DOWN_S,
        "submit_status_codes": dict(codes), "statuses": dict(Counter(r["status"] for r in rows.values())),
        "lost_jobs": len(lost),
        "succeeded_without_documents": len(without_documents),
        "succeeded_degraded": sum(1 for j in succeeded if answers[j]["degraded"]),
        "jobs_searched_again": sum(n for a, n in attempts.items() if a > 1),
        "search_attempts": {str(a): n for a, n in sorted(attempts.items())},
        "collection_loads_after_release": _reloads(stack) - reloads_before,
        "failure_reasons": dict(Counter((r["error"] or "")[:120] for r in rows.values() if r["status"] == "failed")),
        "first_job_finished_after_milvus_back_s": round(finished_after[0], 2) if finished_after else None,
        "documents_sent_while_down": len(OUTAGE_DOCUMENTS), "documents_after": counts,
        "documents_marked_after_milvus_back_s": round((last_marked - outage["up_at"]).total_seconds(), 2),
        "response_side_effects": side_effects(stack, "responder", set(queries)),
        "latency": latency_figures(rows),
    }
    record("6_milvus_restart", figures)

    assert len(accepted) == JOBS and not lost
    assert not without_documents, "a job reported success without its documents"
    # A 5 s restart is within MILVUS_RETRY_S: every job waits it out. (A degraded job, one retriever of two cut
    # off mid-search, would be an honest answer with its documents: counted, not refused.)
    assert len(succeeded) == JOBS, figures["failure_reasons"]
    assert counts == {"pending": 0, "indexed": len(OUTAGE_DOCUMENTS), "failed": 0}
    assert figures["response_side_effects"]["duplicated_side_effects"] == 0
