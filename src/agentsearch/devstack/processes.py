"""The process helpers a dev stack is made of: start a service in a session of its own, wait for it, stop it.

Usage::

    proc = start_process([str(BIN / "agentsearch"), "api", "--port", str(port)], env, workdir / "api.log")
    wait_for(lambda: httpx.get(url).status_code == 200, 60, "api", proc, workdir / "api.log")
    stop_process(proc)                     # SIGTERM to its whole process group, SIGKILL after 15 s
    log_tails(since=started_at)            # tails of the running processes' logs and of those written since
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

from agentsearch.pipeline.platform.ports import free_port

__all__ = ["BIN", "REPO", "free_port", "listening", "log_tails", "start_process", "stop_process", "wait_for",
           "watch_log"]

REPO = Path(__file__).resolve().parents[3]
# The virtual environment's scripts (agentsearch, milvus-lite), beside the interpreter running this.
BIN = Path(sys.executable).parent


def wait_for(predicate, timeout_s: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n{tail}")
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise TimeoutError(f"{what} not ready after {timeout_s} s\n{tail}")


def listening(port: int) -> bool:
    """True once a server takes connections on the loopback ``port`` (``wait_for`` retries what raises)."""
    socket.create_connection(("127.0.0.1", port), 1).close()
    return True


# Every log a process of this interpreter was started with, and the process (None for a server started by its own
# tool): when a test that drives a stack fails, tests/conftest.py prints their tails with the failure.
_LOGS: dict[Path, subprocess.Popen | None] = {}


def log_tails(since: float, lines: int = 40) -> list[tuple[Path, str]]:
    """The last ``lines`` lines of the log of each process still running, and of each log written to at or after
    ``since`` (a ``time.time()``): a process that stopped during a test is read too, one stopped before is not."""
    tails = []
    for log, proc in _LOGS.items():
        try:
            if (proc is None or proc.poll() is not None) and log.stat().st_mtime < since:
                continue
            text = log.read_text(errors="replace")
        except OSError:
            continue  # removed with its test's temporary directory
        tails.append((log, "\n".join(text.splitlines()[-lines:])))
    return tails


def watch_log(log: Path, proc: subprocess.Popen | None = None) -> None:
    """Count ``log`` among the logs ``log_tails`` reads (``proc`` None: a server started by its own tool, as
    ``pg_ctl`` starts PostgreSQL)."""
    _LOGS[Path(log)] = proc


def start_process(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    # A session of its own: stopping it reaches the prefork children too.
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    watch_log(log, proc)
    return proc


def stop_process(proc: subprocess.Popen, timeout_s: float = 15, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


class Started:
    """Started on entering a ``with`` block (stopped again if the start fails part-way), stopped on leaving it."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class LocalServer(Started):
    """A server on 127.0.0.1 for as long as a ``with`` block lasts (``start``/``stop`` for drills): a subclass
    names its ``command()``, its ``environment()`` and the URL that answers 200 once it is ready (``ready_url``).
    ``start_s`` is how long the last start took, until the server answered."""

    name = "server"
    start_timeout_s = 180.0

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.log = self.workdir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None
        self.start_s = 0.0

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    @property
    def ready_url(self) -> str:
        return f"{self.root}/health"

    def start(self) -> None:
        import httpx

        command = self.command()  # may install the server first: not part of its start time
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.proc = start_process(command, self.environment(), self.log)
        wait_for(lambda: httpx.get(self.ready_url, timeout=2).status_code == 200, self.start_timeout_s, self.name,
                 self.proc, self.log)
        self.start_s = time.monotonic() - started

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def serve(self, settings: str) -> None:
        """Start, print the settings that point agentsearch at the server, and run until Ctrl-C or a SIGTERM (the
        server runs in a session of its own, which a ``kill`` of this command does not reach: it is stopped on the
        way out)."""
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with self:
            print(f"{settings}  (log: {self.log}; Ctrl-C stops it)", flush=True)
            proc = self.proc
            assert proc is not None  # started by `with self`
            try:
                proc.wait()
            except KeyboardInterrupt:
                pass
