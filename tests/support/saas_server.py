"""A real HTTP server answering a SaaS tool's API from recorded responses (``tests/fixtures/saas/*.json``), so that
the tool's own client library makes its real requests to it through its base-URL setting.

A recording lists routes by phase: ``{"phases": {"1": [route, ...], "2": [...]}}``, a route being ``{"method",
"path", "query"?, "form"?, "json"?, "status"?, "headers"?, "body" (JSON) or "text", "times"?}``. A request is answered
by the most specific route matching it (method, path, and each named query, form or JSON field) in the current
phase, else in the phases before it (a phase states only what changed). ``times: 1`` answers once (a 429 with its
``Retry-After``, then the recorded page). ``{base}`` in a body or a header is the server's URL; ``{other}`` the same
server under another origin (``localhost`` for 127.0.0.1), to follow a redirect to another host. Every request is kept
(``requests``) with its time, for the tests to count and to time the retries.

Usage::

    with SaasServer("confluence.json") as server:
        server.url                                  # http://127.0.0.1:PORT
        server.phase = 2                            # the tool's state after the changes the recording made
        server.asked("GET", "/rest/api/content/101")  # how many times that was asked
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "saas"


@dataclass
class Asked:
    method: str
    path: str
    query: dict[str, str]
    at: float
    status: int
    authorization: str = ""


class SaasServer:
    def __init__(self, recording: str) -> None:
        self.recording = json.loads((FIXTURES / recording).read_text())
        self.phase = 1
        self.requests: list[Asked] = []
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.other = f"http://localhost:{self.httpd.server_address[1]}"

    def __enter__(self) -> SaasServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def asked(self, method: str, path: str) -> int:
        return sum(1 for r in self.requests if r.method == method and r.path == path)

    def answer(self, method: str, path: str, fields: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            for phase in range(self.phase, 0, -1):
                matching = [(-len(_named(route)), i, route)
                            for i, route in enumerate(self.recording["phases"].get(str(phase), []))
                            if self._matches(phase, i, route, method, path, fields)]
                if matching:
                    _, index, route = min(matching, key=lambda m: (m[0], m[1]))
                    key = phase * 10_000 + index
                    self._used[key] = self._used.get(key, 0) + 1
                    if "text" in route:  # a file's bytes (a download, an export), not JSON
                        body, kind = route["text"].encode(), "text/plain; charset=utf-8"
                    else:
                        body, kind = json.dumps(route.get("body", {})).replace("{base}", self.url).encode(), \
                            "application/json; charset=UTF-8"
                    headers = {"Content-Type": kind, **{name: value.replace("{base}", self.url).replace(
                        "{other}", self.other) for name, value in route.get("headers", {}).items()}}
                    return route.get("status", 200), headers, body
        return 404, {"Content-Type": "application/json"}, b'{"message": "no recorded response"}'

    def _matches(self, phase: int, index: int, route: dict[str, Any], method: str, path: str,
                 fields: dict[str, Any]) -> bool:
        if route["method"] != method or route["path"] != path:
            return False
        if "times" in route and self._used.get(phase * 10_000 + index, 0) >= route["times"]:
            return False
        return all(str(fields.get(k)) == str(v) if v is not None else k not in fields
                   for k, v in _named(route).items())


def _named(route: dict[str, Any]) -> dict[str, Any]:
    return {**route.get("query", {}), **route.get("form", {}), **route.get("json", {})}


def _handler(server: SaasServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            fields: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if raw and "json" in (self.headers.get("Content-Type") or ""):
                loaded = json.loads(raw)
                fields.update({k: v for k, v in loaded.items() if isinstance(v, str | int | float | bool)}
                              if isinstance(loaded, dict) else {})
            elif raw:
                fields.update(parse_qsl(raw.decode(), keep_blank_values=True))
            status, headers, body = server.answer(self.command, unquote(parts.path), fields)
            server.requests.append(Asked(self.command, unquote(parts.path), fields, time.monotonic(), status,
                                         self.headers.get("Authorization") or ""))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = _serve  # noqa: N815

    return Handler
