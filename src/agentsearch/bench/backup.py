"""Reindex chunks per second, and backup and restore time, on the SciFact corpus (docs/operations.md).

A fresh PostgreSQL database at the schema's head (``agentsearch.bench.retention.scratch_database``) holds the SciFact
abstracts as one collection's indexed documents, written straight into the table as ingestion leaves them; Milvus is a
``milvus-lite server`` of its own, empty: the state after Milvus lost its data. Timed, with the service's default
settings, in this process:

- the reindex of the first ``--reindex-docs`` abstracts, a collection of their own
  (``agentsearch.pipeline.operations.reindex``);
- the backup of the whole database (``pg_dump -Fc`` and the manifest: ``agentsearch.pipeline.operations.backup``);
- its restore into another fresh database, checksums checked first and rows counted after.

    agentsearch bench backup --reindex-docs 1000 --json backup.json
"""

from __future__ import annotations

import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from agentsearch.bench.common import SCIFACT
from agentsearch.bench.retention import scratch_database
from agentsearch.devstack import free_port, start_milvus_lite, stop_process
from agentsearch.pipeline.operations.backup import make_backup, restore_backup
from agentsearch.pipeline.operations.reindex import reindex_collection
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.services import Services

# Documents inserted a transaction while seeding.
SEED_CHUNK = 1000


def measure(reindex_docs: int, corpus: Path = SCIFACT / "corpus.jsonl") -> dict[str, Any]:
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus

    documents = load_beir_corpus(corpus)
    with scratch_database(sqlite=False) as (db, _), scratch_database(sqlite=False) as (target, _), \
            tempfile.TemporaryDirectory(prefix="bench-backup-") as tmp:
        seed(db, "scifact", documents)
        subset = seed(db, "scifact-reindexed", documents[:reindex_docs])
        port = free_port()
        milvus = start_milvus_lite(Path(tmp) / "milvus", port, {}, Path(tmp) / "milvus.log")
        try:
            services = Services(Settings(database_url=db.url, milvus_uri=f"http://127.0.0.1:{port}")).use(db=db)
            rebuilt = reindex_collection(services, subset)
        finally:
            stop_process(milvus)
        started = time.perf_counter()
        manifest = make_backup(db.url, Path(tmp) / "backup")
        backup_s = time.perf_counter() - started
        target.dispose()
        restore_url = target.url
        _drop_tables(target)  # scratch_database made it at head; a restore goes into an empty one
        started = time.perf_counter()
        restore_backup(Path(tmp) / "backup", restore_url)
        restore_s = time.perf_counter() - started
    return {
        "corpus_documents": len(documents),
        "reindex": {"documents": rebuilt.documents, "chunks": rebuilt.chunks, "seconds": round(rebuilt.seconds, 2),
                    "chunks_per_s": round(rebuilt.chunks_per_s, 2)},
        "backup": {"seconds": round(backup_s, 2), "bytes": sum(f["bytes"] for f in manifest["files"].values()),
                   "rows": sum(manifest["rows"].values()), "documents": manifest["rows"]["documents"]},
        "restore": {"seconds": round(restore_s, 2)},
    }


def seed(db: Database, name: str, documents: list[dict]) -> uuid.UUID:
    """A collection of the local user holding ``documents`` as indexed rows; its id."""
    collection_id = uuid.uuid4()
    # Long enough ago that the reindex has no document changed during it to catch up.
    now = utcnow() - timedelta(hours=1)
    with db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name=name,
                         embedding_model=Settings().embedding_model))
    for start in range(0, len(documents), SEED_CHUNK):
        with db.session() as s:
            s.execute(insert(DocumentRow), [
                {"id": uuid.uuid4(), "collection_id": collection_id, "external_id": d["id"], "title": d["title"],
                 "text": d["text"], "metadata_": {}, "status": "indexed", "queued_at": now, "finished_at": now,
                 "created_at": now, "updated_at": now}
                for d in documents[start:start + SEED_CHUNK]])
    return collection_id


def _drop_tables(db: Database) -> None:
    from sqlalchemy import text

    with db.engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    db.dispose()
