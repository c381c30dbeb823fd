"""Fault drills on a real stack (``make chaos``). They take minutes, so the default collection skips them: they
run only with ``CHAOS=1`` in the environment, which the Makefile target sets."""

from __future__ import annotations

import os

import pytest

from tests.chaos.harness import ChaosStack

if os.environ.get("CHAOS") != "1":
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> ChaosStack:
    with ChaosStack(tmp_path_factory.mktemp("chaos")) as running:
        yield running
