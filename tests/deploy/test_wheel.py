"""The wheel as a user installs it: built from the tree, installed into a fresh virtual environment, then
``agentsearch --help`` and ``agentsearch demo`` run from a directory that holds nothing of the repository.

What it proves: one top-level package (``agentsearch``) and nothing else; the console's files, the migrations and the
demo's corpus inside it; the console script and the agents' entry points resolving to the installed modules; the
embedded job (SQLite migrated to head, Milvus Lite, Celery threads) running from the installed files alone.

The fresh environment borrows the libraries of the environment running the suite through a ``.pth`` file (installing
torch and the rest again would take minutes) but nothing of agentsearch: the test venv's own install of the project
is an editable finder, which a ``.pth``-added directory never runs, and ``pip check`` confirms every requirement the
wheel declares is met by what it sees.

Usage::

    .venv/bin/pytest -q tests/deploy/test_wheel.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}\n{said}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # A copy of the tracked tree, so the build's own build/ and egg-info never land in the checkout.
    source = tmp_path_factory.mktemp("source")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "--null", "-T", "-", "-cf", str(source / "tree.tar")], cwd=REPO, input=files, check=True)
    subprocess.run(["tar", "-xf", "tree.tar"], cwd=source, check=True)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), "."],
         cwd=source)
    (built,) = out.glob("agentsearch-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_env(wheel, tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=home).strip())
    (site / "borrowed-libraries.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)], cwd=home)
    return home


def test_the_wheel_holds_one_package_with_its_files(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"agentsearch"}, top
    for needed in ("agentsearch/api/console/index.html", "agentsearch/api/console/app.js",
                   "agentsearch/migrations/env.py", "agentsearch/migrations/script.py.mako",
                   "agentsearch/migrations/versions/0001_initial_schema.py",
                   "agentsearch/examples/sample_corpus.jsonl", "agentsearch/devstack/embedding-server.txt"):
        assert needed in names, needed
    assert not [n for n in names if "/bench/results/" in n], "the benchmarks' results stay in the repository"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "agentsearch = agentsearch.cli:main" in text
    assert "reranker = agentsearch.pipeline.agents.builtin.reranker:Reranker" in text


def test_the_installed_wheel_runs_help_and_the_demo_job(fresh_env, tmp_path):
    bin_dir = fresh_env / "bin"
    # A user's shell: none of the suite's settings, the embedded defaults, the data in a directory of its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSEARCH_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", AGENTSEARCH_DATA_DIR=str(tmp_path / "data"))
    where = _run([str(bin_dir / "python"), "-c", "import agentsearch; print(agentsearch.__file__)"], tmp_path, env)
    assert where.startswith(str(fresh_env)), f"agentsearch imported from {where}, not the installed wheel"
    _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "check"], tmp_path, env)

    assert "demo" in _run([str(bin_dir / "agentsearch"), "--help"], tmp_path, env)
    out = _run([str(bin_dir / "agentsearch"), "demo", "--out", str(tmp_path / "out")], tmp_path, env, timeout=900)
    assert "embedded" in out
    assert "Northwind" in out or "revenue" in out.lower(), out[-2000:]
    written = {p.suffix for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert {".pptx", ".pdf"} <= written, written
    assert (tmp_path / "data").is_dir(), "the embedded mode keeps its data where it was told"
