"""What a partitioned Redis costs a caller, bounded: a publish to a broker that takes no connection and answers
nothing fails within the Redis timeout instead of waiting for good, and readiness answers within its bound while
a check hangs, and an answer stream stops reading from a Redis that went silent (docs/reliability.md, "Network
partitions"). The whole API against such a Redis is
``tests/integration/test_partitioned_redis.py``; the drill across hosts is ``tests/chaos/test_8_partition.py``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from types import SimpleNamespace

import pytest
import sqlalchemy
from fastapi import FastAPI
from fastapi.testclient import TestClient

import agentsearch.worker.app as worker_app
from agentsearch.api.answer_events import AnswerEvents
from agentsearch.api.routes import health
from agentsearch.pipeline.job.answer_stream import AnswerStreamReader
from agentsearch.pipeline.platform.kv import connect_async_redis
from agentsearch.pipeline.platform.settings import Settings
from tests.support.black_hole import black_hole


def test_the_broker_and_the_results_are_held_to_the_redis_timeout():
    assert worker_app.redis_timeouts(2.5, "socket_") == {"socket_timeout": 2.5, "socket_connect_timeout": 2.5,
                                                         "socket_keepalive": True}
    conf = worker_app.app.conf
    timeout_s = worker_app.get_settings().redis_timeout_s
    assert conf.broker_transport_options["socket_timeout"] == conf.redis_socket_timeout == timeout_s
    assert conf.broker_transport_options["socket_connect_timeout"] == conf.redis_socket_connect_timeout == timeout_s


def publish_in_a_thread(app, wait_s: float) -> tuple[list[BaseException], float, bool]:
    """Send a task with ``app`` from a thread, waiting at most ``wait_s`` for it: what it raised, how long it took,
    and whether it still waits."""
    outcome: list[BaseException] = []

    def publish() -> None:
        try:
            app.send_task("agentsearch.nothing", ignore_result=True)
        except Exception as exc:  # noqa: BLE001 - the failure is what the test waits for
            outcome.append(exc)

    started = time.monotonic()
    sender = threading.Thread(target=publish, daemon=True)
    sender.start()
    sender.join(wait_s)
    return outcome, time.monotonic() - started, sender.is_alive()


def test_a_publish_to_a_silent_broker_fails_within_its_timeouts(monkeypatch):
    with black_hole() as port:
        silent = f"redis://127.0.0.1:{port}"
        monkeypatch.setattr(worker_app, "get_settings", lambda: Settings(
            broker_url=f"{silent}/0", result_backend=f"{silent}/1", redis_timeout_s=0.5))
        app = worker_app.create_app()
        app.conf.task_publish_retry_policy = {"max_retries": 1, "interval_start": 0, "interval_step": 0.1,
                                              "interval_max": 0.1}
        outcome, took, waiting = publish_in_a_thread(app, 20)
        # Without the timeouts the publish waits on the silent connection for as long as the partition lasts.
        assert not waiting, "the publish still waits on a broker that answers nothing"
        assert outcome and took < 10
        app.close()


def test_the_apis_publish_gives_up_at_its_time_bound_however_long_each_try_waits(monkeypatch):
    """Behind a partition every try of a publish waits the Redis timeout before it fails, and kombu's tries nest (a
    failed publish reconnects with the tries left): counted in tries alone, the API's policy held a submission for
    seven timeouts and its sleeps, the whole 30 s cut of the partition drill. Its bound is in time."""
    bound_s, timeout_s = 0.5, 1.0
    with black_hole() as port:
        silent = f"redis://127.0.0.1:{port}"
        monkeypatch.setattr(worker_app, "get_settings", lambda: Settings(
            broker_url=f"{silent}/0", result_backend=f"{silent}/1", redis_timeout_s=timeout_s))
        monkeypatch.setattr(worker_app, "PUBLISH_WITHIN_S", bound_s, raising=False)
        app = worker_app.create_app()
        assert app.conf.task_publish_retry_policy is worker_app.PUBLISH_RETRY  # what the API publishes with
        outcome, took, _ = publish_in_a_thread(app, 30)
        assert outcome, "the publish did not fail"
        # The bound, then the try under way (a connect and its first read, a timeout each), with room for a loaded
        # machine; the tries alone took 6 s and more here.
        assert took < bound_s + 2 * timeout_s + 1.0, took
        app.close()


@pytest.fixture()
def hanging_redis_app():
    released = threading.Event()
    engine = sqlalchemy.create_engine("sqlite://")

    @contextlib.contextmanager
    def connection_for_write():
        yield SimpleNamespace(ensure_connection=lambda **_: None)

    app = FastAPI()
    app.include_router(health.router)
    app.state.services = SimpleNamespace(db=SimpleNamespace(engine=engine), redis=SimpleNamespace(
        ping=lambda: released.wait(30)))
    app.state.celery = SimpleNamespace(connection_for_write=connection_for_write)
    yield app
    released.set()
    engine.dispose()


def test_readiness_answers_in_time_while_a_check_hangs(hanging_redis_app):
    with TestClient(hanging_redis_app) as client:
        started = time.monotonic()
        response = client.get("/readyz")
        took = time.monotonic() - started
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "redis": "unavailable", "broker": "ok"}
    assert took < health.READY_WITHIN_S + 1.0, took


def test_an_answer_stream_stops_waiting_on_a_redis_gone_silent():
    async def read_a_while(events: AnswerEvents) -> list[str]:
        return [event async for event in events.wait(0.2)]

    with black_hole(connects=True) as port:
        events = AnswerEvents(AnswerStreamReader(connect_async_redis(f"redis://127.0.0.1:{port}/0", timeout_s=0.5),
                                                 "a-job"))
        started = time.monotonic()
        # Without a socket timeout the read waits on the connection for as long as the partition lasts.
        read = asyncio.run(asyncio.wait_for(read_a_while(events), 10))
        assert read == [] and not events.available  # the stream goes on from the job's row
        assert time.monotonic() - started < 3
