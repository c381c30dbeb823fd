"""The previous release's code from git, in a directory of its own: what runs it beside the current code.

No worktree is registered: ``git archive`` of the release, unpacked. A checkout without the release in its history
(a shallow clone) skips the test that asks.

The release's processes share this checkout's virtual environment, whose installed metadata names this checkout's
entry points: the built-in agents, found by entry point, moved since the release
(``agentsearch.pipeline.agents.builtin``). So the tree carries the release's own metadata (a ``.dist-info`` made from
its ``pyproject.toml``): on the ``PYTHONPATH``, before the environment's, it is the one ``importlib.metadata`` finds, as
the release's own install would be.

The release's command is its own console script, found through that metadata (``release_command``): the
environment's ``agentsearch`` script imports this checkout's package, whatever the ``PYTHONPATH``.

Usage::

    tree = release_tree(tmp_path / "release")        # then PYTHONPATH=tree, or capture.py --tree tree
    start_process([*release_command(), "worker", ...], {**env, "PYTHONPATH": str(tree)}, log)
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentsearch.devstack import REPO
from tests.support.previous_release.messages import PREVIOUS_RELEASE


def release_tree(directory: Path) -> Path:
    archive = subprocess.run(["git", "archive", PREVIOUS_RELEASE], cwd=REPO, capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"release {PREVIOUS_RELEASE} is not in this checkout's history (a shallow clone)")
    directory.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    _own_metadata(directory)
    return directory


def release_command() -> list[str]:
    """``agentsearch`` as the release declares it (``[project.scripts]``), run with ``PYTHONPATH`` set to its tree."""
    load = ("import sys; from importlib.metadata import entry_points; sys.argv[0] = 'agentsearch'; "
            "sys.exit(entry_points(group='console_scripts')['agentsearch'].load()())")
    return [sys.executable, "-c", load]


def _own_metadata(directory: Path) -> None:
    """The release's distribution metadata, as installing it would write: its name, version and entry points."""
    project = tomllib.loads((directory / "pyproject.toml").read_text())["project"]
    info = directory / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()) + "\n"
        for group, points in groups.items() if points))
