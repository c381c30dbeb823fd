"""The previous release's image of the deploy drill's upgrade (deploy/previous-release/Dockerfile,
src/agentsearch/devstack/release_image.py), checked without a Docker daemon: the release it builds is the one the
compatibility fixtures were captured from, its tree comes out of git as the release's, and its Dockerfile, read by
BuildKit's parser, installs that tree on the current build's dependencies and runs it as the current image runs."""

from __future__ import annotations

import tomllib

import dockerfile

from agentsearch.devstack import release_image
from tests.deploy.conftest import REPO
from tests.support.previous_release.messages import PREVIOUS_RELEASE


def test_the_drill_upgrades_from_the_release_the_fixtures_were_captured_from():
    assert release_image.PREVIOUS_RELEASE == PREVIOUS_RELEASE


def test_the_release_tree_is_the_release_s_own_code(tmp_path):
    tree = release_image.release_tree(tmp_path / "release")
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    # The release's layout: top-level packages, its console script at cli:main (src/ came later).
    assert project["scripts"]["agentsearch"] == "cli:main"
    assert (tree / "cli" / "__init__.py").is_file() and not (tree / "src").exists()
    # Made anew: a second call leaves no file of the first behind.
    (tree / "stale").write_text("")
    assert not (release_image.release_tree(tmp_path / "release") / "stale").exists()


def test_the_release_s_image_is_its_tree_on_the_current_dependencies_run_as_the_current_image():
    commands = dockerfile.parse_file(str(REPO / "deploy" / "previous-release" / "Dockerfile"))
    froms = [c.value[0] for c in commands if c.cmd == "FROM"]
    assert froms == ["${APP_IMAGE}", "${DEPS_IMAGE}"]
    args = {c.value[0].split("=")[0]: c.value[0].split("=")[1] for c in commands if c.cmd == "ARG"}
    # The default tags are those release_image.py builds: the current image and its deps stage.
    assert args == {"DEPS_IMAGE": "agentsearch:0.1.0-deps", "APP_IMAGE": "agentsearch:0.1.0"}
    install = next(c.value[0] for c in commands if c.cmd == "RUN")
    # Nothing is downloaded: the dependencies are the deps stage's.
    assert "--no-index" in install and "--no-deps" in install
    current = {c.cmd: c.value for c in dockerfile.parse_file(str(REPO / "Dockerfile")) if c.cmd in
               ("ENTRYPOINT", "USER")}
    own = {c.cmd: c.value for c in commands if c.cmd in ("ENTRYPOINT", "USER")}
    assert own == current
