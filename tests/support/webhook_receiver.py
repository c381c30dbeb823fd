"""A webhook receiver on 127.0.0.1 in the test's own process: it checks signatures, drops repeats by ``webhook-id``
and can be told to fail, as a real receiver would.

Each path is an endpoint of its own: ``fail_first[path] = n`` answers 500 to the first ``n`` requests there,
``fail_always`` paths always answer 500. A request that is answered 200 is *processed* once per ``webhook-id``
(the receiver's idempotency check); a repeat is answered 200 and not processed again.

Usage::

    with WebhookReceiver() as receiver:
        receiver.fail_first["/flaky"] = 2
        url = f"{receiver.url}/flaky"
        ...
        receiver.wait_processed("/flaky", 1)          # [Received(...)]
        receiver.received("/flaky")                   # every request, the 500s too
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at: float


class WebhookReceiver:
    def __init__(self) -> None:
        self.fail_first: dict[str, int] = {}
        self.fail_always: set[str] = set()
        self.requests: list[Received] = []
        self.processed: dict[str, list[Received]] = {}
        self._seen_ids: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status = receiver._answer(self.path, headers, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _answer(self, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            earlier = sum(1 for r in self.requests if r.path == path)
            failing = path in self.fail_always or earlier < self.fail_first.get(path, 0)
            status = 500 if failing else 200
            received = Received(path, headers, body, status, time.time())
            self.requests.append(received)
            key = (path, headers.get("webhook-id", ""))
            if status == 200 and key not in self._seen_ids:
                self._seen_ids.add(key)
                self.processed.setdefault(path, []).append(received)
            return status

    def received(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def wait_processed(self, path: str, count: int, timeout_s: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                done = list(self.processed.get(path, []))
            if len(done) >= count:
                return done
            if time.monotonic() > deadline:
                seen = [(r.status, r.headers.get("webhook-id")) for r in self.received(path)]
                raise AssertionError(f"{path}: {len(done)} of {count} deliveries processed after {timeout_s} s; "
                                     f"requests: {seen}")
            time.sleep(0.05)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "WebhookReceiver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
