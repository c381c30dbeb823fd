"""PostgreSQL for a dev stack: the machine's server (``PG_ADMIN``), or a server of its own a drill may stop.

Usage::

    server = OwnPostgres()
    server.init()                     # initdb and start, on a free port, trust auth
    server.stop("immediate")          # as if it crashed; server.start() brings it back on the same data
    server.remove()                   # stopped and deleted
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from agentsearch.devstack.processes import free_port, watch_log

# The machine's server, where a stack without a server of its own creates (and drops) a database.
PG_ADMIN = os.environ.get("AGENTSEARCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def pg_binary(name: str) -> str:
    """A PostgreSQL server binary (initdb, pg_ctl): on PATH, or in Debian's versioned directory (newest first)."""
    for directory in PG_BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install the PostgreSQL server package")
    return found


class OwnPostgres:
    """A PostgreSQL server in a directory of its own, on a free port, trust auth: one a drill may stop and start.

    The server refuses to run as root, so as root it runs as the ``postgres`` system user, in a directory that user
    owns (outside the caller's work dir, whose parents a system user may not be allowed to enter).
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.dir = Path(tempfile.mkdtemp(prefix="agentsearch-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *cmd: str) -> None:
        done = subprocess.run([*self.as_user, *cmd], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")

    def init(self) -> None:
        if self.as_user:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(pg_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync",
                  "-E", "UTF8", "--locale=C")
        self.start()

    def start(self) -> None:
        watch_log(self.log)
        # fsync off: a drill's database is thrown away; durability across a crash of the machine is not the point.
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='{self.dir}' "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60",
                  "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: clients are disconnected and the server stops cleanly; ``immediate``: as if it crashed."""
        self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def remove(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except RuntimeError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
