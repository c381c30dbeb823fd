"""The embedded mode's hops: the memory broker's worker threads poll their empty queues every
``AGENTSEARCH_EMBEDDED_POLL_S`` instead of kombu's second, and a Redis broker is left as it was (kombu reads the
same option as its BRPOP timeout there).

kombu's default made each hop between two steps of a job wait up to a second: a job with no agents took 2.9 s from
submission to its end for 63 ms of steps, 106 ms with the new default (bench/results/embedded_job.md); a job is
timed here against that.

Usage::

    .venv/bin/python -m pytest tests/unit/test_embedded_hops.py -q
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from pydantic import ValidationError

from pipeline.job.store import TERMINAL
from pipeline.platform.settings import Settings
from worker.app import broker_transport_options

# kombu's sleep between two polls of an empty queue when no option sets it: what every hop waited before.
KOMBU_POLL_S = 1.0


def test_the_memory_broker_polls_its_queues_at_the_setting_and_redis_gets_no_polling_interval(tmp_path):
    embedded = Settings(data_dir=tmp_path)
    assert embedded.embedded and embedded.embedded_poll_s < KOMBU_POLL_S / 10
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
    from worker import app as worker_app

    monkeypatch.setattr(worker_app, "get_settings", lambda: Settings(data_dir=tmp_path))
    # A worker's SIGTERM remap is set for a distributed app: the test's process keeps its own.
    monkeypatch.setenv("REMAP_SIGTERM", "SIGTERM")
    try:
        memory = worker_app.create_app()
        with memory.connection_for_read() as connection:
            assert connection.transport.polling_interval == Settings(data_dir=tmp_path).embedded_poll_s

        monkeypatch.setattr(worker_app, "get_settings", lambda: Settings(
            data_dir=tmp_path, broker_url="redis://127.0.0.1:6379/0"))
        redis = worker_app.create_app()
        assert "polling_interval" not in redis.conf.broker_transport_options
        assert redis.conf.broker_transport_options["socket_timeout"] == 5.0
    finally:
        worker_app.app.set_current()  # a new Celery app makes itself this thread's current one


def test_a_job_of_four_hops_waits_far_less_than_a_poll_of_kombus_default_between_its_steps(app, client):
    """language_detector, core_search, generate_answer and assemble: four tasks, four hops (the first from the
    API). With kombu's second each hop after the first waited nearly a second (the worker thread went to sleep as
    the step before began): 2.8 s in all beside the steps' own times when measured; the bound is a third of that
    and about thirty times what a job of three hops waits with the setting's default (35 ms), for a loaded
    machine."""
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
