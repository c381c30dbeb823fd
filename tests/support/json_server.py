"""A JSON HTTP server on 127.0.0.1 in the test's own process, recording every request that reaches it.

Usage::

    with JsonServer(reply=lambda path: {"path": path}) as server:
        httpx.get(f"{server.url}/a")
        server.requests                        # [("/a", "127.0.0.1:PORT")]: path and Host header
        server.redirect_to = "http://elsewhere/x"   # from now on /hop answers 302 there
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonServer:
    def __init__(self, reply: Callable[[str], Any] = lambda _path: {"ok": True}) -> None:
        self.requests: list[tuple[str, str]] = []
        self.redirect_to = ""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append((self.path, self.headers.get("Host", "")))
                if self.path == "/hop" and server.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps(reply(self.path)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> JsonServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
