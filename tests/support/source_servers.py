"""Real servers a source is read from in the tests: a threaded HTTP server over a folder the test changes between
runs (with a redirect loop, a page behind basic auth), and ``git daemon`` over a repository.

Usage::

    with SiteServer(tmp_path / "site") as site:        # site.url("/docs/index.html")
        (site.root / "docs" / "a.html").write_text("...")
        site.auth = ("reader", "s3cret")               # every page now asks for these
    with GitDaemon(tmp_path / "repos") as daemon:      # daemon.url("handbook") -> git://127.0.0.1:PORT/handbook
        ...
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agentsearch.devstack import free_port


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        site = self.server.site  # type: ignore[attr-defined]
        site.requests.append(self.path)
        if site.auth is not None:
            expected = "Basic " + base64.b64encode(":".join(site.auth).encode()).decode()
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="site"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        if self.path.startswith("/to/"):  # /to/127.0.0.2:PORT/x redirects to http://127.0.0.2:PORT/x
            self.send_response(302)
            self.send_header("Location", "http://" + self.path[len("/to/"):])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.endswith("/trickle.html"):  # a byte every 0.2 s, for ever (until the client leaves)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            try:
                for _ in range(600):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
            return
        if self.path.endswith("/endless.html"):  # no Content-Length, and more than any limit
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for _ in range(10_000):
                    self.wfile.write(b"z" * 65536)
            except OSError:
                pass
            return
        if "/loop/" in self.path:  # .../loop/a and .../loop/b redirect to each other
            self.send_response(302)
            self.send_header("Location", self.path[:-1] + ("b" if self.path.endswith("a") else "a"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()


class SiteServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.requests: list[str] = []
        self.auth: tuple[str, str] | None = None
        self.server: ThreadingHTTPServer | None = None
        self.port = free_port()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), partial(_Handler, directory=str(self.root)))
        self.server.site = self  # type: ignore[attr-defined]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def write(self, path: str, text: str) -> Path:
        """A file written with a modification time a second past its last, so If-Modified-Since sees the change."""
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        before = target.stat().st_mtime if target.exists() else time.time() - 10
        target.write_text(text)
        os.utime(target, (before + 1, before + 1))
        return target

    def __enter__(self) -> SiteServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, env=env).stdout


def wait_for_port(port: int, what: str, proc: subprocess.Popen | None = None, timeout_s: float = 15) -> None:
    """Until a server accepts connections on the loopback port; RuntimeError when its process ended or time ran
    out first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start on port {port}") from None
            time.sleep(0.05)


def stop_process(proc: subprocess.Popen | None) -> None:
    """A server's process ended (asked, then waited for)."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        proc.wait(15)


class GitDaemon:
    """``git daemon`` exporting every repository under ``base``, on a free port."""

    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> GitDaemon:
        self.proc = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={self.base}",
                                      "--listen=127.0.0.1", f"--port={self.port}", str(self.base)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, "git daemon", self.proc)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)


class _GitCgi(SimpleHTTPRequestHandler):
    """Git's smart HTTP: each request handed to ``git http-backend`` (CGI), behind basic auth when the server has it."""

    def log_message(self, *args) -> None:
        pass

    def _serve(self) -> None:
        server = self.server.git  # type: ignore[attr-defined]
        if server.auth is not None:
            expected = "Basic " + base64.b64encode(":".join(server.auth).encode()).decode()
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {"GIT_PROJECT_ROOT": str(server.base), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
               "QUERY_STRING": query, "REQUEST_METHOD": self.command, "CONTENT_TYPE":
               self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "PATH": os.environ.get("PATH", "")}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        headers = [line.split(":", 1) for line in head.decode().split("\r\n") if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.send_response(status)
        for name, value in headers:
            if name.lower() != "status":
                self.send_header(name, value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()


class GitHttpServer:
    """``git http-backend`` over HTTP for every repository under ``base``; ``auth``: (user, password) it asks for."""

    def __init__(self, base: Path, auth: tuple[str, str] | None = None) -> None:
        self.base, self.auth = base, auth
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _GitCgi)
        self.server.git = self  # type: ignore[attr-defined]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def __enter__(self) -> GitHttpServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
