"""The embedded mode's hops: the memory broker's worker threads are woken by a publish
(``agentsearch.worker.memory_broker``) and wait at most ``AGENTSEARCH_EMBEDDED_POLL_S`` between two looks at empty
queues; a Redis broker is left as it was (kombu reads the same option as its BRPOP timeout there).

kombu's own memory transport sleeps between two looks (1 s by default): each hop between two steps of a job waited
up to that, and a job with no agents took 2.9 s from submission to its end for 63 ms of steps
(src/agentsearch/bench/results/embedded_job.md); a job is timed here against that.

Usage::

    .venv/bin/python -m pytest tests/unit/worker/test_embedded_hops.py -q
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.job.job_store import TERMINAL
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.worker import memory_broker
from agentsearch.worker.app import broker_transport_options

# kombu's sleep between two polls of an empty queue when no option sets it: what every hop waited before.
KOMBU_POLL_S = 1.0


def test_the_memory_broker_polls_its_queues_at_the_setting_and_redis_gets_no_polling_interval(tmp_path):
    embedded = Settings(data_dir=tmp_path)
    assert embedded.embedded
    assert broker_transport_options(embedded)["polling_interval"] == embedded.embedded_poll_s
    assert broker_transport_options(Settings(data_dir=tmp_path, embedded_poll_s=0.25))["polling_interval"] == 0.25

    distributed = Settings(data_dir=tmp_path, broker_url="redis://127.0.0.1:6379/0")
    options = broker_transport_options(distributed)
    assert "polling_interval" not in options
    assert options["visibility_timeout"] == broker_transport_options(embedded)["visibility_timeout"]


def test_the_setting_is_read_from_the_environment_and_refused_when_not_a_positive_number(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTSEARCH_EMBEDDED_POLL_S", "0.05")
    assert Settings(data_dir=tmp_path).embedded_poll_s == 0.05
    for bad in ("0", "-1", "ten", "60"):
        monkeypatch.setenv("AGENTSEARCH_EMBEDDED_POLL_S", bad)
        with pytest.raises(ValidationError, match="embedded_poll_s"):
            Settings(data_dir=tmp_path)


def test_the_celery_apps_conf_gives_kombus_memory_transport_the_interval_and_a_redis_app_none(monkeypatch, tmp_path):
    from agentsearch.worker import app as worker_app

    monkeypatch.setattr(worker_app, "get_settings", lambda: Settings(data_dir=tmp_path))
    # A worker's SIGTERM remap is set for a distributed app: the test's process keeps its own.
    monkeypatch.setenv("REMAP_SIGTERM", "SIGTERM")
    try:
        memory = worker_app.create_app()
        with memory.connection_for_read() as connection:
            assert isinstance(connection.transport, memory_broker.Transport)
            assert connection.transport.polling_interval == Settings(data_dir=tmp_path).embedded_poll_s
        # Nothing in the process receives task events (Flower reads them from a broker it can reach).
        assert not memory.conf.worker_send_task_events and not memory.conf.task_send_sent_event

        monkeypatch.setattr(worker_app, "get_settings", lambda: Settings(
            data_dir=tmp_path, broker_url="redis://127.0.0.1:6379/0"))
        redis = worker_app.create_app()
        # kombu's, one client per channel
        assert redis.conf.broker_transport == "agentsearch.worker.redis_broker:Transport"
        assert redis.conf.worker_send_task_events and redis.conf.task_send_sent_event  # for Flower
        assert "polling_interval" not in redis.conf.broker_transport_options
        assert redis.conf.broker_transport_options["socket_timeout"] == 5.0
    finally:
        worker_app.app.set_current()  # a new Celery app makes itself this thread's current one


def test_a_job_of_four_hops_waits_far_less_than_a_poll_of_kombus_default_between_its_steps(app, client):
    """language_detector, core_search, generate_answer and assemble: four tasks, four hops (the first from the
    API). With kombu's sleep of a second each hop after the first waited nearly a second (the worker thread went to
    sleep as the step before began): 2.8 s in all beside the steps' own times when measured. The setting's default
    is that second again, so the job ends well within it only because each publish wakes a worker thread; a job of
    three hops waits about 25 ms in all when measured, the bound is forty times that, for a loaded machine."""
    collection_id = client.post("/v1/collections", json={"name": "hops"}).json()["id"]
    submitted = client.post("/v1/search", json={"collection_id": collection_id, "query": "What is the notice period?",
                                                "agents": ["language_detector"], "use_cache": False})
    assert submitted.status_code == 202, submitted.text
    deadline = time.monotonic() + 30
    while (job := client.get(f"/v1/jobs/{submitted.json()['job_id']}").json())["status"] not in TERMINAL:
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    assert job["status"] == "succeeded", job.get("error")
    assert set(job["timings_ms"]) >= {"pre_search", "core_search", "answer"}, job["timings_ms"]
    end_to_end_s = (datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["created_at"])
                    ).total_seconds()
    waited_s = end_to_end_s - sum(job["timings_ms"].values()) / 1000
    assert waited_s < KOMBU_POLL_S, (end_to_end_s, job["timings_ms"])


def _consumer(connection, queue_name: str, received: list, ack: bool = True, prefetch: int | None = None):
    from kombu import Consumer, Queue

    def on_message(body, message) -> None:
        received.append((time.monotonic(), body, message))
        if ack:
            message.ack()

    channel = connection.channel()
    if prefetch is not None:
        channel.basic_qos(0, prefetch, False)
    consumer = Consumer(channel, [Queue(queue_name)], callbacks=[on_message], accept=["json"])
    consumer.consume()
    return consumer


def test_a_publish_wakes_a_consumer_waiting_on_empty_queues_long_before_its_polling_interval():
    """The consumer waits with a polling interval of 5 s: kombu's transport would deliver the message only after
    that sleep. The publish, from another connection as from another thread of the API, wakes it."""
    from kombu import Connection

    queue_name = f"bell-{time.monotonic_ns()}"
    received: list = []
    options = {"polling_interval": 5.0}
    with Connection("memory://", transport=memory_broker.Transport, transport_options=options) as consumer_side, \
            Connection("memory://", transport=memory_broker.Transport) as publisher_side:
        consumer = _consumer(consumer_side, queue_name, received)
        publisher = publisher_side.Producer(serializer="json")

        def publish_later() -> None:
            time.sleep(0.2)  # the consumer is waiting by then
            publisher.publish({"n": 1}, routing_key=queue_name, declare=[consumer.queues[0]])

        sender = threading.Thread(target=publish_later)
        started = time.monotonic()
        sender.start()
        consumer_side.drain_events(timeout=10)
        sender.join()
    assert [body for _, body, _ in received] == [{"n": 1}]
    assert received[0][0] - started < 2.5, "delivered only after the polling interval: no publish woke the consumer"


def test_an_ack_wakes_a_consumer_whose_prefetch_window_was_full():
    """A worker takes one message at a time (``worker_prefetch_multiplier=1``): with a message waiting and its
    window full, it may take the next only once the one it holds is acked, from the thread that ran the task."""
    from kombu import Connection

    queue_name = f"window-{time.monotonic_ns()}"
    received: list = []
    with Connection("memory://", transport=memory_broker.Transport,
                    transport_options={"polling_interval": 5.0}) as connection:
        consumer = _consumer(connection, queue_name, received, ack=False, prefetch=1)
        publisher = connection.Producer(serializer="json")
        for n in (1, 2):
            publisher.publish({"n": n}, routing_key=queue_name, declare=[consumer.queues[0]])
        connection.drain_events(timeout=1)
        assert [body for _, body, _ in received] == [{"n": 1}]

        def ack_later() -> None:
            time.sleep(0.2)  # the consumer waits with its window full by then
            received[0][2].ack()

        acker = threading.Thread(target=ack_later)
        started = time.monotonic()
        acker.start()
        connection.drain_events(timeout=10)
        acker.join()
    assert [body for _, body, _ in received] == [{"n": 1}, {"n": 2}]
    assert received[1][0] - started < 2.5, "taken only after the polling interval: the ack woke no one"


def test_a_consumer_whose_wait_times_out_raises_the_timeout_celery_expects():
    from kombu import Connection

    with Connection("memory://", transport=memory_broker.Transport,
                    transport_options={"polling_interval": 5.0}) as connection:
        _consumer(connection, f"quiet-{time.monotonic_ns()}", [])
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            connection.drain_events(timeout=0.2)
    assert time.monotonic() - started < 2.5  # the timeout bounds the wait, not the polling interval


def test_the_bell_misses_no_ring_between_a_look_and_the_wait():
    bell = memory_broker.Bell()
    seen = bell.rings
    bell.ring()  # rung after the look, before the wait: the wait returns at once
    assert bell.wait(seen, timeout_s=5.0)
    assert not bell.wait(bell.rings, timeout_s=0.01)
