"""The Redis broker's transport (``worker.redis_broker``): one Redis client per channel, shared by every thread that
publishes or acks through it, on the suite's real Redis.

Every job of the suite goes through it too (the stack's API and workers select it for their ``redis://`` broker);
these tests hold what it changes: messages published from several threads at once all arrive, and the client is
made once per pool, again after kombu replaces the pool.

Usage::

    .venv/bin/python -m pytest tests/integration/test_redis_broker.py -q
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from kombu import Connection, Consumer, Queue

from worker import redis_broker


def test_messages_published_from_many_threads_through_one_shared_client_all_arrive(stack):
    queue = Queue(f"redis-broker-{uuid.uuid4().hex[:8]}")
    received: list[int] = []
    with Connection(stack.env["AGENTSEARCH_BROKER_URL"], transport=redis_broker.Transport) as connection:
        channel = connection.default_channel
        assert isinstance(channel, redis_broker.Channel)
        producer = connection.Producer(serializer="json")
        producer.publish({"n": -1}, routing_key=queue.name, declare=[queue])  # the queue, before the threads
        shared = channel._shared_client
        assert shared is not None and shared.connection_pool is channel.pool

        def publish(n: int) -> None:
            producer.publish({"n": n}, routing_key=queue.name)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(publish, range(200)))
        assert channel._shared_client is shared  # made once, used by every thread

        def on_message(body, message) -> None:
            received.append(body["n"])
            message.ack()

        with Consumer(connection.channel(), [queue], callbacks=[on_message], accept=["json"]):
            while len(received) < 201:
                connection.drain_events(timeout=10)
        queue.bind(channel).delete()
    assert sorted(received) == list(range(-1, 200))


def test_a_new_pool_gets_a_new_client(stack):
    with Connection(stack.env["AGENTSEARCH_BROKER_URL"], transport=redis_broker.Transport) as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as first:
            assert first.ping()
        channel._disconnect_pools()  # what kombu does after a fork and on close
        with channel.conn_or_acquire() as second:
            assert second.ping()
        assert second is not first and second.connection_pool is channel.pool
        with channel.conn_or_acquire() as third:
            assert third is second
