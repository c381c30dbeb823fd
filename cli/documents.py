"""``agentsearch ingest``: documents from a file into a collection, through the API.

Usage::

    agentsearch ingest docs.jsonl --collection handbook     # {"id", "title", "text", "metadata"} per line
    agentsearch ingest notes.md --collection handbook       # .txt / .md / .pdf: the file is one document

The whole file is checked before the first document is sent (``documents_or_fail``), so a refused file leaves nothing
half-ingested and a fixed one can simply be sent again.
"""

from __future__ import annotations

from pathlib import Path

import click

from cli.client import ApiError
from cli.errors import fail
from cli.session import api_session
from pipeline.platform.settings import get_settings


def documents_or_fail(path: Path) -> list[dict]:
    """Every document of the file as the API takes it, or ``fail`` naming the file and what is wrong with it."""
    # Imported here: the readers (PDF, Markdown) take most of a second to load, which no other command needs.
    from pipeline.ingest import IngestError, read_documents

    if not path.is_file():
        fail(f"{path}: no such file")
    try:
        return [d.model_dump() for d in read_documents(path)]
    except (IngestError, UnicodeDecodeError) as exc:
        fail(f"{path}: {exc}")


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--collection", "collection_name", required=True, help="Collection name (created when missing).")
def ingest(file: Path, collection_name: str) -> None:
    """Ingest documents: JSON Lines (id, title, text, optional metadata per line), or one .txt / .md / .pdf file."""
    documents = documents_or_fail(file)
    try:
        with api_session(get_settings()) as client:
            collection = client.ensure_collection(collection_name)
            client.add_documents(collection["id"], documents)
            with click.progressbar(length=len(documents), label=f"indexing {len(documents)} documents") as bar:
                done = [0]

                def progress(counts: dict) -> None:
                    finished = min(len(documents), counts["indexed"] + counts["failed"])
                    bar.update(max(0, finished - done[0]))
                    done[0] = max(done[0], finished)

                final = client.wait_indexed(collection["id"], on_progress=progress)
    except ApiError as exc:
        fail(str(exc))
    counts = final["documents"]
    click.echo(f"collection {collection_name} ({final['id']}): {counts['indexed']} indexed, {counts['failed']} failed")
