"""``agentsearch ingest``: documents from a file into a collection, through the API.

Usage::

    agentsearch ingest docs.jsonl --collection handbook     # {"id", "title", "text", "metadata"} per line
    agentsearch ingest report.pdf --collection handbook     # any file the parsers read: one document, read by a worker
    agentsearch ingest pay.pdf --collection people/handbook --groups hr     # found by the team's group hr only

A JSON Lines file is checked whole before the first document is sent (``documents_or_fail``), so a refused file
leaves nothing half-ingested and a fixed one can simply be sent again. Any other file is uploaded as the console
uploads it (``POST /v1/collections/{id}/files``) and read by a worker; its document ends ``indexed`` or ``failed``
with the reason, which the command prints. Stopped (Ctrl-C, or no document finished within the wait), it lets the
worker threads finish the documents they hold, says so and exits 130 (or 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from agentsearch.cli.client import ApiClient, ApiError
from agentsearch.cli.errors import fail
from agentsearch.cli.session import api_session
from agentsearch.pipeline.platform.settings import get_settings

JSON_LINES = (".jsonl", ".ndjson")
# Sending a document again replaces it, so the same command picks up where a stopped one left off.
AGAIN = "the documents are kept, those not yet indexed stay pending; run the same command again to index them"


def documents_or_fail(path: Path) -> list[dict]:
    """Every document of a JSON Lines file as the API takes it, or ``fail`` naming the file and what is wrong."""
    from agentsearch.pipeline.ingestion.documents_in import IngestError, parse_jsonl
    from agentsearch.pipeline.security.storable import text_problem

    try:
        text = path.read_text(encoding="utf-8")
        if problem := text_problem(text):
            raise IngestError(f"the text {problem}")
        return [d.model_dump() for d in parse_jsonl(text)]
    except (IngestError, UnicodeDecodeError) as exc:
        fail(f"{path}: {exc}")


def access_or_fail(groups: str | None) -> dict | None:
    """``--groups`` as a document's ``access`` (None without it), or ``fail`` naming what is wrong."""
    from pydantic import ValidationError

    from agentsearch.pipeline.security.document_access import DocumentAccess

    if groups is None:
        return None
    try:
        return DocumentAccess(groups=[g.strip() for g in groups.split(",") if g.strip()]).model_dump()
    except ValidationError as exc:
        fail(f"--groups: {exc.errors()[0]['msg']}")


def wait_with_progress(client: ApiClient, collection_id: str, documents: int, label: str) -> dict:
    """Wait until no document of the collection is pending, with a progress bar of the ``documents`` sent."""
    with click.progressbar(length=documents, label=label) as bar:
        done = [0]

        def progress(counts: dict) -> None:
            finished = max(0, documents - counts["pending"])
            bar.update(max(0, finished - done[0]))
            done[0] = max(done[0], finished)

        return client.wait_indexed(collection_id, on_progress=progress)


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--collection", "collection_name", required=True,
              help="Collection name, TEAM/NAME for a team's (created when missing).")
@click.option("--groups", default=None, metavar="GROUPS",
              help="Only members of these groups of the team find the documents (comma-separated); a JSON Lines "
                   "line's own access wins.")
def ingest(file: Path, collection_name: str, groups: str | None) -> None:
    """Ingest documents: JSON Lines (id, title, text, optional metadata and access per line), or one file of any
    format the parsers read (PDF, scans, Word, PowerPoint, Excel, CSV, HTML, Markdown, text, e-mail)."""
    if not file.is_file():
        fail(f"{file}: no such file")
    access = access_or_fail(groups)
    documents = documents_or_fail(file) if file.suffix.lower() in JSON_LINES else None
    if documents is not None and access is not None:
        documents = [d if d.get("access") is not None else {**d, "access": access} for d in documents]
    try:
        with api_session(get_settings()) as client:
            collection = client.ensure_collection(collection_name)
            if documents is not None:
                client.add_documents(collection["id"], documents)
                sent = len(documents)
            else:
                answer = client.upload_files(collection["id"], [(file, file.stem)], access=access)
                if answer["rejected"]:
                    fail(f"{file}: {answer['rejected'][0]['error']}")
                sent = 1
            final = wait_with_progress(client, collection["id"], sent, f"indexing {sent} documents")
            if documents is None:
                (mine,) = [d for d in client.documents(collection["id"]) if d["id"] == file.stem]
                if mine["status"] == "failed":
                    fail(f"{file}: {mine['error']}")
    except ApiError as exc:
        fail(str(exc))
    except TimeoutError as exc:
        fail(f"{exc}: {AGAIN}")
    except KeyboardInterrupt:
        # 130, as a shell reports a command Ctrl-C stopped; the worker threads finished what they held first.
        fail(f"interrupted: {AGAIN}", status=130)
    counts = final["documents"]
    click.echo(f"collection {collection_name} ({final['id']}): {counts['indexed']} indexed, {counts['failed']} failed")
