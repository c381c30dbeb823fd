"""What the reaper reads of the broker (``agentsearch.worker.broker_tasks``), on kombu's Redis layout in fakeredis: the
tasks a worker took and has not acknowledged (``unacked``, with the time from ``unacked_index``) and those waiting in a
queue's lists, one per priority step; a queue too long to read is not read."""

from __future__ import annotations

import json

from agentsearch.worker import broker_tasks
from agentsearch.worker.broker_tasks import held_tasks, queued_tasks


def message(task_id: str) -> dict:
    """A message as kombu's Redis transport stores it (Celery's protocol 2: the task id among the headers)."""
    return {"body": "W10=", "content-encoding": "utf-8", "content-type": "application/json",
            "headers": {"lang": "py", "task": "agentsearch.ingest_documents", "id": task_id, "retries": 0},
            "properties": {"delivery_tag": f"tag-{task_id}", "priority": 0}}


def test_the_tasks_workers_hold_come_with_when_they_took_them(redis_client):
    redis_client.hset("unacked", mapping={"tag-a": json.dumps([message("a"), "", "ingest"]),
                                          "tag-b": json.dumps([message("b"), "", "celery"]),
                                          "tag-x": "not a message"})
    redis_client.zadd("unacked_index", {"tag-a": 1000.5})
    held = held_tasks(redis_client)
    assert set(held) == {"a", "b"} and held["a"] == 1000.5
    assert held["b"] > 1000.5   # taken at an unknown time: counted as now, never as long ago


def test_the_tasks_waiting_in_every_priority_list_of_a_queue_and_none_past_the_limit(redis_client, monkeypatch):
    redis_client.rpush("ingest", json.dumps(message("p0")))
    redis_client.rpush("ingest\x06\x169", json.dumps(message("p9")), "garbage")
    redis_client.rpush("celery", json.dumps(message("other-queue")))
    assert queued_tasks(redis_client, "ingest") == {"p0", "p9"}
    monkeypatch.setattr(broker_tasks, "QUEUE_READ_MAX", 2)
    assert queued_tasks(redis_client, "ingest") is None
