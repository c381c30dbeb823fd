"""Shared fixtures for the unit suite: no servers, no environment leaking in.

The tests stand in folders that mirror the code (``agents/``, ``retrieval/``, ``job/``...), packages of ``tests``,
so two modules of one name in two folders do not clash. This directory is put on ``sys.path`` as well, at its end:
``agentsearch_test_agents`` (the agent classes the tests register) is then importable by its plain module name, which
is what ``AgentRegistry.discover(extra_modules=...)`` needs, and a folder such as ``src/agentsearch/api/`` here never
hides the project's package of that name.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import fakeredis
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))

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


@pytest.fixture
def collection_id(migrated_db) -> uuid.UUID:
    """A collection of the local user in ``migrated_db``."""
    from agentsearch.pipeline.platform.tables.collections import CollectionRow
    from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID

    with migrated_db.session() as s:
        row = CollectionRow(name="c", user_id=DEFAULT_USER_ID, embedding_model="m")
        s.add(row)
        s.flush()
        return row.id


@pytest.fixture
def install_services():
    """Makes a test's ``Services`` this process's (what tasks called in process get from ``get_services``), and
    puts back the one before when the test ends."""
    from agentsearch.pipeline.services import use_services

    replaced = []

    def install(services):
        replaced.append(use_services(services))
        return services

    yield install
    if replaced:
        use_services(replaced[0])


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The embedded app (SQLite in a temporary directory, in-process Celery worker threads), one per test module:
    starting and stopping its worker costs about two seconds. It gets its own services; whatever services the tests
    before it left come back afterwards."""
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.services import reset_services, use_services

    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.upper().startswith("AGENTSEARCH_"):
                mp.delenv(name)
        mp.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path_factory.mktemp("agentsearch-api")))
        get_settings.cache_clear()
        previous = use_services(None)
        reset_services()

        from agentsearch.api.app import (
            create_app,  # imported late: the worker's Celery app reads the settings at import time
        )

        application = create_app()
        assert application.state.services.settings.embedded
        try:
            yield application
        finally:
            application.state.services.close()
            use_services(previous)
            get_settings.cache_clear()


@pytest.fixture(scope="module")
def client(app):
    """A client of the embedded app, signed in as a user of its own; its lifespan runs the migrations and the
    embedded worker."""
    from fastapi.testclient import TestClient

    from agentsearch.pipeline.security.users import UserStore

    with TestClient(app) as c:
        _, key = UserStore(app.state.services.db).create(f"api-{uuid.uuid4().hex[:8]}")
        c.headers["Authorization"] = f"Bearer {key}"
        yield c


@pytest.fixture
def make_runner(tmp_path, redis_client):
    """``make_runner(Echo, Broken, metrics=...)``: an ``AgentRunner`` of those agent classes on the test's fake Redis,
    with default settings."""
    from agentsearch.pipeline.agents.registry import AgentRegistry
    from agentsearch.pipeline.agents.runner import AgentRunner
    from agentsearch.pipeline.platform.settings import Settings

    def make(*agents, **kwargs) -> AgentRunner:
        return AgentRunner(AgentRegistry(list(agents)), redis_client, Settings(data_dir=tmp_path), **kwargs)

    return make
