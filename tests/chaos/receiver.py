"""A webhook receiver for the partition drill: answers 204 to every POST and logs it, one JSON line per delivery.

Each line holds the delivery's ``webhook-id`` header (the same on every attempt of one delivery), the event type
and the job it names, so a drill counts the deliveries that reached it more than once. It runs as a process of
its own on one of the drill's hosts.

Usage::

    python -m tests.chaos.receiver 10.77.0.2 9000 deliveries.jsonl
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_write = threading.Lock()


def handler(log: Path) -> type[BaseHTTPRequestHandler]:
    class Deliveries(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                payload = json.loads(body)
            except ValueError:
                payload = {}
            line = json.dumps({"webhook_id": self.headers.get("webhook-id"), "type": payload.get("type"),
                               "job_id": (payload.get("data") or {}).get("job_id"), "t": time.time()})
            with _write, log.open("a") as fh:
                fh.write(line + "\n")
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args) -> None:
            pass

    return Deliveries


def main(host: str, port: str, log: str) -> None:
    ThreadingHTTPServer((host, int(port)), handler(Path(log))).serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:4])
