"""A real OpenTelemetry trace store on this machine: Arize Phoenix (``phoenix serve``), which takes OTLP over HTTP at
``/v1/traces`` and answers what it stored at ``/v1/projects/{project}/spans``.

Phoenix brings its own SQLAlchemy, GraphQL and OpenTelemetry pins, so it lives in a virtual environment of its own,
``~/.cache/agentsearch/trace-store/`` (shared by every clone, like the LLM server), made from
``src/agentsearch/devstack/trace-store.txt`` (every package pinned) with the project's pip. A stamp holding the
pins' digest makes a second ``install`` free; two installs at once wait for each other. Each server keeps its
spans in a SQLite file under its own working directory, so a test's store starts empty.

Usage::

    .venv/bin/python -m agentsearch.devstack.trace_store install    # `make trace-store`; quick once done
    .venv/bin/python -m agentsearch.devstack.trace_store serve --port 6006
    #   then AGENTSEARCH_OTEL_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006

    with TraceStore(workdir) as store:                  # installs if needed, starts on a free port
        store.otlp_endpoint                             # http://127.0.0.1:PORT (OTEL_EXPORTER_OTLP_ENDPOINT)
        store.spans(trace_id="4c1a6e0e...")             # the spans stored for one trace, as Phoenix returns them
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from agentsearch.devstack.llm_server import cache_dir
from agentsearch.devstack.pinned_venv import pinned_venv
from agentsearch.devstack.processes import LocalServer, free_port

REQUIREMENTS = Path(__file__).resolve().parent / "trace-store.txt"
PROJECT = "default"
# Phoenix migrates its database and builds its app at start: about 30 s quiet, 90 s on two busy cores.
START_TIMEOUT_S = 300


def default_venv() -> Path:
    return cache_dir() / "trace-store"


def _pins_digest() -> str:
    return hashlib.sha256(f"{REQUIREMENTS.read_text()}\n{sys.version_info[:2]}".encode()).hexdigest()


def install(venv: Path | None = None, quiet: bool = True) -> Path:
    """Make (or keep) the store's virtual environment; the path of its ``phoenix`` command."""
    venv = pinned_venv(venv or default_venv(), _pins_digest(), [["-r", str(REQUIREMENTS)]], "trace store", quiet)
    return venv / "bin" / "phoenix"


class TraceStore(LocalServer):
    """Phoenix on 127.0.0.1, for as long as the ``with`` block lasts."""

    name = "trace-store"
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, workdir: Path, port: int | None = None, venv: Path | None = None) -> None:
        super().__init__(workdir, port)
        self.venv = venv
        self.grpc_port = free_port()
        self.otlp_endpoint = self.root  # the OTLP exporter adds /v1/traces

    @property
    def ready_url(self) -> str:
        return f"{self.root}/healthz"

    def command(self) -> list[str]:
        return [str(install(self.venv)), "serve"]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AGENTSEARCH_", "OTEL_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PHOENIX_WORKING_DIR=str(self.workdir / "phoenix"), PHOENIX_HOST="127.0.0.1",
                   PHOENIX_PORT=str(self.port), PHOENIX_GRPC_PORT=str(self.grpc_port),
                   PHOENIX_TELEMETRY_ENABLED="false", DO_NOT_TRACK="1")
        return env

    def spans(self, trace_id: str | None = None, project: str = PROJECT, limit: int = 1000) -> list[dict[str, Any]]:
        """The spans the store holds (of one trace when ``trace_id``, 32 hex digits, is given)."""
        import httpx

        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": min(limit, 1000), **({"cursor": cursor} if cursor else {})}
            response = httpx.get(f"{self.root}/v1/projects/{project}/spans", params=params, timeout=30)
            if response.status_code == 404:  # no span sent yet: the project does not exist
                return []
            response.raise_for_status()
            body = response.json()
            found.extend(s for s in body["data"] if trace_id is None or s["context"]["trace_id"] == trace_id)
            cursor = body.get("next_cursor")
            if not cursor or len(found) >= limit:
                return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["install", "serve"])
    parser.add_argument("--port", type=int, default=6006)
    args = parser.parse_args()
    if args.action == "install":
        install()
        return
    from agentsearch.devstack.processes import REPO

    server = TraceStore(REPO / ".agentsearch" / "trace-store-run", port=args.port)
    server.serve(f"AGENTSEARCH_OTEL_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT={server.otlp_endpoint}")


if __name__ == "__main__":
    main()
