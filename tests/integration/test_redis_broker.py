"""The Redis broker's transport (``agentsearch.worker.redis_broker``): one Redis client per channel, shared by every
thread that publishes or acks through it, on the suite's real Redis.

Every job of the suite goes through it too (the stack's API and workers select it for their ``redis://`` broker);
these tests hold what it changes: messages published from several threads at once all arrive, the client is
made once per pool, again after kombu replaces the pool, and a channel taken apart while Redis is away (a restart)
neither ends its worker nor loses its unacknowledged message. That one stops a Redis of its own, never the suite's.

Usage::

    .venv/bin/python -m pytest tests/integration/test_redis_broker.py -q
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import redis
from kombu import Connection, Consumer, Queue

from agentsearch.devstack.processes import free_port, start_process, stop_process, wait_for
from agentsearch.worker import redis_broker


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


def start_redis(workdir, port: int):
    """A Redis of this test's own, keeping its data in an append-only file (a restart finds it again)."""
    proc = start_process(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                          "yes", "--appendfsync", "always", "--dir", str(workdir)], {}, workdir / "redis.log")
    wait_for(lambda: redis.Redis(port=port).ping(), 20, "redis", proc, workdir / "redis.log")
    return proc


def test_a_channel_taken_apart_while_redis_is_away_keeps_its_worker_and_its_message(tmp_path):
    """What a prefork worker's consumer does when Redis restarts under it, one process busy and one waiting: its
    channel holds a delivered, unacknowledged message and a BRPOP waiting for the next; Redis goes away; the consumer
    collects the connection (each channel's close fails on its BRPOP, the first failure ends the round and leaves the
    rest open), then closes it. kombu's channel made its pool again from the detached transport there and raised
    AttributeError, which ended the worker ("Unrecoverable error")."""
    port = free_port()
    proc = start_redis(tmp_path, port)
    queue = Queue(f"redis-restart-{uuid.uuid4().hex[:8]}")
    received: list = []
    try:
        connection = Connection(f"redis://127.0.0.1:{port}/0", transport=redis_broker.Transport,
                                transport_options={"socket_timeout": 2, "socket_connect_timeout": 2})
        channel = connection.default_channel
        connection.Producer(serializer="json").publish({"n": 1}, routing_key=queue.name, declare=[queue])
        Consumer(channel, [queue], callbacks=[lambda body, message: received.append(message)],
                 accept=["json"]).consume()
        while not received:
            connection.drain_events(timeout=5)
        # Another consumer on the connection, made after the first as the worker's remote control is: both are
        # waiting on a BRPOP (the event loop's, for their next message) when Redis goes.
        control = connection.channel()
        Consumer(control, [Queue(f"{queue.name}-control")], accept=["json"]).consume()
        connection.transport.cycle.on_poll_start()
        assert channel._in_poll and control._in_poll
        stop_process(proc)
        connection.collect(socket_timeout=2)  # Celery's consumer, on the connection error
        connection.close()  # before: AttributeError: 'NoneType' object has no attribute 'hostname'
        proc = start_redis(tmp_path, port)
        received[0].ack()  # the task ends after the reconnect: its acknowledgement reaches Redis
        server = redis.Redis(port=port)
        assert server.hlen("unacked") == 0 and server.zcard("unacked_index") == 0
        assert server.llen(queue.name) == 0  # acknowledged, not put back for a second run
    finally:
        stop_process(proc)
