"""The tasks the broker holds, as the reapers need to know: those a worker took and has not acknowledged yet (with
when it took them), and those waiting in a queue.

kombu's Redis transport keeps a message a consumer took in the ``unacked`` hash (by delivery tag), and the time it
was taken in ``unacked_index``, until the ack, or until the visibility timeout hands it out again; a waiting message
is in its queue's lists, one per priority step (``agentsearch.pipeline.observability.exposition.priority_lists``). Other
brokers are not read: the in-process one has no worker to lose.

Usage::

    client = broker_client()               # None when the broker is not Redis
    held_tasks(client)                     # {"<task id>": 1767000000.0, ...}: taken by a worker, not acknowledged
    queued_tasks(client, "ingest")         # {"<task id>", ...}; None past QUEUE_READ_MAX waiting messages
    ingest_view()                          # both for the ingest queue (agentsearch.pipeline.ingestion.recovery); None:
    not Redis
"""

from __future__ import annotations

import json
import time
from typing import cast

import redis

from agentsearch.pipeline.ingestion.recovery import BrokerView
from agentsearch.pipeline.observability.exposition import priority_lists
from agentsearch.pipeline.platform.kv import connect_redis
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.worker.app import INGEST_QUEUE

# Reading a waiting message costs about 1.5 KB (an ingest task names up to 32 documents): a queue longer than this
# is not read, and a task lost from it is found once it is shorter.
QUEUE_READ_MAX = 2000


def broker_client() -> redis.Redis | None:
    url = str(get_settings().broker_url)
    return connect_redis(url) if url.startswith(("redis://", "rediss://")) else None


def _task_id(raw: bytes | str) -> str | None:
    """The task id of a message as kombu stores it: the message itself in a queue's list, ``[message, exchange,
    routing key]`` in the ``unacked`` hash."""
    try:
        message = json.loads(raw)
        return (message[0] if isinstance(message, list) else message)["headers"]["id"]
    except (ValueError, LookupError, TypeError):
        return None


def held_tasks(client: redis.Redis) -> dict[str, float]:
    """The task ids a consumer took and has not acknowledged, each with when it took it (epoch seconds)."""
    # redis-py's stubs give zrange one return type for all its modes; with scores it is (member, score) pairs.
    taken = dict(cast("list[tuple[bytes | str, float]]", client.zrange("unacked_index", 0, -1, withscores=True)))
    held = {}
    for tag, raw in client.hgetall("unacked").items():
        task_id = _task_id(raw)
        if task_id is not None:
            held[task_id] = float(taken.get(tag, time.time()))
    return held


def queued_tasks(client: redis.Redis, queue: str) -> set[str] | None:
    """The task ids waiting in ``queue``; None when more than ``QUEUE_READ_MAX`` wait."""
    names = priority_lists(queue)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.llen(name)
    if sum(pipe.execute()) > QUEUE_READ_MAX:
        return None
    for name in names:
        pipe.lrange(name, 0, -1)
    return {task_id for messages in pipe.execute() for task_id in map(_task_id, messages) if task_id is not None}


def ingest_view() -> BrokerView | None:
    """The ingest tasks the broker holds; None when the broker is not Redis. The held ones are read before and after
    the queue, so a task on its way from the queue to a worker is seen in one or the other."""
    client = broker_client()
    if client is None:
        return None
    held = held_tasks(client)
    queued = queued_tasks(client, INGEST_QUEUE)
    return BrokerView(held={**held_tasks(client), **held}, queued=queued)
