"""Ingestion at the speed of the hardware, never stuck, always visible, on a stack of its own: two worker nodes of one
process each on the ingest queue (two hosts, as far as Celery can tell) and beat, whose reaper looks every few
seconds.

- An upload of 100 documents is sent as tasks of at most ``ingest_task_documents`` (32): both nodes index some.
- ``GET /v1/collections/{id}`` shows the ingestion as it goes: documents and chunks done, the rate, the time left
  (given while documents are pending, null at the end), the chunks counted per document.
- A whole node SIGKILLed mid-ingestion (its main process and its pool: its messages stay unacknowledged in Redis
  for the visibility timeout, about an hour) and a new node started, as a supervisor would: the reaper sends the
  lost documents again, and every document ends ``indexed`` within the bound docs/documents.md states.
- A pool process SIGKILLed mid-ingestion: its node hands the message back at once, and its documents count one
  lost attempt.
- Documents whose task never reached the broker are sent again by the reaper.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from agentsearch.devstack import DevStack
from agentsearch.pipeline.job.job_store import ORPHAN_GRACE_S

pytestmark = pytest.mark.integration

DOCUMENTS = 100
TASK_DOCUMENTS = 32
# The reaper looks this often here (30 s by default): the bound is ORPHAN_GRACE_S + one period after the loss.
REAPER_INTERVAL_S = 5
# A task of 32 of these documents takes a few seconds: long enough to be killed under way.
SENTENCES = 12
WORDS = ("wind solar turbine grid battery storage revenue quarter offshore capacity transmission substation "
         "maintenance contract generation forecast").split()


def documents(tag: str, sentences: int = 2) -> list[dict]:
    return [{"id": f"{tag}-{i}", "title": f"{tag} report {i}",
             "text": " ".join(f"Report {i} of {tag} puts the {WORDS[(i + k) % len(WORDS)]} figure at {i * 7 + k} "
                              f"units in period {k}." for k in range(sentences))} for i in range(DOCUMENTS)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    env = {"AGENTSEARCH_REAPER_INTERVAL_S": str(REAPER_INTERVAL_S),
           "AGENTSEARCH_INGEST_TASK_DOCUMENTS": str(TASK_DOCUMENTS)}
    with DevStack(tmp_path_factory.mktemp("ingest-pair"), workers=2, concurrency=1, queues="celery,ingest",
                  user="ingest-user", beat=True, extra_env=env) as stack:
        yield stack


def upload(http: httpx.Client, name: str, docs: list[dict]) -> tuple[str, dict]:
    created = http.post("/v1/collections", json={"name": name})
    assert created.status_code == 201, created.text
    collection_id = created.json()["id"]
    accepted = http.post(f"/v1/collections/{collection_id}/documents", json={"documents": docs})
    assert accepted.status_code == 202, accepted.text
    return collection_id, accepted.json()


def watch(http: httpx.Client, collection_id: str, timeout_s: float, every_s: float = 0.2) -> list[dict]:
    """The collection's view every ``every_s`` until nothing is pending; every view seen, the last one too."""
    seen, deadline = [], time.monotonic() + timeout_s
    while True:
        view = http.get(f"/v1/collections/{collection_id}").json()
        seen.append(view)
        if view["documents"]["pending"] == 0:
            return seen
        assert time.monotonic() < deadline, f"still pending after {timeout_s:g} s: {view['ingestion']}"
        time.sleep(every_s)


def rows(stack: DevStack, collection_id: str) -> list[tuple]:
    return stack.sql("SELECT external_id, status, worker, chunks, attempts, queued_at, finished_at, error "
                     "FROM documents WHERE collection_id = %s", collection_id)


def under_way(stack: DevStack, collection_id: str, node: str) -> list[str]:
    """Wait until ``node`` started indexing some of the collection's documents: their ids (pending, claimed)."""
    deadline = time.monotonic() + 120
    while True:
        held = [r[0] for r in rows(stack, collection_id) if r[2] == node and r[1] == "pending"]
        if held:
            return held
        assert time.monotonic() < deadline, f"{node} never started a task"
        time.sleep(0.05)


def test_an_upload_is_split_into_tasks_both_workers_index_and_its_progress_moves_to_done(pair):
    with pair.http() as http:
        collection_id, accepted = upload(http, "spread", documents("spread"))
        views = watch(http, collection_id, timeout_s=300)

    assert accepted["accepted"] == DOCUMENTS
    assert len(accepted["task_ids"]) == -(-DOCUMENTS // TASK_DOCUMENTS) == 4
    assert accepted["task_id"] == accepted["task_ids"][0] and len(set(accepted["task_ids"])) == 4
    stored = rows(pair, collection_id)
    assert {r[1] for r in stored} == {"indexed"}
    by_worker = {w: sum(1 for r in stored if r[2] == w) for w in {r[2] for r in stored}}
    assert set(by_worker) == set(pair.worker_names), f"both nodes index some: {by_worker}"
    assert all(r[3] >= 1 and r[5] <= r[6] for r in stored)

    progress = [v["ingestion"] for v in views]
    assert all(p["documents_total"] == DOCUMENTS for p in progress)
    done = [p["documents_done"] for p in progress]
    assert done == sorted(done), "documents done never goes back"
    under_way = [p for p in progress if p["pending"]]
    assert under_way and under_way[0]["documents_done"] < DOCUMENTS
    timed = [p for p in under_way if p["eta_s"] is not None]
    assert timed, "a time left while documents were pending, once some had ended"
    assert all(p["eta_s"] > 0 and p["documents_per_s"] > 0 and p["chunks_per_s"] > 0 for p in timed)
    last = progress[-1]
    assert (last["documents_done"], last["pending"], last["documents_failed"], last["eta_s"]) == (DOCUMENTS, 0, 0,
                                                                                                  None)
    assert last["chunks"] == sum(r[3] for r in stored) >= DOCUMENTS
    assert last["documents_per_s"] > 0 and last["started_at"]


def test_a_worker_killed_mid_ingestion_is_replaced_and_its_documents_end_indexed_within_the_bound(pair):
    victim = pair.alive_workers()[-1]
    node = pair.worker_names[victim]
    with pair.http() as http:
        collection_id, _ = upload(http, "killed-node", documents("killed-node", SENTENCES))
        held = under_way(pair, collection_id, node)
        pair.kill_worker(victim)
        killed_at = time.monotonic()
        replacement = pair.add_worker(queues="celery,ingest", concurrency=1)
        pair.wait_worker_ready(replacement)
        # The bound after the loss: the grace and one reaper period, then the tasks still ahead and the lost one's.
        views = watch(http, collection_id, timeout_s=ORPHAN_GRACE_S + REAPER_INTERVAL_S + 120, every_s=0.5)
        ended_s = time.monotonic() - killed_at

    assert held, "the killed node held documents under way"
    stored = {r[0]: r for r in rows(pair, collection_id)}
    assert {r[1] for r in stored.values()} == {"indexed"}, [r[7] for r in stored.values() if r[7]]
    for document_id in held:
        _, _, worker, chunks, attempts, *_ = stored[document_id]
        assert worker != node and chunks >= 1 and attempts == 1, stored[document_id]
    assert views[-1]["ingestion"]["documents_done"] == DOCUMENTS and views[-1]["ingestion"]["eta_s"] is None
    reaped = [line for line in pair.logs["beat"].read_text().splitlines() if "lost their worker or task" in line]
    assert reaped and node in reaped[0]
    print(f"\n{len(held)} documents held by the killed node; all {DOCUMENTS} indexed {ended_s:.1f} s after the kill")


def test_a_pool_process_killed_mid_ingestion_hands_its_documents_back_at_once(pair):
    node_index = pair.alive_workers()[0]
    node = pair.worker_names[node_index]
    with pair.http() as http:
        collection_id, _ = upload(http, "killed-process", documents("killed-process", SENTENCES))
        held = under_way(pair, collection_id, node)
        for pid in pair.worker_children(node_index):
            os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        # Handed back by the node at once: no reaper period, no grace.
        watch(http, collection_id, timeout_s=120, every_s=0.5)
        ended_s = time.monotonic() - killed_at

    stored = {r[0]: r for r in rows(pair, collection_id)}
    assert {r[1] for r in stored.values()} == {"indexed"}
    assert held and all(stored[d][4] == 1 for d in held), [stored[d] for d in held]
    assert not [line for line in pair.logs["beat"].read_text().splitlines()
                if "lost their worker or task" in line and node in line]
    print(f"\n{len(held)} documents under the killed process; all {DOCUMENTS} indexed {ended_s:.1f} s after the kill")


def test_documents_whose_task_never_reached_the_broker_are_sent_again(pair):
    """As if the API had died between storing the documents and sending their task: rows pending for a minute, their
    task in no queue and held by no worker. The reaper sends them again at its next look."""
    with pair.http() as http:
        created = http.post("/v1/collections", json={"name": "lost-task"})
        assert created.status_code == 201, created.text
        collection_id = created.json()["id"]
        for doc in documents("lost-task")[:5]:
            pair.sql("INSERT INTO documents (id, collection_id, external_id, title, text, metadata, status, "
                     "created_at, updated_at, queued_at, task_id, attempts) VALUES (gen_random_uuid(), %s, %s, %s, "
                     "%s, '{}', 'pending', now() - interval '1 minute', now() - interval '1 minute', "
                     "now() - interval '1 minute', 'never-sent', 0) RETURNING id",
                     collection_id, doc["id"], doc["title"], doc["text"])
        views = watch(http, collection_id, timeout_s=REAPER_INTERVAL_S + 120, every_s=0.5)

    stored = rows(pair, collection_id)
    assert [(r[1], r[4]) for r in stored] == [("indexed", 1)] * 5 and all(r[3] >= 1 for r in stored)
    assert views[-1]["ingestion"]["documents_done"] == 5 and views[-1]["ingestion"]["eta_s"] is None
    assert any("lost their worker or task (its task was lost from the broker)" in line
               for line in pair.logs["beat"].read_text().splitlines())
