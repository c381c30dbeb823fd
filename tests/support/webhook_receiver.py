"""A webhook receiver on 127.0.0.1 in the test's own process: it checks signatures, drops repeats by ``webhook-id``
and can be told to fail, as a real receiver would.

Each path is an endpoint of its own: ``fail_first[path] = n`` answers 500 to the first ``n`` requests there,
``fail_always`` paths always answer 500. A request that is answered 200 is *processed* once per ``webhook-id``
(the receiver's idempotency check); a repeat is answered 200 and not processed again.

``trickle[path] = interval_s`` makes a path a slow receiver: it sends its status line at once, then one header
byte every ``interval_s`` until the sender hangs up, so no single read ever waits long. Taken out of ``trickle``
(or after ``TRICKLE_LIMIT_S``, or on ``close``), the path ends the requests it holds with a whole 200 answer,
which then counts as received and processed. Each such request is kept in ``trickled`` (``Trickle``: when it
began, when it ended).

Usage::

    with WebhookReceiver() as receiver:
        receiver.fail_first["/flaky"] = 2
        url = f"{receiver.url}/flaky"
        ...
        receiver.wait_processed("/flaky", 1)          # [Received(...)]
        receiver.received("/flaky")                   # every request, the 500s too
        receiver.trickle["/slow"] = 0.5
        receiver.wait_trickling("/slow", 2)           # two requests held open at once
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Long past any attempt's deadline: a sender without one holds the request this long.
TRICKLE_LIMIT_S = 120.0


@dataclass
class Trickle:
    path: str
    webhook_id: str
    started: float
    ended: float | None = None


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
        self.trickle: dict[str, float] = {}
        self.trickled: list[Trickle] = []
        self.requests: list[Received] = []
        self.processed: dict[str, list[Received]] = {}
        self._seen_ids: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                if self.path in receiver.trickle:
                    receiver._trickle(self, headers, body)
                    return
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
            self._keep(Received(path, headers, body, status, time.time()))
            return status

    def _keep(self, received: Received) -> None:  # under the lock
        self.requests.append(received)
        key = (received.path, received.headers.get("webhook-id", ""))
        if received.status == 200 and key not in self._seen_ids:
            self._seen_ids.add(key)
            self.processed.setdefault(received.path, []).append(received)

    def _trickle(self, handler: BaseHTTPRequestHandler, headers: dict[str, str], body: bytes) -> None:
        interval = self.trickle.get(handler.path, 0.0)
        record = Trickle(handler.path, headers.get("webhook-id", ""), time.time())
        with self._lock:
            self.trickled.append(record)
        handler.close_connection = True
        try:
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            handler.wfile.flush()
            until = time.monotonic() + TRICKLE_LIMIT_S
            while time.monotonic() < until and handler.path in self.trickle:
                time.sleep(interval)
                handler.wfile.write(b"a")
                handler.wfile.flush()
            handler.wfile.write(b"\r\nContent-Length: 0\r\n\r\n")
            handler.wfile.flush()
            with self._lock:  # answered whole: processed like any 200
                self._keep(Received(handler.path, headers, body, 200, time.time()))
        except OSError:  # the sender hung up
            pass
        finally:
            with self._lock:
                record.ended = time.time()

    def trickling(self, path: str) -> list[Trickle]:
        """The slow requests to ``path`` still held open."""
        with self._lock:
            return [t for t in self.trickled if t.path == path and t.ended is None]

    def wait_trickling(self, path: str, count: int, timeout_s: float = 30.0) -> list[Trickle]:
        deadline = time.monotonic() + timeout_s
        while len(open_now := self.trickling(path)) < count:
            assert time.monotonic() < deadline, f"{path}: {len(open_now)} of {count} slow requests open"
            time.sleep(0.05)
        return open_now

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
        self.trickle.clear()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
