"""What a drive or objects source's run costs: files per second read from a real WebDAV server or S3 store, and an
unchanged run's requests and time.

``--kind drive``: WsgiDAV (``agentsearch.devstack.dav_server``) over a folder of ``--pages`` Markdown files in
subfolders of a hundred, behind basic auth. ``--kind objects``: moto's S3 server (``agentsearch.devstack.s3_server``)
with a bucket of ``--pages`` objects under one prefix. Both come with the ``test`` extra. A fresh database (the
machine's PostgreSQL, or with ``--sqlite`` a SQLite file) holds a collection and the source over it. The first run
lists and reads every file and stores each as a ``pending`` document for the parsing queue (the tasks it would send
are counted, not sent); then ``--rounds`` runs over the unchanged store, each listing it (one ``PROPFIND`` a folder;
``ListObjectsV2`` pages of a thousand keys) and reading nothing. Medians of the rounds; requests are counted at the
server (WebDAV) or at the client (every S3 call boto3 makes).

    agentsearch bench sources --kind drive --pages 1000 --rounds 3
    agentsearch bench sources --kind objects --pages 1000 --rounds 3
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from pydantic import SecretStr

from agentsearch.bench.retention import scratch_database
from agentsearch.bench.sources import timed_run
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.sources.store import create_source

FOLDER_FILES = 100
AUTH = ("bench", "bench-secret")


def _text(n: int) -> str:
    return f"# Note {n}\n\nNote {n} of the bench store: wind, solar and grain silos, item {n * 7919 % 1000}.\n"


@contextmanager
def _drive(files: int) -> Iterator[tuple[dict[str, Any], Callable[[], int]]]:
    """A WebDAV folder of ``files`` notes: the source's config, and how many requests the server has answered."""
    try:
        from agentsearch.devstack.dav_server import DavServer
    except ImportError as exc:
        raise RuntimeError(f"WsgiDAV and cheroot are missing ({exc}): install the test extra") from None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "drive"
        for n in range(files):
            folder = root / "Team" / f"f{n // FOLDER_FILES:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"note-{n}.md").write_text(_text(n))
        with DavServer(root, auth=AUTH) as dav:
            yield ({"url": dav.url("/Team/"), "username": AUTH[0], "password": AUTH[1], "max_items": files + 1},
                   lambda: len(dav.requests))


class _S3Calls:
    """Counts every request boto3 sends in this process (``Endpoint.make_request``), from its creation."""

    def __init__(self) -> None:
        from botocore.endpoint import Endpoint

        self.count, self._endpoint, self._original = 0, Endpoint, Endpoint.make_request

        def counted(endpoint: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return self._original(endpoint, *args, **kwargs)

        Endpoint.make_request = counted

    def close(self) -> None:
        self._endpoint.make_request = self._original


@contextmanager
def _objects(objects: int) -> Iterator[tuple[dict[str, Any], Callable[[], int]]]:
    """A bucket of ``objects`` notes under ``notes/``: the source's config, and how many S3 calls were made since."""
    try:
        from agentsearch.devstack.s3_server import S3Server
    except ImportError as exc:
        raise RuntimeError(f"moto's server is missing ({exc}): install the test extra") from None
    with S3Server() as s3:
        client = s3.client()
        client.create_bucket(Bucket="bench")
        for n in range(objects):
            client.put_object(Bucket="bench", Key=f"notes/note-{n}.md", Body=_text(n).encode())
        calls = _S3Calls()
        try:
            yield ({"bucket": "bench", "prefix": "notes/", "endpoint_url": s3.url, "access_key": s3.access_key,
                    "secret_key": s3.secret_key, "max_items": objects + 1}, lambda: calls.count)
        finally:
            calls.close()


def measure(kind: str, items: int, rounds: int, sqlite: bool) -> dict[str, Any]:
    """``kind``: drive or objects."""
    settings = Settings(egress_allow=["127.0.0.1"], sources_key=SecretStr(Fernet.generate_key().decode()))
    store = _drive if kind == "drive" else _objects
    with store(items) as (config, requests), scratch_database(sqlite) as (db, database):
        with db.session() as s:
            collection = CollectionRow(user_id=DEFAULT_USER_ID, name=f"bench-{kind}", embedding_model="m")
            s.add(collection)
            s.flush()
            source_id = create_source(s, settings, collection, DEFAULT_USER_ID, kind, config, None, True).id
        before = requests()
        first, first_s, first_tasks = timed_run(db, settings, source_id)
        first_requests = requests() - before
        if first["documents"]["new"] != items:
            raise RuntimeError(f"the first run read {first['documents']} of {items} items")
        times, counts = [], []
        for _ in range(rounds):
            before = requests()
            again, seconds, sent = timed_run(db, settings, source_id)
            if again["documents"]["unchanged"] != items or sent:
                raise RuntimeError(f"an unchanged run found {again['documents']} and sent {sent} tasks")
            times.append(seconds)
            counts.append(requests() - before)
    return {"kind": kind, "database": database, "items": items, "rounds": rounds,
            "first_run_s": round(first_s, 3), "documents_per_s": round(items / first_s, 1),
            "first_run_tasks": first_tasks, "first_run_requests": first_requests,
            "unchanged_run_s_median": round(statistics.median(times), 3),
            "unchanged_run_requests_median": statistics.median(counts),
            "unchanged_run_documents_stored": 0}
