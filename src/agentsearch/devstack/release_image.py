"""The previous release's image, for the deploy drill's upgrade: its tree from git, built on the current image's
dependencies (``deploy/previous-release/Dockerfile`` says why not with the release's own Dockerfile).

Usage::

    build_image("agentsearch:0.1.0", log)                          # the current image first: its stages are reused
    tag = build_release_image("agentsearch:0.1.0", workdir, log)   # "77f5e0a": agentsearch:77f5e0a and its -standalone
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from agentsearch.devstack.docker_host import IMAGE_BUILD_ARGS, build, docker
from agentsearch.devstack.processes import REPO

# The last release that shipped, the one docs/operations.md promises an upgrade from: the same commit as
# tests/support/previous_release/messages.py, whose fixtures it wrote (tests/deploy checks that they agree).
PREVIOUS_RELEASE = "77f5e0a"
RELEASE_DOCKERFILE = REPO / "deploy" / "previous-release" / "Dockerfile"


def release_tree(directory: Path) -> Path:
    """The release's files (``git archive``, no worktree registered) in ``directory``, made anew."""
    archive = subprocess.run(["git", "archive", PREVIOUS_RELEASE], cwd=REPO, capture_output=True, timeout=120)
    if archive.returncode != 0:
        raise RuntimeError(f"release {PREVIOUS_RELEASE} is not in this checkout's history (a shallow clone?): "
                           f"{archive.stderr.decode(errors='replace')[-500:]}")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True, timeout=120)
    return directory


def build_release_image(current: str, workdir: Path, log: Path) -> str:
    """``agentsearch:<release>`` from the release's tree on the ``deps`` stage of ``current``'s build (tagged
    ``<current>-deps``: the build's cache makes it, no layer is built again), and ``<release>-standalone`` the
    current vector store image under the release's tag, as the no-registry override names it: the vector store is
    the stack's, not the release's. Returns the release's tag."""
    deps = f"{current}-deps"
    build(deps, REPO / "Dockerfile", REPO, IMAGE_BUILD_ARGS, log=log, target="deps")
    release = f"agentsearch:{PREVIOUS_RELEASE}"
    build(release, RELEASE_DOCKERFILE, release_tree(workdir / "previous-release"),
          {"DEPS_IMAGE": deps, "APP_IMAGE": current}, log=log)
    docker("tag", f"{current}-standalone", f"{release}-standalone")
    return PREVIOUS_RELEASE
