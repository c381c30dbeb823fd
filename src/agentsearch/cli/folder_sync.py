"""``agentsearch sync``: a folder kept in step with a collection, file by file.

Each file of the folder (and its subfolders; hidden ones left out) is a document whose id is its path in the folder
without the extension (``reports/q4.pdf`` is ``reports/q4``). A run uploads the files that are new or whose bytes
changed (by SHA-256, which the service keeps per document as ``content_hash``) and deletes the documents whose
file is gone (only documents that came from files, and their attachments: documents sent as JSON are not the
folder's). A second run over an unchanged folder uploads, parses and embeds nothing. A changed document stays
searchable in its old version until the new one is indexed (``VectorStore.replace_documents``).

What is a document and what is left out (links out of the folder or to hidden files, FIFOs, devices, sockets), and
how a name that is not UTF-8 is sent: ``agentsearch.cli.folder_files``. Each file left out is printed as ``skipped:
PATH: why``. A file that cannot be read or that the service refuses is printed as ``failed: PATH: why``, its document
kept as it was, and the others are synced; the command then exits 1 (2 when it could not run at all).

Usage::

    agentsearch sync ~/shared/handbook --collection handbook
    plan = plan_sync({"q4": (Path("q4.pdf"), "9f86d0...")}, client.documents(collection_id))
    plan.upload, plan.delete, plan.unchanged
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from agentsearch.cli.client import ApiClient, ApiError
from agentsearch.cli.documents import wait_with_progress
from agentsearch.cli.errors import fail
from agentsearch.cli.folder_files import FolderFile, file_digest, folder_listing, read_file, shown
from agentsearch.cli.session import api_session
from agentsearch.pipeline.platform.settings import get_settings

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


def plan_sync(local: dict[str, tuple[Path, str]], remote: list[dict], kept: frozenset[str] = frozenset()) -> SyncPlan:
    """What to upload and delete so that the collection's file documents are the folder's: ``local`` maps each
    document id to its file and digest, ``remote`` is the collection's documents listing. The documents of
    ``kept`` (files that are there but could not be read) are left as they are."""
    plan = SyncPlan()
    by_id = {d["id"]: d for d in remote}
    added = [(path, i) for i, (path, _) in local.items() if i not in by_id]
    changed = [(path, i) for i, (path, digest) in local.items()
               if i in by_id and by_id[i].get("content_hash") != digest]
    plan.upload, plan.added, plan.changed = added + changed, len(added), len(changed)
    plan.unchanged = len(local) - len(added) - len(changed)
    from_files = {d["id"] for d in remote if d.get("content_hash")}
    gone = from_files - set(local) - kept
    plan.delete = sorted(gone | {d["id"] for d in remote
                                 if (d.get("metadata") or {}).get("attached_to") in gone})
    return plan


def _upload(client: ApiClient, collection_id: str, files: list[tuple[FolderFile, str]], limit: int,
            failed: list[str]) -> int:
    """Send the files in requests of at most UPLOAD_FILES files and about UPLOAD_BYTES, each read once; a file
    that cannot be read, or that the service refuses, is added to ``failed``. Returns how many were taken."""
    taken = 0
    batch: list[tuple[FolderFile, bytes, str]] = []

    def send() -> None:
        nonlocal taken
        try:
            answer = client.upload_contents(collection_id, [(f.name, data, i) for f, data, i in batch])
        except ApiError as exc:
            if exc.status_code not in (413, 422):  # not about these files: the service cannot be used
                raise
            failed.extend(f"{shown(f.path)}: {exc}" for f, _, _ in batch)
        else:
            failed.extend(_refused(batch, answer))
            taken += len(batch) - len(answer["rejected"])
        batch.clear()

    size = 0
    for file, document_id in files:
        try:
            data = read_file(file.source, limit)
        except OSError as exc:
            failed.append(f"{shown(file.path)}: {exc}")
            continue
        if batch and (len(batch) == UPLOAD_FILES or size + len(data) > UPLOAD_BYTES):
            send()
            size = 0
        batch.append((file, data, document_id))
        size += len(data)
    if batch:
        send()
    return taken


def _refused(batch: list[tuple[FolderFile, bytes, str]], answer: dict) -> list[str]:
    """Each file of the upload the service refused, by its path and the reason: the answer names a refused file by
    its name alone, so it is matched among the files whose document was not taken, in the order they were sent."""
    taken = {d["id"] for d in answer["documents"]}
    left = [file for file, _, document_id in batch if document_id not in taken]
    lines = []
    for refusal in answer["rejected"]:
        file = next((f for f in left if f.name == refusal["file"]), None)
        if file is not None:
            left.remove(file)
        lines.append(f"{shown(file.path) if file else refusal['file']}: {refusal['error']}")
    return lines


def _run(client: ApiClient, folder: Path, collection_name: str) -> bool:
    """Sync, print what was done and each file left out or failed; True when no file failed."""
    began = time.monotonic()
    listing = folder_listing(folder)
    local: dict[str, tuple[Path, str]] = {}
    failed: list[str] = []
    for document_id, file in listing.files.items():
        try:
            local[document_id] = (file.path, file_digest(file.source))
        except OSError as exc:
            failed.append(f"{shown(file.path)}: {exc}")
    collection = client.ensure_collection(collection_name)
    plan = plan_sync(local, client.documents(collection["id"]), frozenset(listing.files) - set(local))
    sent = _upload(client, collection["id"], [(listing.files[i], i) for _, i in plan.upload],
                   get_settings().max_upload_bytes, failed)
    for document_id in plan.delete:
        client.delete_document(collection["id"], document_id)
    if sent:
        wait_with_progress(client, collection["id"], sent, f"indexing {sent} files")
        uploaded = {document_id for _, document_id in plan.upload}
        failed.extend(f"{shown(local[d['id']][0])}: {d['error']}" for d in client.documents(collection["id"])
                      if d["id"] in uploaded and d["status"] == "failed")
    click.echo(f"synced {shown(folder)} into {collection_name}: {plan.added} added, {plan.changed} changed, "
               f"{len(plan.delete)} deleted, {plan.unchanged} unchanged, {len(failed)} failed, "
               f"{len(listing.skipped)} skipped ({time.monotonic() - began:.1f} s)")
    for path, document_id in listing.renamed:
        click.echo(f"renamed: {shown(path)}: its name is not UTF-8; sent as document {document_id!r}", err=True)
    for path, why in listing.skipped:
        click.echo(f"skipped: {shown(path)}: {why}", err=True)
    for line in failed:
        click.echo(f"failed: {line}", err=True)
    return not failed


@click.command()
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False))
@click.option("--collection", "collection_name", required=True, help="Collection name (created when missing).")
def sync(folder: Path, collection_name: str) -> None:
    """Keep a collection in step with a folder: upload new and changed files, delete the documents of removed ones.
    Links out of the folder, FIFOs, devices and sockets are skipped and named; exit status 1 when a file failed."""
    if not folder.is_dir():
        fail(f"{shown(folder)}: no such folder")
    try:
        with api_session(get_settings()) as client:
            whole = _run(client, folder, collection_name)
    except ApiError as exc:
        fail(str(exc))
    if not whole:
        sys.exit(1)
