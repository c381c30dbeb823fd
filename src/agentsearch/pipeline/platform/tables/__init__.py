"""The database's tables, a module per domain; every mapped class is named ``...Row`` (``JobRow``, ``UserRow``).

Import a table from its domain's module (``from agentsearch.pipeline.platform.tables.jobs import JobRow``). Importing
any of them loads them all (below), so ``agentsearch.pipeline.platform.db.Base.metadata`` always holds every table:
their foreign keys name one another's tables, and Alembic (``src/agentsearch/migrations/env.py``) compares that one
metadata with the migrations.
"""

# Loaded for the metadata, not re-exported.
from agentsearch.pipeline.platform.tables import (  # noqa: F401
    agentic,
    agents,
    answers,
    audit,
    collections,
    conversations,
    jobs,
    quality,
    sources,
    teams,
    users,
    webhooks,
)
