"""The distributed deployment as local processes: for integration tests, benchmarks and fault drills.

A Redis server of its own on a free port (the broker, results and caches on separate db numbers), a fresh
PostgreSQL database on the machine's server (or, with ``own_postgres=True``, a PostgreSQL server of its own that a
drill may stop), ``milvus-lite server``, migrations, a user with a key, N prefork ``agentsearch worker`` processes,
optionally ``agentsearch beat`` (the reaper), and the API: the processes a deployment runs, on this machine. Two
stacks never share a broker, so their workers never take each other's tasks.

Usage::

    with DevStack(workdir, workers=2, concurrency=1) as stack:
        with stack.http() as http:
            http.post("/v1/collections", json={"name": "docs"})
        stack.restart_redis()                 # a fault drill

    with DevStack(workdir, own_postgres=True, beat=True) as stack:
        stack.stop_postgres()                 # the database goes away; the machine's shared server is untouched
        stack.start_postgres()
        stack.kill_worker(0)                  # SIGKILL a whole node: its main process and its pool
        stack.restart_milvus(down_s=2)        # Milvus restarts on its data dir: collections come back released
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PG_ADMIN = os.environ.get("AGENTSEARCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BROKER_DB, RESULTS_DB, CACHE_DB = 0, 1, 2
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def start_process(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    # A session of its own: stopping it reaches the prefork children too.
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                            start_new_session=True)


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


def stop_process(proc: subprocess.Popen, timeout_s: float = 15, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def ingest_through_api(http: httpx.Client, name: str, documents: list[dict], timeout_s: float = 600) -> str:
    """Create a collection, send the documents, wait until the workers indexed them all; the collection id."""
    created = http.post("/v1/collections", json={"name": name})
    created.raise_for_status()
    collection_id = created.json()["id"]
    for start in range(0, len(documents), 256):
        http.post(f"/v1/collections/{collection_id}/documents",
                  json={"documents": documents[start:start + 256]}).raise_for_status()
    deadline = time.monotonic() + timeout_s
    while True:
        counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
        if counts["pending"] == 0:
            if counts.get("failed"):
                raise RuntimeError(f"indexing failed for some documents: {counts}")
            return collection_id
        if time.monotonic() > deadline:
            raise TimeoutError(f"indexing stuck: {counts}")
        time.sleep(0.3)


class DevStack:
    def __init__(self, workdir: Path, workers: int = 1, concurrency: int = 2, queues: str = "celery,artifacts",
                 extra_env: dict[str, str] | None = None, user: str = "local-user", own_postgres: bool = False,
                 beat: bool = False) -> None:
        self.workdir = Path(workdir)
        self.workers_wanted, self.concurrency, self.queues, self.user = workers, concurrency, queues, user
        self.extra_env = extra_env or {}
        self.db_name = f"agentsearch_dev_{uuid.uuid4().hex[:10]}"
        self.postgres = OwnPostgres() if own_postgres else None
        self.pg_admin = self.postgres.admin_url if self.postgres else PG_ADMIN
        self.with_beat = beat
        self.redis_port, self.milvus_port, self.api_port = free_port(), free_port(), free_port()
        self.redis_base = f"redis://127.0.0.1:{self.redis_port}"
        self.database_url = (self.pg_admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
                             + f"/{self.db_name}")
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.redis_url = f"{self.redis_base}/{CACHE_DB}"
        self.api_key = ""
        self.redis_proc: subprocess.Popen | None = None
        self.milvus_proc: subprocess.Popen | None = None
        self.api_proc: subprocess.Popen | None = None
        self.beat_proc: subprocess.Popen | None = None
        self.worker_procs: list[subprocess.Popen] = []
        self.worker_names: list[str] = []
        self.logs = {name: self.workdir / f"{name}.log" for name in ("redis", "milvus", "api")}
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "AGENTSEARCH_DATA_DIR": str(self.workdir / "data"),
            "AGENTSEARCH_DATABASE_URL": self.database_url,
            "AGENTSEARCH_BROKER_URL": f"{self.redis_base}/{BROKER_DB}",
            "AGENTSEARCH_RESULT_BACKEND": f"{self.redis_base}/{RESULTS_DB}",
            "AGENTSEARCH_REDIS_URL": self.redis_url,
            "AGENTSEARCH_MILVUS_URI": f"http://127.0.0.1:{self.milvus_port}",
            "AGENTSEARCH_API_URL": self.api_url,
            # Soft shutdown also waits when idle; a short one keeps stopping a stack quick.
            "AGENTSEARCH_WORKER_SOFT_SHUTDOWN_TIMEOUT_S": "3",
            **self.extra_env,
        }

    # -- life cycle -------------------------------------------------------------------------------------------

    def __enter__(self) -> "DevStack":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        import psycopg

        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.postgres is not None:
            self.postgres.init()
        with psycopg.connect(self.pg_admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
        self.start_redis()
        self.start_milvus()
        self.cli("migrate")
        self.api_key = self.create_user(self.user)
        # The CLI commands run against this stack act as its user.
        self.env["AGENTSEARCH_API_KEY"] = self.api_key
        for _ in range(self.workers_wanted):
            self.add_worker()
        self.start_api()
        if self.with_beat:
            self.start_beat()
        for i in range(len(self.worker_procs)):
            self.wait_worker_ready(i)

    def stop(self) -> None:
        import psycopg

        for proc in [self.api_proc, self.beat_proc, *reversed(self.worker_procs), self.milvus_proc,
                     self.redis_proc]:
            if proc is not None:
                stop_process(proc)
        if self.postgres is not None:
            self.postgres.remove()  # the whole server goes, database included
            return
        try:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        except psycopg.Error:
            pass  # the server is down (a drill stopped it): the database goes with the next cleanup

    # -- processes --------------------------------------------------------------------------------------------

    def start_redis(self) -> None:
        self.redis_proc = start_process(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(self.workdir),
             "--maxmemory-policy", "noeviction"], self.env, self.logs["redis"])
        import redis

        wait_for(lambda: redis.Redis.from_url(self.redis_base).ping(), 20, "redis", self.redis_proc, self.logs["redis"])

    def restart_redis(self, down_s: float = 2.0) -> None:
        """Stop Redis (the broker and caches) and bring it back with its append-only file, as a restart does."""
        stop_process(self.redis_proc)
        time.sleep(down_s)
        self.start_redis()

    def start_milvus(self) -> None:
        """``milvus-lite server`` on the stack's port and data dir: started again, it finds its collections there."""
        self.milvus_proc = start_process(
            [str(BIN / "milvus-lite"), "server", "--data-dir", str(self.workdir / "milvus"), "--host", "127.0.0.1",
             "--port", str(self.milvus_port)], self.env, self.logs["milvus"])
        wait_for(lambda: socket.create_connection(("127.0.0.1", self.milvus_port), 1).close() or True, 60,
                 "milvus-lite server", self.milvus_proc, self.logs["milvus"])

    def stop_milvus(self) -> None:
        """Stop Milvus (SIGTERM, then SIGKILL after 15 s); its data dir stays for ``start_milvus``."""
        if self.milvus_proc is not None:
            stop_process(self.milvus_proc)

    def milvus_running(self) -> bool:
        return self.milvus_proc is not None and self.milvus_proc.poll() is None

    def restart_milvus(self, down_s: float = 2.0) -> None:
        """Stop Milvus and start it again on its data dir, as a server restart does: every collection is still
        there but released (not loaded) until a client loads it."""
        self.stop_milvus()
        time.sleep(down_s)
        self.start_milvus()

    def stop_postgres(self, mode: str = "fast") -> None:
        """Stop the stack's own PostgreSQL server (``own_postgres=True`` only: never the machine's shared one)."""
        if self.postgres is None:
            raise RuntimeError("this stack uses the machine's PostgreSQL; start it with own_postgres=True")
        self.postgres.stop(mode)

    def start_postgres(self) -> None:
        if self.postgres is None:
            raise RuntimeError("this stack uses the machine's PostgreSQL; start it with own_postgres=True")
        self.postgres.start()

    def start_beat(self) -> None:
        """The periodic scheduler: sends the reaper task every AGENTSEARCH_REAPER_INTERVAL_S."""
        self.logs["beat"] = self.workdir / "beat.log"
        self.beat_proc = start_process([str(BIN / "agentsearch"), "beat", "--loglevel", "INFO"],
                                       {**self.env, "AGENTSEARCH_DATA_DIR": str(self.workdir / "beat")},
                                       self.logs["beat"])

    def start_api(self) -> None:
        self.api_proc = start_process([str(BIN / "agentsearch"), "api", "--host", "127.0.0.1", "--port",
                                       str(self.api_port)], self.env, self.logs["api"])
        wait_for(lambda: httpx.get(f"{self.api_url}/readyz").status_code == 200, 60, "api", self.api_proc,
                 self.logs["api"])

    def add_worker(self, queues: str | None = None, concurrency: int | None = None) -> int:
        index = len(self.worker_procs)
        log = self.workdir / f"worker-{index}.log"
        self.logs[f"worker-{index}"] = log
        name = f"w{index}-{uuid.uuid4().hex[:4]}@{socket.gethostname()}"
        proc = start_process(
            [str(BIN / "agentsearch"), "worker", "--concurrency", str(concurrency or self.concurrency), "--queues",
             queues or self.queues, "--loglevel", "INFO", "--hostname", name],
            self.env, log)
        self.worker_procs.append(proc)
        self.worker_names.append(name)
        return index

    def wait_worker_ready(self, index: int, timeout_s: float = 90) -> None:
        log = self.logs[f"worker-{index}"]
        wait_for(lambda: "ready." in log.read_text(), timeout_s, f"worker {index}", self.worker_procs[index], log)

    def worker_children(self, index: int = 0) -> list[int]:
        """The prefork pool's process ids of one worker (what a SIGKILL drill aims at)."""
        out = subprocess.run(["pgrep", "-P", str(self.worker_procs[index].pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Signal a whole node, main process and pool together (SIGKILL: a lost host; SIGTERM: a scale-down)."""
        proc = self.worker_procs[index]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)

    def alive_workers(self) -> list[int]:
        return [i for i, proc in enumerate(self.worker_procs) if proc.poll() is None]

    # -- helpers ----------------------------------------------------------------------------------------------

    def cli(self, *args: str) -> str:
        done = subprocess.run([str(BIN / "agentsearch"), *args], cwd=REPO, env=self.env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"agentsearch {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def create_user(self, name: str) -> str:
        """A new user, made as an operator makes one; its key is the last line the command prints."""
        return self.cli("users", "create", name).strip().splitlines()[-1]

    def http(self, api_key: str | None = None, timeout_s: float = 30) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, timeout=timeout_s,
                            headers={"Authorization": f"Bearer {api_key or self.api_key}"})

    def sql(self, query: str, *params):
        import psycopg

        with psycopg.connect(self.database_url.replace("+psycopg", "")) as conn:
            return conn.execute(query, params).fetchall()

    def ingest(self, collection: str, documents: list[dict], timeout_s: float = 600) -> str:
        """Create a collection, add documents through the API and wait until the workers indexed them all."""
        with self.http() as http:
            return ingest_through_api(http, collection, documents, timeout_s)

    def describe(self) -> str:
        return json.dumps({"api": self.api_url, "redis": self.redis_base, "database": self.db_name,
                           "workers": len(self.worker_procs), "concurrency": self.concurrency})
