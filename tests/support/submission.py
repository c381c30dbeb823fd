"""The services a job is submitted to without HTTP (``agentsearch.pipeline.job.submit``): SQLite in a temporary
directory, migrated, with the metrics on the test's fake Redis, and a collection of the default user to submit to.

Both are fixtures; a test module takes them in under their own names::

    from tests.support import submission

    services, collection_id = submission.services, submission.collection_id
"""

from __future__ import annotations

import uuid

import pytest

from agentsearch.pipeline.observability.metrics import MetricsRecorder
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.services import Services
from tests.support.databases import migrated_sqlite


@pytest.fixture
def services(tmp_path, redis_client):
    settings = Settings(data_dir=tmp_path)
    migrated_sqlite(settings.database_url)
    services = Services(settings).use(metrics=MetricsRecorder(redis_client))
    yield services
    services.close()


@pytest.fixture
def collection_id(services) -> uuid.UUID:
    collection_id = uuid.uuid4()
    with services.db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name="reports",
                         embedding_model=services.settings.embedding_model))
    return collection_id
