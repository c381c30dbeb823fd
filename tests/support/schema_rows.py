"""Rows for whatever schema a database has: read from the database itself, not from the current models.

``fill`` adds one row to each table of a reflected schema, its values made from the column types (a UUID, a
string within the column's length, a number, a time, a JSON object, bytes), each foreign key naming the row just
added to the table it points at; tables are filled parents first. ``insert_known`` adds hand-written rows cut to
the columns the schema has (a table it lacks, a row missing a column the schema requires, or one already there is
left out). ``snapshot`` reads rows back by their keys, one query a table, to compare before and after a migration.

Usage::

    with engine.begin() as conn:
        schema = reflect(conn)
        added = merged(fill(conn, schema), insert_known(conn, schema, {"users": [{"id": uid, "name": "ann", ...}]}))
        keys = primary_keys(schema)                   # {"jobs": ["id"], ...}
        before = snapshot(conn, added, keys)          # {("jobs", (UUID(...),)): {"id": ..., ...}, ...}
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import JSON, Connection, MetaData, Table, and_, inspect, select, text

Rows = dict[str, list[dict[str, Any]]]
_FILLED = itertools.count()
Key = tuple[str, tuple]


def reflect(conn: Connection) -> MetaData:
    metadata = MetaData()
    metadata.reflect(conn)
    return metadata


def value_for(table: Table, column, n: int) -> Any:
    """A value of the column's type; unique enough for a unique constraint (``n`` and a random part)."""
    try:
        kind = dict if isinstance(column.type, JSON) else column.type.python_type
    except NotImplementedError as exc:
        raise TypeError(f"{table.name}.{column.name}: no generic value for {column.type!r}; add one here") from exc
    tag = f"g{n}-{uuid.uuid4().hex}"
    if kind is uuid.UUID:
        return uuid.uuid4()
    if kind is str:
        length = getattr(column.type, "length", None)
        return tag[:length] if length else f"{tag} of {table.name}.{column.name}"
    if kind is bool:
        return True
    if kind is int:
        # Unique across calls too: a table filled again at a later step (its place ``n`` unchanged) must not repeat
        # an integer key it was given before.
        return n + 1 + 1000 * next(_FILLED)
    if kind is float:
        return n + 0.5
    if kind is datetime:
        moment = datetime.now(UTC) - timedelta(days=1, seconds=n)
        return moment if getattr(column.type, "timezone", False) else moment.replace(tzinfo=None)
    if kind is date:
        return date.today()
    if kind in (dict, list):
        return {"generic": tag, "n": n}
    if kind is bytes:
        return b"\x00generic\xff" + tag.encode()
    raise TypeError(f"{table.name}.{column.name}: no generic value for {column.type!r} ({kind}); add one here")


def primary_keys(metadata: MetaData) -> dict[str, list[str]]:
    return {name: [c.name for c in table.primary_key.columns] for name, table in metadata.tables.items()}


def fill(conn: Connection, metadata: MetaData) -> Rows:
    """One row in every table of the schema, parents first; the rows added, by table."""
    added: Rows = {}
    for n, table in enumerate(metadata.sorted_tables):
        if table.name == "alembic_version":
            continue
        row = {}
        for column in table.columns:
            parent = next(iter(column.foreign_keys), None)
            if parent is not None and parent.column.table.name in added:
                row[column.name] = added[parent.column.table.name][-1][parent.column.name]
            else:
                row[column.name] = value_for(table, column, n)
        conn.execute(table.insert().values(row))
        added[table.name] = [row]
    return added


def insert_known(conn: Connection, metadata: MetaData, rows: Rows) -> Rows:
    """``rows`` (in the order given: parents first) cut to the schema's columns; the rows inserted, as inserted."""
    inserted: Rows = {}
    for name, table_rows in rows.items():
        table = metadata.tables.get(name)
        if table is None:
            continue
        required = {c.name for c in table.columns if not c.nullable and c.server_default is None}
        keys = list(table.primary_key.columns)
        for row in table_rows:
            cut = {k: v for k, v in row.items() if k in table.columns}
            if not required <= cut.keys() or conn.execute(
                    select(*keys).where(and_(*(k == cut[k.name] for k in keys)))).first() is not None:
                continue
            conn.execute(table.insert().values(cut))
            inserted.setdefault(name, []).append(cut)
    return inserted


def merged(*groups: Rows) -> Rows:
    out: Rows = {}
    for group in groups:
        for name, rows in group.items():
            out.setdefault(name, []).extend(rows)
    return out


def snapshot(conn: Connection, rows: Rows, keys: dict[str, list[str]]) -> dict[Key, dict[str, Any] | None]:
    """Each row of ``rows`` as the database holds it now (every column the table has now), by table and primary
    key (``keys``, the tables' key columns); None for a row that is gone. A table that is gone is left out."""
    present = set(inspect(conn).get_table_names())
    found: dict[Key, dict[str, Any] | None] = {}
    for name, table_rows in rows.items():
        if name not in present:
            continue
        held = {tuple(r[k] for k in keys[name]): dict(r)
                for r in conn.execute(text(f'SELECT * FROM "{name}"')).mappings()}
        for row in table_rows:
            key = tuple(row[k] for k in keys[name])
            found[(name, key)] = held.get(key)
    return found
