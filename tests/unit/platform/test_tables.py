"""The tables: a module per domain under ``agentsearch.pipeline.platform.tables``, every mapped class named ``...Row``,
and the one metadata Alembic's environment compares with the migrations holding every table, as the migrations made
it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

import agentsearch.pipeline.platform.tables  # noqa: F401  (every table, as src/agentsearch/migrations/env.py loads them)
from agentsearch.pipeline.platform.db import Base

REPO = Path(__file__).resolve().parents[3]
TABLES = REPO / "src" / "agentsearch" / "pipeline" / "platform" / "tables"


def test_every_mapped_class_is_a_row_of_its_domain_module():
    mappers = list(Base.registry.mappers)
    assert len(mappers) == len(Base.metadata.tables) > 20
    domains = {p.stem for p in TABLES.glob("*.py")} - {"__init__"}
    for mapper in mappers:
        cls = mapper.class_
        assert cls.__name__.endswith("Row"), cls.__name__
        package, _, domain = cls.__module__.rpartition(".")
        assert package == "agentsearch.pipeline.platform.tables" and domain in domains, cls.__module__


def test_the_migrations_environment_sees_every_table(tmp_path):
    """``alembic check`` through ``src/agentsearch/migrations/env.py``, in a fresh interpreter (nothing imported
    beforehand): its
    autogenerate finds nothing to add or drop, so its one metadata holds every table the migrations made."""
    url = f"sqlite:///{tmp_path / 'agentsearch.db'}"
    code = ("import sys; from alembic import command; from agentsearch.migrations import alembic_config, upgrade; "
            "upgrade(sys.argv[1]); command.check(alembic_config(sys.argv[1]))")
    checked = subprocess.run([sys.executable, "-c", code, url], cwd=REPO, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr[-2000:]


def test_the_tables_match_the_migrations(migrated_db):
    """The migrations' head and the models agree: every table, column and index of one is in the other."""
    with migrated_db.engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) - {"alembic_version"} == set(Base.metadata.tables)
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    structural = [d for d in diff if isinstance(d, tuple) and d[0] in
                  ("add_table", "remove_table", "add_column", "remove_column", "add_index", "remove_index")]
    assert structural == []
