"""``agentsearch sync``: a folder kept in step with a collection, file by file.

Each file of the folder (and its subfolders; hidden ones left out) is a document whose id is its path in the folder
without the extension (``reports/q4.pdf`` is ``reports/q4``). A run uploads the files that are new or whose bytes
changed (by SHA-256, which the service keeps per document as ``content_hash``) and deletes the documents whose
file is gone (only documents that came from files, and their attachments: documents sent as JSON are not the
folder's). A second run over an unchanged folder uploads, parses and embeds nothing. A changed document stays
searchable in its old version until the new one is indexed (``VectorStore.replace_documents``).

Usage::

    agentsearch sync ~/shared/handbook --collection handbook
    plan = plan_sync({"q4": (Path("q4.pdf"), "9f86d0...")}, client.documents(collection_id))
    plan.upload, plan.delete, plan.unchanged
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from cli.client import ApiClient, ApiError
from cli.documents import wait_with_progress
from cli.errors import fail
from cli.session import api_session
from pipeline.platform.settings import get_settings

# One upload request: the API takes at most 20 files, and 64 MB by default (AGENTSEARCH_MAX_UPLOAD_BYTES).
UPLOAD_FILES = 20
UPLOAD_BYTES = 48 * 1024 * 1024


@dataclass
class SyncPlan:
    upload: list[tuple[Path, str]] = field(default_factory=list)   # (file, document id), new ones first
    delete: list[str] = field(default_factory=list)
    added: int = 0
    changed: int = 0
    unchanged: int = 0


def folder_files(folder: Path) -> dict[str, Path]:
    """``{document id: file}`` of every visible file under ``folder``; two files that would share an id (``a.pdf``
    and ``a.docx``) are refused by name."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if not path.is_file() or any(p.startswith(".") for p in relative.parts):
            continue
        document_id = relative.with_suffix("").as_posix()
        if document_id in found:
            raise click.ClickException(f"{found[document_id]} and {path} would both be document {document_id!r}; "
                                       "rename one of them")
        found[document_id] = path
    return found


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def plan_sync(local: dict[str, tuple[Path, str]], remote: list[dict]) -> SyncPlan:
    """What to upload and delete so that the collection's file documents are the folder's: ``local`` maps each
    document id to its file and digest, ``remote`` is the collection's documents listing."""
    plan = SyncPlan()
    by_id = {d["id"]: d for d in remote}
    added = [(path, i) for i, (path, _) in local.items() if i not in by_id]
    changed = [(path, i) for i, (path, digest) in local.items()
               if i in by_id and by_id[i].get("content_hash") != digest]
    plan.upload, plan.added, plan.changed = added + changed, len(added), len(changed)
    plan.unchanged = len(local) - len(added) - len(changed)
    from_files = {d["id"] for d in remote if d.get("content_hash")}
    gone = from_files - set(local)
    plan.delete = sorted(gone | {d["id"] for d in remote
                                 if (d.get("metadata") or {}).get("attached_to") in gone})
    return plan


def _batches(files: list[tuple[Path, str]]) -> list[list[tuple[Path, str]]]:
    batches: list[list[tuple[Path, str]]] = []
    size = 0
    for item in files:
        length = item[0].stat().st_size
        if not batches or len(batches[-1]) == UPLOAD_FILES or (batches[-1] and size + length > UPLOAD_BYTES):
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += length
    return batches


def _run(client: ApiClient, folder: Path, collection_name: str) -> None:
    began = time.monotonic()
    local = {document_id: (path, file_digest(path)) for document_id, path in folder_files(folder).items()}
    collection = client.ensure_collection(collection_name)
    plan = plan_sync(local, client.documents(collection["id"]))
    refused: list[str] = []
    for batch in _batches(plan.upload):
        answer = client.upload_files(collection["id"], batch)
        refused.extend(f"{r['file']}: {r['error']}" for r in answer["rejected"])
    for document_id in plan.delete:
        client.delete_document(collection["id"], document_id)
    if plan.upload:
        wait_with_progress(client, collection["id"], len(plan.upload), f"indexing {len(plan.upload)} files")
        sent = {document_id for _, document_id in plan.upload}
        refused.extend(f"{local[d['id']][0]}: {d['error']}" for d in client.documents(collection["id"])
                       if d["id"] in sent and d["status"] == "failed")
    click.echo(f"synced {folder} into {collection_name}: {plan.added} added, {plan.changed} changed, "
               f"{len(plan.delete)} deleted, {plan.unchanged} unchanged, {len(refused)} failed "
               f"({time.monotonic() - began:.1f} s)")
    for line in refused:
        click.echo(f"failed: {line}", err=True)


@click.command()
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@click.option("--collection", "collection_name", required=True, help="Collection name (created when missing).")
def sync(folder: Path, collection_name: str) -> None:
    """Keep a collection in step with a folder: upload new and changed files, delete the documents of removed ones."""
    if not folder.is_dir():
        fail(f"{folder}: no such folder")
    try:
        with api_session(get_settings()) as client:
            _run(client, folder, collection_name)
    except ApiError as exc:
        fail(str(exc))
