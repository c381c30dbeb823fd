"""``agentsearch reindex``: a collection's Milvus data rebuilt from the documents' text the database holds.

Usage::

    agentsearch reindex --collection handbook                 # one collection, by name or id
    agentsearch reindex --collection handbook --user alice    # a name that several users' collections have
    agentsearch reindex                                       # every collection
    rebuild(settings, database)                               # the same from another command (restore --reindex)

It runs in this process, with the service's settings (database, Milvus, model), and loads the embedding model here
(``agentsearch.pipeline.operations.reindex`` says why not on the workers). Searches go on meanwhile and read the old
index until the new one is complete. Embedded (SQLite and Milvus Lite files), run it while no other agentsearch process
has the data dir open: Milvus Lite's file takes one process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentsearch.cli.database import operator_database
from agentsearch.cli.errors import fail
from agentsearch.pipeline.platform.settings import get_settings

if TYPE_CHECKING:
    from agentsearch.pipeline.platform.db import Database
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.platform.tables.collections import CollectionRow


@click.command()
@click.option("--collection", "collection_ref", default=None,
              help="A collection's name or id; default every collection.")
@click.option("--user", "user_name", default=None, help="Whose collection --collection names, when several have it.")
def reindex(collection_ref: str | None, user_name: str | None) -> None:
    """Rebuild collections' Milvus data from the documents in the database (new index, then the switch)."""
    rebuild(get_settings(), operator_database(), collection_ref, user_name)


def rebuild(settings: Settings, database: Database, collection_ref: str | None = None,
            user_name: str | None = None) -> None:
    """Rebuild the chosen collections of ``database`` with a progress bar each, and say what each came to."""
    from agentsearch.pipeline.operations.reindex import ReindexBusy, reindex_collection
    from agentsearch.pipeline.services import Services

    collections = chosen_collections(database, collection_ref, user_name)
    services = Services(settings).use(db=database)
    for collection, documents in collections:
        with click.progressbar(length=documents, label=f"reindexing {collection.name} ({documents} documents)") as bar:
            done = [0]

            def progress(count: int, _chunks: int, bar=bar, done=done) -> None:
                bar.update(count - done[0])
                done[0] = count

            try:
                result = reindex_collection(services, collection.id, on_progress=progress)
            except ReindexBusy as exc:
                fail(f"collection {collection.name} ({collection.id}): {exc}")
        click.echo(f"collection {result.name} ({result.collection_id}): {result.documents} documents, "
                   f"{result.chunks} chunks in {result.seconds:.1f} s ({result.chunks_per_s:.0f} chunks/s); "
                   f"after the switch {result.caught_up} indexed again, {result.removed} removed; "
                   f"searched now: Milvus collection {result.generation}")


def chosen_collections(database: Database, ref: str | None, user_name: str | None) -> list[tuple[CollectionRow, int]]:
    """The collections to rebuild with their indexed documents, or ``fail`` saying why there are none."""
    import uuid

    from sqlalchemy import func, select

    from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
    from agentsearch.pipeline.platform.tables.users import UserRow

    query = (select(CollectionRow).join(UserRow, UserRow.id == CollectionRow.user_id)
             .order_by(UserRow.name, CollectionRow.name))
    if user_name is not None:
        query = query.where(UserRow.name == user_name)
    if ref is not None:
        try:
            query = query.where(CollectionRow.id == uuid.UUID(ref))
        except ValueError:
            query = query.where(CollectionRow.name == ref)
    with database.session() as s:
        found = s.scalars(query).all()
        if ref is not None and not found:
            fail(f"no collection {ref!r}" + (f" of user {user_name!r}" if user_name else ""))
        if ref is not None and len(found) > 1:
            owners = ", ".join(sorted(s.get_one(UserRow, c.user_id).name for c in found))
            fail(f"{len(found)} collections are named {ref!r} (users {owners}): say which with --user, or give its id")
        counts = dict(s.execute(select(DocumentRow.collection_id, func.count()).where(
            DocumentRow.status == "indexed").group_by(DocumentRow.collection_id)).all())
        return [(c, counts.get(c.id, 0)) for c in found]
