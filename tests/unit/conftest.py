"""Shared fixtures for the unit suite: no servers, no environment leaking in.

``tests/`` is not a package, so this directory is put on ``sys.path``: ``agentsearch_test_agents`` (the agent
classes the tests register) is then importable by its plain module name, which is what
``AgentRegistry.discover(extra_modules=...)`` needs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import fakeredis
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

SAMPLE_MODULE = "agentsearch_test_agents"


@pytest.fixture(autouse=True)
def _no_agentsearch_env(monkeypatch):
    """Settings must come from the test, never from AGENTSEARCH_* variables of the shell that runs pytest."""
    for name in list(os.environ):
        if name.upper().startswith("AGENTSEARCH_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_server():
    return fakeredis.FakeServer()


@pytest.fixture
def redis_client(fake_server):
    return fakeredis.FakeRedis(server=fake_server)
