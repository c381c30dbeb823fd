"""A real WebDAV server for the drive source's tests and ``agentsearch bench sources --kind drive``: WsgiDAV over a
folder the caller changes, behind basic auth, served by cheroot on a free loopback port; ``malformed`` makes every
``PROPFIND`` answer a broken multistatus. WsgiDAV and cheroot come with the ``test`` extra.

Usage::

    with DavServer(tmp_path / "drive", auth=("ana", "s3cret")) as dav:
        (dav.root / "Handbook" / "guide.md").write_text("# Guide")
        dav.url("/Handbook/")                 # http://127.0.0.1:PORT/Handbook/
        dav.malformed = True                  # PROPFIND answered 207 with XML cut short
        dav.requests                          # ["PROPFIND /Handbook/", "GET /Handbook/guide.md", ...]
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from cheroot import wsgi
from wsgidav.wsgidav_app import WsgiDAVApp

from agentsearch.devstack.processes import free_port, listening, wait_for


class DavServer:
    def __init__(self, root: Path, auth: tuple[str, str]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.auth, self.port = root, auth, free_port()
        self.malformed = False
        self.answer: bytes | None = None  # every PROPFIND answered 207 with these bytes
        self.requests: list[str] = []
        app = WsgiDAVApp({
            "provider_mapping": {"/": str(root)},
            "simple_dc": {"user_mapping": {"*": {auth[0]: {"password": auth[1]}}}},
            "http_authenticator": {"accept_basic": True, "accept_digest": False, "default_to_digest": False},
            "verbose": 0,
            "logging": {"enable": False},
            "property_manager": True,
            "lock_storage": True,
        })
        self.server = wsgi.Server(("127.0.0.1", self.port), self._wrap(app), numthreads=4)
        self.thread = threading.Thread(target=self.server.safe_start, daemon=True)

    def _wrap(self, app: Any) -> Any:
        def wrapped(environ: dict, start_response: Any) -> Any:
            self.requests.append(f"{environ['REQUEST_METHOD']} {environ.get('PATH_INFO', '')}")
            if (self.malformed or self.answer) and environ["REQUEST_METHOD"] == "PROPFIND":
                body = self.answer or b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/x'
                start_response("207 Multi-Status", [("Content-Type", "application/xml"),
                                                    ("Content-Length", str(len(body)))])
                return [body]
            return app(environ, start_response)

        return wrapped

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> DavServer:
        self.thread.start()
        wait_for(lambda: listening(self.port), 15, "the WebDAV server")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.thread.join(10)
