"""The previous release's code from git, in a directory of its own: what runs it beside the current code.

No worktree is registered: ``git archive`` of the release, unpacked. A checkout without the release in its history
(a shallow clone) skips the test that asks.

Usage::

    tree = release_tree(tmp_path / "release")        # then PYTHONPATH=tree, or capture.py --tree tree
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devstack import REPO
from tests.support.previous_release.messages import PREVIOUS_RELEASE


def release_tree(directory: Path) -> Path:
    archive = subprocess.run(["git", "archive", PREVIOUS_RELEASE], cwd=REPO, capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"release {PREVIOUS_RELEASE} is not in this checkout's history (a shallow clone)")
    directory.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory
