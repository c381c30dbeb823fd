"""One dev stack: Redis, PostgreSQL, ``milvus-lite server``, workers, beat and the API as local processes.

Usage::

    with DevStack(workdir, workers=2, concurrency=1) as stack:
        with stack.http() as http:
            http.post("/v1/collections", json={"name": "docs"})
        stack.restart_redis()                 # a fault drill
        key = stack.create_user("bob")        # through `agentsearch users create`, as an operator would

    with LLMServer(workdir / "llm") as llm, DevStack(workdir, llm=llm) as stack:
        ...                                   # the workers' answers come from the local LLM server

The package docstring (``src/agentsearch/devstack/__init__.py``) says what a stack is made of and the drills it offers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import redis

from agentsearch.devstack.ingest import ingest_through_api
from agentsearch.devstack.postgres import PG_ADMIN, OwnPostgres
from agentsearch.devstack.processes import BIN, REPO, Started, free_port, start_process, stop_process, wait_for

# The stack's Redis holds the broker, the results and the caches on separate db numbers.
BROKER_DB, RESULTS_DB, CACHE_DB = 0, 1, 2


def llm_env(llm) -> dict[str, str]:
    """The settings that give the API and the workers an LLM endpoint: ``llm`` is an ``LLMServer`` (anything with
    ``url``, ``model`` and ``api_key``) or ``(base_url, model)`` / ``(base_url, model, api_key)``; None for none."""
    if llm is None:
        return {}
    base_url, model, api_key = (*llm, None)[:3] if isinstance(llm, tuple) else (llm.url, llm.model, llm.api_key)
    env = {"AGENTSEARCH_OPENAI_BASE_URL": base_url, "AGENTSEARCH_OPENAI_MODEL": model}
    if api_key:
        env["AGENTSEARCH_OPENAI_API_KEY"] = api_key
    return env


def start_milvus_lite(data_dir: Path, port: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``milvus-lite server`` on 127.0.0.1:``port`` with its data in ``data_dir``, once it takes connections."""
    proc = start_process([str(BIN / "milvus-lite"), "server", "--data-dir", str(data_dir), "--host", "127.0.0.1",
                          "--port", str(port)], env, log)
    def listening() -> bool:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return True

    wait_for(listening, 60, "milvus-lite server", proc, log)
    return proc


class DevStack(Started):
    """The processes of a distributed deployment, on this machine, for as long as the ``with`` block lasts."""

    def __init__(self, workdir: Path, workers: int = 1, concurrency: int = 2,
                 queues: str = "celery,artifacts,ingest,webhooks",
                 extra_env: dict[str, str] | None = None, user: str = "local-user", own_postgres: bool = False,
                 beat: bool = False, pool: str = "prefork", llm=None) -> None:
        self.workdir = Path(workdir)
        self.workers_wanted, self.concurrency, self.queues, self.user = workers, concurrency, queues, user
        self.pool = pool
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
            # The tree's own sources first (a checkout's src/, before an editable install of another checkout), and
            # the tree for the tests' agents.
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
            "AGENTSEARCH_DATA_DIR": str(self.workdir / "data"),
            "AGENTSEARCH_DATABASE_URL": self.database_url,
            "AGENTSEARCH_BROKER_URL": f"{self.redis_base}/{BROKER_DB}",
            "AGENTSEARCH_RESULT_BACKEND": f"{self.redis_base}/{RESULTS_DB}",
            "AGENTSEARCH_REDIS_URL": self.redis_url,
            "AGENTSEARCH_MILVUS_URI": f"http://127.0.0.1:{self.milvus_port}",
            "AGENTSEARCH_API_URL": self.api_url,
            # Soft shutdown also waits when idle; a short one keeps stopping a stack quick.
            "AGENTSEARCH_WORKER_SOFT_SHUTDOWN_TIMEOUT_S": "3",
            # Tests, drills and benchmarks send hundreds of jobs at once as one user, and poll them: limits far
            # above the service's defaults (a test that wants small ones sets them per user with `users limits`).
            "AGENTSEARCH_RATE_LIMIT_READS_PER_MINUTE": "100000",
            "AGENTSEARCH_RATE_LIMIT_SEARCHES_PER_MINUTE": "20000",
            "AGENTSEARCH_RATE_LIMIT_INGEST_PER_MINUTE": "20000",
            "AGENTSEARCH_MAX_RUNNING_JOBS": "10000",
            "AGENTSEARCH_MAX_DOCUMENTS": "10000000",
            **llm_env(llm),
            **self.extra_env,
        }

    # -- life cycle -------------------------------------------------------------------------------------------

    def start(self) -> None:
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
        wait_for(lambda: redis.Redis.from_url(self.redis_base).ping(), 20, "redis", self.redis_proc, self.logs["redis"])

    def restart_redis(self, down_s: float = 2.0) -> None:
        """Stop Redis (the broker and caches) and bring it back with its append-only file, as a restart does."""
        if self.redis_proc is not None:
            stop_process(self.redis_proc)
        time.sleep(down_s)
        self.start_redis()

    def start_milvus(self) -> None:
        """``milvus-lite server`` on the stack's port and data dir: started again, it finds its collections there."""
        self.milvus_proc = start_milvus_lite(self.workdir / "milvus", self.milvus_port, self.env, self.logs["milvus"])

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

    def add_worker(self, queues: str | None = None, concurrency: int | None = None, pool: str | None = None) -> int:
        """One more ``agentsearch worker`` (``pool``: prefork processes or threads); its index."""
        index = len(self.worker_procs)
        log = self.workdir / f"worker-{index}.log"
        self.logs[f"worker-{index}"] = log
        name = f"w{index}-{uuid.uuid4().hex[:4]}@{socket.gethostname()}"
        proc = start_process(self.worker_command(
            ["worker", "--pool", pool or self.pool, "--concurrency", str(concurrency or self.concurrency),
             "--queues", queues or self.queues, "--loglevel", "INFO", "--hostname", name]), self.env, log)
        self.worker_procs.append(proc)
        self.worker_names.append(name)
        return index

    def worker_command(self, args: list[str]) -> list[str]:
        """The command line of the next worker, ``agentsearch`` with ``args`` (a subclass may run it elsewhere)."""
        return [str(BIN / "agentsearch"), *args]

    def wait_worker_ready(self, index: int, timeout_s: float = 90) -> None:
        log = self.logs[f"worker-{index}"]
        wait_for(lambda: "ready." in log.read_text(), timeout_s, f"worker {index}", self.worker_procs[index], log)

    def worker_children(self, index: int = 0) -> list[int]:
        """The prefork pool's process ids of one worker (what a SIGKILL drill aims at); none for a thread pool."""
        out = subprocess.run(["pgrep", "-P", str(self.worker_procs[index].pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Signal a whole node, main process and pool together (SIGKILL: a lost host; SIGTERM: a scale-down)."""
        proc = self.worker_procs[index]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)

    def worker_log_lines(self, containing: str) -> list[str]:
        """The lines of every worker's log that contain ``containing``: what a test waits for when the state it
        needs is only visible there (a step that met a fault and scheduled its retry)."""
        return [line for name, log in self.logs.items() if name.startswith("worker-") and log.exists()
                for line in log.read_text(errors="replace").splitlines() if containing in line]

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
        with psycopg.connect(self.database_url.replace("+psycopg", "")) as conn:
            return conn.execute(query, params).fetchall()

    def ingest(self, collection: str, documents: list[dict], timeout_s: float = 600) -> str:
        """Create a collection, add documents through the API and wait until the workers indexed them all."""
        with self.http() as http:
            return ingest_through_api(http, collection, documents, timeout_s)

    def describe(self) -> str:
        return json.dumps({"api": self.api_url, "redis": self.redis_base, "database": self.db_name,
                           "workers": len(self.worker_procs), "concurrency": self.concurrency})
