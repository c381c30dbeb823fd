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


def test_builder_installs_the_makefiles_torch_from_the_cpu_index_a_build_argument(stages):
    builder, runtime = stages[0], stages[-1]
    assert len(stages) >= 2
    assert build_arg_default("TORCH_INDEX") == TORCH_CPU_INDEX
    (torch_install,) = [r for r in args_of(builder, "RUN") if "torch==${TORCH_VERSION}" in r]
    assert '--index-url "$TORCH_INDEX"' in torch_install
    makefile_pin = re.search(r"torch==([\d.]+)", (REPO / "Makefile").read_text()).group(1)
    assert build_arg_default("TORCH_VERSION") == makefile_pin
    assert not any("torch" in r for r in args_of(runtime, "RUN")), "the runtime stage must not pip install"


def test_every_index_the_build_reads_is_a_build_argument(stages):
    """A mirror or an offline wheelhouse must work without editing the file: no RUN names an index itself, every
    pip install names one by a build argument, and searches the wheelhouse first."""
    runs = [r for stage in stages for r in args_of(stage, "RUN")]
    assert not [r for r in runs if re.search(r"https?://", r)], "an index written into a RUN"
    installs = [part for r in runs for part in r.split("&&") if "pip install" in part]
    assert installs
    for install in installs:
        assert re.search(r'--index-url "\$(PIP_INDEX|TORCH_INDEX)"', install), install
        assert "--find-links /wheelhouse" in install and "$offline" in install, install
    assert build_arg_default("PIP_INDEX").startswith("https://")
    assert build_arg_default("WHEELHOUSE_ONLY") == "false"
    assert not any(line.startswith("# syntax=") for line in (REPO / "Dockerfile").read_text().splitlines()), \
        "a syntax directive makes BuildKit pull its frontend from a registry"


def test_the_runtime_stage_gets_no_torch(stages):
    """torch exports the ONNX model in the builder and leaves the venv before the runtime stage copies it."""
    runs = args_of(stages[0], "RUN")
    (export,) = [i for i, r in enumerate(runs) if "onnx_export" in r]
    uninstall = [i for i, r in enumerate(runs) if "pip uninstall -y torch" in r]
    assert uninstall and uninstall[-1] >= export
    assert runs[uninstall[-1]].index("pip uninstall -y torch") > runs[uninstall[-1]].index("onnx_export") \
        if uninstall[-1] == export else True
    assert not any("pip install" in r and "torch" in r for r in runs[uninstall[-1] + 1:])
    copies = [c for c in stages[-1] if c.cmd == "COPY" and "--from=builder" in c.flags]
    assert {c.value[0] for c in copies} == {"/opt/venv", "/opt/models"}


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
    find = project["tool"]["setuptools"]["packages"]["find"]
    # The packages are found under these folders (a src/ layout): the builder copies each of them whole.
    copied = {source.rstrip("/") for c in stages[0] if c.cmd == "COPY" for source in c.value[:-1]}
    assert set(find["where"]) <= copied, f"pip install . in the image would miss {set(find['where']) - copied}"
    assert find["include"] == ["agentsearch*"]
    assert {"pyproject.toml", "README.md"} <= copied


def compiles(run: str, where: str) -> bool:
    """Whether the shell of ``run`` compiles the bytecode of sysconfig's ``where`` (``purelib``: the venv's
    site-packages, the project installed into it; ``stdlib``), hash-based and unchecked."""
    return ("-m compileall" in run and "--invalidation-mode unchecked-hash" in run
            and f'sysconfig.get_path("{where}")' in run)


def removes_bytecode(run: str) -> bool:
    return "__pycache__" in run or ".pyc" in run


def test_the_bytecode_is_compiled_into_the_image_where_no_process_may_write_it(stages):
    """The runtime user may not write into /opt/venv nor the interpreter's library: without bytecode compiled at
    build time, every process, and every file's parsing child, compiles what it imports at each start."""
    builder, runtime = stages[0], stages[-1]
    runs = args_of(builder, "RUN")
    # The project's install
    (install,) = [i for i, r in enumerate(runs) if "--constraint /opt/torch-constraint.txt" in r]
    compiled = [i for i, r in enumerate(runs) if compiles(r, "purelib")]
    assert compiled and compiled[-1] >= install, "the venv's bytecode is not compiled after the project is installed"
    last = runs[compiled[-1]]
    if compiled[-1] == install:  # in the install's own RUN: after its pip install and after its removal of caches
        assert last.index("-m compileall") > last.rindex("pip install")
        if removes_bytecode(last):
            assert last.index("-m compileall") > last.rindex("__pycache__")
    assert not any(removes_bytecode(r) for r in runs[compiled[-1] + 1:]), "bytecode removed after it was compiled"
    assert any(c.cmd == "COPY" and "--from=builder" in c.flags and c.value[0] == "/opt/venv" for c in runtime)
    # The interpreter's own library, as root: before the stage's USER, and nothing removes it after.
    first_user = next(i for i, c in enumerate(runtime) if c.cmd == "USER")
    stdlib = [i for i, c in enumerate(runtime) if c.cmd == "RUN" and compiles(" ".join(c.value), "stdlib")]
    assert stdlib and stdlib[0] < first_user, "the interpreter's library is not compiled as root"
    assert not any(removes_bytecode(r) for r in args_of(runtime, "RUN"))
    # A cache prefix would send every import to another directory, where no bytecode was compiled.
    assert not any("PYTHONPYCACHEPREFIX" in " ".join(c.value) for s in stages for c in s if c.cmd in ("ENV", "ARG"))
