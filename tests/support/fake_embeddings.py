"""A fake OpenAI-compatible embeddings server on 127.0.0.1, in the test's own process: ``POST /v1/embeddings``
answers a vector per text, made from the text's digest (the same text, the same vector), not unit length, so a
client's normalising shows. Every request body is recorded.

Usage::

    with FakeEmbeddingsServer(dimension=8) as server:
        RemoteEmbedder(server.url, "m").embed(["a", "b"])     # server.url: http://127.0.0.1:PORT/v1
        server.requests                                       # [{"model": "m", "input": ["a", "b"], ...}]
        raw_vector("a", 8)                                    # what it answered for "a", before normalising
        server.status = 503                                   # from now on every request answers 503
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


def raw_vector(text: str, dimension: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    # Values of about -3 to 3, never all zero: far from unit length, so normalising shows.
    return [(digest[i % len(digest)] - 128) / 42.0 + 0.01 for i in range(dimension)]


class FakeEmbeddingsServer:
    def __init__(self, dimension: int = 8, api_key: str | None = None) -> None:
        self.dimension, self.api_key = dimension, api_key
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                if self.path != "/v1/embeddings":
                    return self._send(404, {"detail": "Not Found"})
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._send(401, {"detail": "Unauthorized"})
                if server.status != 200:
                    return self._send(server.status, {"detail": "overloaded"})
                # Reversed, as a server may answer: each item says which text it belongs to.
                data = [{"object": "embedding", "index": i, "embedding": raw_vector(text, server.dimension)}
                        for i, text in enumerate(body["input"])][::-1]
                self._send(200, {"object": "list", "data": data, "model": body.get("model")})

            def _send(self, status: int, payload: dict) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
