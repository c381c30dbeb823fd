"""What a web source's run costs (a mail source's: ``agentsearch.bench.sources_mail``): documents per second read
from a real HTTP server, and an unchanged run's requests and time.

A threaded ``http.server`` on 127.0.0.1 serves a site of ``--pages`` pages, linked from an index page through
sections of a hundred; a fresh
database (the machine's PostgreSQL, or with ``--sqlite`` a SQLite file) holds a collection and one web source
over it (the operator's egress allowlist opening 127.0.0.1). The first run reads every page and stores each as a
``pending`` document for the parsing queue (the tasks it would send are counted, not sent: parsing and embedding
are the ingestion's, measured by ``agentsearch bench ingest``). Then ``--rounds`` runs over the unchanged site: each
asks for every page with its Last-Modified (the server answers 304) and stores nothing. Medians of the rounds.

    agentsearch bench sources --pages 1000 --rounds 5 --json sources.json
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from pydantic import SecretStr

from agentsearch.bench.retention import scratch_database
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.sources import SourceRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.sources.run import run_source
from agentsearch.pipeline.sources.store import create_source, new_run


class _Counted(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.requests += 1  # type: ignore[attr-defined]
        super().do_GET()


SECTION_PAGES = 100


def _links(names: list[str]) -> str:
    return "".join(f'<a href="{name}">{name}</a>\n' for name in names)


def _site(root: Path, pages: int) -> int:
    """An index linking to sections of ``SECTION_PAGES`` pages each: the pages the site has, index and sections in."""
    sections = [list(range(first, min(first + SECTION_PAGES, pages))) for first in range(0, pages, SECTION_PAGES)]
    (root / "index.html").write_text(f"<html><body>{_links([f's{i}.html' for i in range(len(sections))])}</body>"
                                     "</html>")
    for i, numbers in enumerate(sections):
        (root / f"s{i}.html").write_text(f"<html><body>{_links([f'p{n}.html' for n in numbers])}</body></html>")
    for n in range(pages):
        (root / f"p{n}.html").write_text(f"<html><head><title>Page {n}</title></head><body><p>Page {n} of the "
                                         f"bench site: wind, solar and grain silos, item {n * 7919 % 1000}.</p>"
                                         "</body></html>")
    return 1 + len(sections) + pages


def timed_run(db: Database, settings: Settings, source_id: Any) -> tuple[dict[str, Any], float, int]:
    """A run of the source as its worker's task runs it: its outcome, its seconds, the tasks it would send."""
    with db.session() as s:
        source = s.get(SourceRow, source_id)
        assert source is not None
        run_id = new_run(s, source, "manual").id
    tasks: list[Any] = []
    started = time.perf_counter()
    outcome = run_source(db, settings, run_id, tasks.extend)
    return outcome, time.perf_counter() - started, len(tasks)


def measure(pages: int, rounds: int, sqlite: bool) -> dict[str, Any]:
    settings = Settings(egress_allow=["127.0.0.1"], sources_key=SecretStr(Fernet.generate_key().decode()))
    with tempfile.TemporaryDirectory() as tmp, scratch_database(sqlite) as (db, database):
        root = Path(tmp)
        total = _site(root, pages)
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Counted, directory=str(root)))
        server.requests = 0  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with db.session() as s:
                collection = CollectionRow(user_id=DEFAULT_USER_ID, name="bench-sources", embedding_model="m")
                s.add(collection)
                s.flush()
                url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
                source_id = create_source(s, settings, collection, DEFAULT_USER_ID, "web",
                                          {"url": url, "max_pages": total, "max_depth": 2}, None, True).id
            first, first_s, first_tasks = timed_run(db, settings, source_id)
            if first["documents"]["new"] != total:
                raise RuntimeError(f"the first run read {first['documents']} of {total} pages")
            times, requests = [], []
            for _ in range(rounds):
                before = server.requests  # type: ignore[attr-defined]
                again, seconds, sent = timed_run(db, settings, source_id)
                if again["documents"]["unchanged"] != total or sent:
                    raise RuntimeError(f"an unchanged run found {again['documents']} and sent {sent} tasks")
                times.append(seconds)
                requests.append(server.requests - before)  # type: ignore[attr-defined]
        finally:
            server.shutdown()
            server.server_close()
    return {"database": database, "pages": total, "rounds": rounds,
            "first_run_s": round(first_s, 3), "documents_per_s": round(total / first_s, 1),
            "first_run_tasks": first_tasks,
            "unchanged_run_s_median": round(statistics.median(times), 3),
            "unchanged_run_requests_median": statistics.median(requests),
            "unchanged_run_documents_stored": 0}
