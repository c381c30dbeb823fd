"""The Celery settings at-least-once delivery depends on, the rule that work under way goes first, and how a
worker shares its cores."""

from __future__ import annotations

import os
from types import SimpleNamespace

import agentsearch.worker.app as worker_app
import agentsearch.worker.job_tasks as job_tasks
import agentsearch.worker.lifecycle as lifecycle
from agentsearch.pipeline.platform.settings import Settings


def test_delivery_settings_hold_together():
    conf = worker_app.app.conf
    settings = worker_app.get_settings()  # what the app was built with
    assert conf.task_acks_late and conf.task_reject_on_worker_lost and conf.worker_prefetch_multiplier == 1
    # Skipping a redelivered header task that stored its result could leave its chord one short forever.
    assert not conf.worker_deduplicate_successful_tasks
    visibility = conf.broker_transport_options["visibility_timeout"]
    # A running task must never be handed to a second worker, nor a job outlive the redelivery of its messages.
    assert visibility > worker_app.LONGEST_TASK_S + worker_app.LONGEST_RETRY_DELAY_S
    assert visibility > 2 * settings.job_deadline_s
    assert conf.result_expires > 2 * settings.job_deadline_s
    assert conf.worker_max_memory_per_child == settings.worker_max_memory_per_child_mb * 1024
    assert conf.worker_soft_shutdown_timeout == settings.worker_soft_shutdown_timeout_s > 0


def test_a_task_waits_out_a_redis_restart_inside_its_time_limits():
    """The result backend keeps trying about REDIS_OUTAGE_WAIT_S, each try within 1 s of the one before, and a task's
    soft limit leaves that wait beside its work: a chord's response agent that ended its 10 s of work while Redis
    restarted was cut by its 15 s soft limit (Celery's sleeps between tries grow to 10 s) and failed its job."""
    conf = worker_app.app.conf
    assert conf.result_backend_always_retry
    sleep_caps_ms = [min(conf.result_backend_max_sleep_between_retries_ms,
                         conf.result_backend_base_sleep_between_retries_ms * 2 ** n)
                     for n in range(1, conf.result_backend_max_retries + 1)]
    assert sum(sleep_caps_ms) / 2 / 1000 >= worker_app.REDIS_OUTAGE_WAIT_S  # each sleep is drawn from [0, cap]
    assert conf.result_backend_max_sleep_between_retries_ms <= 1000
    assert job_tasks.SOFT_LIMIT_MARGIN_S >= worker_app.REDIS_OUTAGE_WAIT_S + 5
    assert job_tasks.HARD_LIMIT_MARGIN_S > job_tasks.SOFT_LIMIT_MARGIN_S
    assert worker_app.LONGEST_TASK_S >= 3600 + job_tasks.HARD_LIMIT_MARGIN_S  # the visibility timeout is above it
    # A step running when the broker connection drops runs on; cancelled, its agent would be called again.
    assert conf.worker_cancel_long_running_tasks_on_connection_loss is False


def test_messages_sent_from_outside_a_task_yield_to_steps_of_jobs_under_way(monkeypatch):
    monkeypatch.setattr(worker_app.app.conf, "broker_url", "redis://127.0.0.1:6379/0")
    new_job, next_step, chosen = {}, {}, {"priority": 3}
    worker_app._work_under_way_goes_first(headers={"parent_id": None}, properties=new_job)
    worker_app._work_under_way_goes_first(headers={"parent_id": "a-running-task"}, properties=next_step)
    worker_app._work_under_way_goes_first(headers={"parent_id": None}, properties=chosen)
    assert new_job == {"priority": worker_app.NEW_WORK_PRIORITY}
    assert next_step == {} and chosen == {"priority": 3}


def test_other_brokers_keep_their_own_order(monkeypatch):
    monkeypatch.setattr(worker_app.app.conf, "broker_url", "amqp://guest@localhost//")
    properties = {}
    worker_app._work_under_way_goes_first(headers={"parent_id": None}, properties=properties)
    assert properties == {}  # on RabbitMQ a higher number means more urgent: 9 would do the opposite


def test_pool_processes_share_the_cores_unless_the_operator_chose(monkeypatch):
    monkeypatch.setattr(lifecycle, "_model_threads", None)
    monkeypatch.setattr(lifecycle, "get_settings", lambda: Settings(broker_url="redis://127.0.0.1:6379/0"))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    lifecycle._share_cores(sender=SimpleNamespace(concurrency=2))
    assert lifecycle._model_threads == max(1, len(os.sched_getaffinity(0)) // 2)
    monkeypatch.setattr(lifecycle, "_model_threads", None)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    lifecycle._share_cores(sender=SimpleNamespace(concurrency=2))
    assert lifecycle._model_threads is None
