"""Drill 8: network partitions between hosts (``tests.chaos.hosts_stack``: data, api, worker1, worker2).

Each scenario submits jobs that leave every kind of side effect a job can leave (an artifact, a webhook delivery, a
conversation turn; the iterative ones, seen-content records), cuts one host off from one service for ``CUT_S``
while they run, probes the API all along, heals, and waits for every job to end. Promised, and checked:

- no job lost: every accepted job ends, ``succeeded`` or ``failed`` with its reason;
- no side effect done twice: the response agent's call, the artifact, the conversation turn, the seen-content
  record, the webhook delivery (the receiver counts POSTs per ``webhook-id``, and deliveries per job and event);
- every job ends within ``BOUND_AFTER_HEAL_S`` after the heal;
- the API answers within ``API_ANSWER_S`` during the cut, 503 for what it cannot do, never another 5xx.

The figures go to ``partition.json`` beside ``results.json`` (``{scenario: {"jobs", "succeeded", "failed",
"lost", "duplicated_side_effects", "p95_after_heal_s"}}``), and in detail to ``results.json`` as ``8_partition``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
import pytest

from tests.chaos.harness import (
    RESULTS,
    TERMINAL,
    percentile,
    record,
    search_body,
    side_effects,
    submit_paced,
    use_drill_agents,
)
from tests.chaos.hosts_stack import PORTS, HostsStack

CUT_S = 30.0
SINGLE_JOBS = 12
ITERATIVE_JOBS = 3
SUBMIT_PER_S = 2.0
# Jobs mid-way (in their step) when the cut comes.
IN_FLIGHT_AT_CUT = 1
# The promise: every job in flight at the heal ends within this long after it (docs/reliability.md).
BOUND_AFTER_HEAL_S = 60.0
# The longest the API may take to answer anything during a cut: past it, the request counts as a hang.
API_ANSWER_S = 20.0
PARTITION_RESULTS = RESULTS.parent / "partition.json"
SUMMARY = ("jobs", "succeeded", "failed", "lost", "duplicated_side_effects", "p95_after_heal_s")

# name: (host cut off, the service, which way)
SCENARIOS = {
    "worker_redis": ("worker1", "redis", "both"),
    "worker_postgres": ("worker1", "postgres", "both"),
    "api_redis": ("api", "redis", "both"),
    "worker_redis_replies_lost": ("worker1", "redis", "replies"),
}


@pytest.fixture(scope="module")
def hosts_stack(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("nft") is None:
        pytest.skip("network namespaces and nftables need root and nft (make chaos installs nftables)")
    with HostsStack(tmp_path_factory.mktemp("partition")) as running:
        running.wait_workers_ready()
        use_drill_agents(running, work_s=1.0)  # slow enough that jobs are mid-way when the cut comes
        with running.http() as http:
            created = http.post("/v1/webhooks", json={"url": running.receiver_url,
                                                      "events": ["job.succeeded", "job.failed", "job.cancelled"]})
            assert created.status_code == 201, created.text
        yield running


def bodies(stack: HostsStack, tag: str) -> list[dict]:
    """Single jobs, each in a conversation of its own (one turn when it succeeds), and iterative jobs that
    record what they returned as seen."""
    with stack.http() as http:
        conversations = [http.post("/v1/conversations", json={"title": f"{tag}-{i}"}).json()["id"]
                         for i in range(SINGLE_JOBS)]
    single = [search_body(stack, f"What is Northwind's wind capacity? [{tag}-{i}]", conversation_id=c)
              for i, c in enumerate(conversations)]
    iterative = [search_body(stack, f"How does Northwind maintain its wind turbines? [{tag}-it-{i}]",
                             # Nothing skipped (each run returns what it finds), everything recorded.
                             mode="iterative", seen={"enabled": True, "window_days": 0.0},
                             iterative={"target": 2, "per_iteration": 2, "max_iterations": 1, "sufficiency": False})
                 for i in range(ITERATIVE_JOBS)]
    return single + iterative


class ApiProbe:
    """Asks the API what a client would until stopped, each in a thread of its own so that one request waiting
    does not hold up the others: read its jobs and readiness every second, submit a job every ``SUBMIT_EVERY_S``.
    Keeps each answer's status (0: no answer within ``API_ANSWER_S``) and how long it took."""

    SUBMIT_EVERY_S = 5.0

    def __init__(self, stack: HostsStack, tag: str) -> None:
        self.stack, self.tag = stack, tag
        self.answers: list[tuple[str, int, float]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(what, every), daemon=True)
                         for what, every in (("submit", self.SUBMIT_EVERY_S), ("read", 1.0), ("ready", 1.0))]

    def __enter__(self) -> ApiProbe:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(API_ANSWER_S * 2)

    def _request(self, http: httpx.Client, what: str, n: int) -> httpx.Response:
        if what == "submit":
            # A new query each time and no cache: a submission that is accepted runs as a job of its own.
            body = search_body(self.stack, f"Submitted during the cut [{self.tag}-probe-{n}]")
            return http.post("/v1/search", json=body)
        return http.get("/v1/jobs", params={"limit": 5}) if what == "read" else http.get("/readyz")

    def _loop(self, what: str, every_s: float) -> None:
        with self.stack.http(timeout_s=API_ANSWER_S) as http:
            n = 0
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    code = self._request(http, what, n).status_code
                except httpx.TimeoutException:
                    code = 0
                except httpx.TransportError:
                    code = -1
                self.answers.append((what, code, time.monotonic() - started))
                n += 1
                self._stop.wait(every_s)

    def figures(self) -> dict:
        codes = {what: dict(Counter(code for w, code, _ in self.answers if w == what))
                 for what in ("submit", "read", "ready")}
        slowest = max((took for _, _, took in self.answers), default=0.0)
        return {"codes": codes, "slowest_answer_s": round(slowest, 2),
                "hangs": sum(1 for _, code, _ in self.answers if code == 0),
                "errors_other_than_503": sum(1 for _, code, _ in self.answers if code >= 500 and code != 503)}


def duplicated(stack: HostsStack, job_ids: list[str], queries: set[str]) -> dict:
    """Each kind of side effect done more than once for one job."""
    deliveries = [d for d in stack.deliveries() if d["job_id"] in set(job_ids)]
    posts = Counter(d["webhook_id"] for d in deliveries)
    events = Counter((d["job_id"], d["type"]) for d in {d["webhook_id"]: d for d in deliveries}.values())
    over = ("SELECT coalesce(sum(n - 1), 0)::int FROM (SELECT count(*) AS n FROM {} "
            "WHERE job_id = ANY(%s::uuid[]) GROUP BY {} HAVING count(*) > 1) AS d")
    return {
        "response_agent_calls": side_effects(stack, "responder", queries)["duplicated_side_effects"],
        "artifacts": stack.sql(over.format("artifacts", "job_id, filename"), job_ids)[0][0],
        "conversation_turns": stack.sql(over.format("conversation_turns", "job_id"), job_ids)[0][0],
        "seen_content": stack.sql(over.format("seen_content", "job_id, profile, collection_id, item_id"),
                                  job_ids)[0][0],
        "webhook_posts_per_delivery": sum(n - 1 for n in posts.values() if n > 1),
        "webhook_deliveries_per_event": sum(n - 1 for n in events.values() if n > 1),
    }


def done(stack: HostsStack, job_ids: list[str]) -> dict:
    """How many of each side effect there are for these jobs: what the duplicates are counted among."""
    count = "SELECT count(*)::int FROM {} WHERE job_id = ANY(%s::uuid[])"
    return {table: stack.sql(count.format(table), job_ids)[0][0]
            for table in ("artifacts", "conversation_turns", "seen_content", "webhook_deliveries")} | {
        "webhook_posts": sum(1 for d in stack.deliveries() if d["job_id"] in set(job_ids))}


def wait_delivered(stack: HostsStack, job_ids: list[str], timeout_s: float) -> int:
    """Wait until every webhook delivery of these jobs reached the receiver (a job's delivery is sent just after
    it ends); how many had not when the time was up."""
    deadline = time.monotonic() + timeout_s
    while True:
        pending = stack.sql("SELECT count(*)::int FROM webhook_deliveries WHERE job_id = ANY(%s::uuid[]) "
                            "AND status <> 'delivered'", job_ids)[0][0]
        if not pending or time.monotonic() > deadline:
            return pending
        time.sleep(1.0)


def run_scenario(stack: HostsStack, name: str, host: str, service: str, direction: str) -> dict:
    tag = f"{name}-{uuid.uuid4().hex[:6]}"
    work = bodies(stack, tag)
    outage: dict = {}

    def cut_and_heal() -> None:
        stack.wait_calls("step", {b["query"] for b in work}, at_least=IN_FLIGHT_AT_CUT, in_flight=True)
        outage["cut_at"] = datetime.now(UTC)
        stack.hosts.cut(host, "data", PORTS[service], direction)
        try:
            # The cut lasts CUT_S: its length is the drill's fault, not a state to wait for.
            time.sleep(CUT_S)
        finally:
            stack.hosts.heal(host)
        outage["healed_at"] = datetime.now(UTC)

    with ApiProbe(stack, tag) as probe, ThreadPoolExecutor(1) as cutter:
        cut = cutter.submit(cut_and_heal)
        ids, codes = submit_paced(stack, work, SUBMIT_PER_S, retry_s=CUT_S + 60, threads=4)
        cut.result(timeout=CUT_S + 180)  # its wait is bounded; a failed one fails the scenario here
    accepted = [j for j in ids if j]
    probed = [j for j, in stack.sql("SELECT id::text FROM jobs WHERE query LIKE %s", f"%[{tag}-probe-%")]
    all_jobs = accepted + probed
    rows = stack.wait_terminal(all_jobs, timeout_s=BOUND_AFTER_HEAL_S * 4)
    undelivered = wait_delivered(stack, all_jobs, timeout_s=BOUND_AFTER_HEAL_S)
    healed_at = outage["healed_at"]
    after_heal = [(r["finished_at"] - healed_at).total_seconds() for r in rows.values()
                  if r["finished_at"] and r["finished_at"] > healed_at]
    not_ended = [j for j in all_jobs if rows.get(j, {}).get("status") not in TERMINAL]
    queries = {b["query"] for b in work} | {r["query"] for r in rows.values()}
    twice = duplicated(stack, all_jobs, queries)
    statuses = Counter(r["status"] for r in rows.values())
    return {
        "jobs": len(all_jobs), "succeeded": statuses["succeeded"], "failed": statuses["failed"],
        "lost": len(not_ended), "duplicated_side_effects": sum(twice.values()),
        "p95_after_heal_s": percentile(after_heal, 0.95),
        "max_after_heal_s": round(max(after_heal), 2) if after_heal else None,
        "in_flight_at_heal": len(after_heal), "cut": f"{host} / {service} ({direction})", "cut_s": CUT_S,
        "never_accepted": len(work) - len(accepted), "submit_codes": dict(codes),
        "duplicated": twice, "side_effects": done(stack, all_jobs), "webhook_deliveries_undelivered": undelivered,
        "api": probe.figures(),
        "failure_reasons": dict(Counter((r["error"] or "")[:100] for r in rows.values() if r["status"] == "failed")),
        "with_a_second_attempt": sum(1 for r in rows.values() if (r["attempts"] or 0) > 1),
    }


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_partition(hosts_stack, name):
    figures = run_scenario(hosts_stack, name, *SCENARIOS[name])
    record(f"8_partition_{name}", figures)
    summary = json.loads(PARTITION_RESULTS.read_text()) if PARTITION_RESULTS.exists() else {}
    summary[name] = {key: figures[key] for key in SUMMARY}
    PARTITION_RESULTS.write_text(json.dumps(summary, indent=2))

    assert figures["lost"] == 0 and figures["never_accepted"] == 0, figures
    assert figures["webhook_deliveries_undelivered"] == 0, figures
    assert figures["duplicated_side_effects"] == 0, figures["duplicated"]
    assert figures["max_after_heal_s"] is None or figures["max_after_heal_s"] <= BOUND_AFTER_HEAL_S, figures
    assert figures["api"]["hangs"] == 0 and figures["api"]["errors_other_than_503"] == 0, figures["api"]
