"""The distributed deployment as local processes: for integration tests, benchmarks and fault drills.

A Redis server of its own on a free port (the broker, results and caches on separate db numbers), a fresh
PostgreSQL database on the machine's server (or, with ``own_postgres=True``, a PostgreSQL server of its own that a
drill may stop), ``milvus-lite server``, migrations, a user with a key, N prefork ``agentsearch worker`` processes,
optionally ``agentsearch beat`` (the reaper), and the API: the processes a deployment runs, on this machine. Two
stacks never share a broker, so their workers never take each other's tasks.

- ``src/agentsearch/devstack/stack.py``: ``DevStack``, the stack and its drills, and ``start_milvus_lite``, its Milvus
  alone;
- ``src/agentsearch/devstack/postgres.py``: the machine's PostgreSQL (``PG_ADMIN``) or ``OwnPostgres``, a server of the
  stack's own;
- ``src/agentsearch/devstack/processes.py``: start a process in a session of its own, wait for it, stop it, read its
  log's tail;
- ``src/agentsearch/devstack/ingest.py``: documents in through the API, waiting until they are indexed.

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

from agentsearch.devstack.ingest import ingest_through_api
from agentsearch.devstack.postgres import PG_ADMIN, OwnPostgres
from agentsearch.devstack.processes import (
    BIN,
    REPO,
    free_port,
    log_tails,
    start_process,
    stop_process,
    wait_for,
    watch_log,
)
from agentsearch.devstack.stack import DevStack, start_milvus_lite

__all__ = [
    "BIN", "PG_ADMIN", "REPO", "DevStack", "OwnPostgres", "free_port", "ingest_through_api", "log_tails",
    "start_milvus_lite", "start_process", "stop_process", "wait_for", "watch_log",
]
