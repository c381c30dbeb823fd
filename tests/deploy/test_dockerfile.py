"""The Dockerfile, read by BuildKit's own parser (the `dockerfile` package). No image is built here: that needs a
Docker daemon and the network; these checks catch what breaks a build or a deployment before either."""

from __future__ import annotations

import re

import dockerfile
import pytest

from tests.deploy.conftest import REPO

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def stages() -> list[list[dockerfile.Command]]:
    """The instructions of each stage, in order."""
    result: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(REPO / "Dockerfile")):
        if command.cmd == "FROM":
            result.append([])
        if result:
            result[-1].append(command)
    return result


def args_of(stage, cmd: str) -> list[str]:
    return [" ".join(c.value) for c in stage if c.cmd == cmd]


def build_arg_default(name: str) -> str:
    for command in dockerfile.parse_file(str(REPO / "Dockerfile")):
        if command.cmd == "ARG" and command.value[0].startswith(f"{name}="):
            return command.value[0].split("=", 1)[1]
    raise AssertionError(f"no ARG {name}")


def test_builder_installs_the_makefiles_torch_from_the_cpu_index(stages):
    builder, runtime = stages[0], stages[-1]
    assert len(stages) >= 2
    runs = " ".join(args_of(builder, "RUN"))
    assert f"--index-url {TORCH_CPU_INDEX}" in runs
    makefile_pin = re.search(r"torch==([\d.]+)", (REPO / "Makefile").read_text()).group(1)
    assert build_arg_default("TORCH_VERSION") == makefile_pin
    assert not any("torch" in r for r in args_of(runtime, "RUN")), "the runtime stage must not pip install"


def test_runtime_copies_the_venv_and_runs_as_a_non_root_user(stages):
    runtime = stages[-1]
    copies = [c for c in runtime if c.cmd == "COPY"]
    assert any("--from=builder" in c.flags and c.value[0] == "/opt/venv" for c in copies)
    users = args_of(runtime, "USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("0", "root")
    assert any("espeak-ng" in r for r in args_of(runtime, "RUN"))


def test_runtime_has_a_healthcheck_and_forwards_signals(stages):
    runtime = stages[-1]
    (healthcheck,) = [c for c in runtime if c.cmd == "HEALTHCHECK"]
    assert "/healthz" in " ".join(healthcheck.value)
    # Compose and k8s replace CMD only; the entrypoint stays PID 1 and passes SIGTERM on (Celery's warm shutdown).
    (entrypoint,) = [c for c in runtime if c.cmd == "ENTRYPOINT"]
    assert entrypoint.value[0].endswith("tini")
    assert args_of(runtime, "CMD")[-1].startswith("agentsearch api")


def test_builder_copies_every_package_the_project_ships(stages):
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {source.rstrip("/") for c in stages[0] if c.cmd == "COPY" for source in c.value[:-1]}
    assert packages <= copied, f"pip install . in the image would miss {packages - copied}"
    assert {"pyproject.toml", "README.md"} <= copied
