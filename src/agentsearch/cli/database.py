"""The database the operator commands (``users``, ``tools``) write, straight, not through the API.

Usage::

    store = UserStore(operator_database())

In embedded mode the schema is brought to head first: on a fresh machine ``agentsearch users create`` is often the
first command run, before any ``agentsearch api``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentsearch.pipeline.platform.settings import get_settings

if TYPE_CHECKING:
    from agentsearch.pipeline.platform.db import Database


def operator_database() -> Database:
    # Imported here: SQLAlchemy and Alembic take half a second to load, which `agentsearch --help`, `search` and
    # `ingest` would pay for nothing.
    from agentsearch.migrations import upgrade
    from agentsearch.pipeline.platform.db import Database

    settings = get_settings()
    if settings.embedded:
        settings.ensure_data_dir()
        upgrade(settings.resolved_database_url)
    return Database(settings.resolved_database_url)
