"""The drill stack spread over four hosts made of network namespaces (``agentsearch.devstack.netns``), for the partition
drill.

- ``data``: Redis, a PostgreSQL server of the stack's own, ``milvus-lite server``, beat (the reaper) and the webhook
  receiver (``tests.chaos.receiver``), each listening on the host's address;
- ``api``: the API;
- ``worker1``, ``worker2``: one ``agentsearch worker`` each, on every queue.

The drill's own process stays on the machine, on the bridge's address: it reaches every host, and no cut touches
it. Beat sits with the data services so that the reaper is never the part cut off.

Usage::

    with HostsStack(workdir) as stack:
        stack.hosts.cut("worker1", "data", stack.ports["redis"])
        stack.hosts.heal("worker1")
        stack.deliveries()                   # what the receiver got: one dict per delivery
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import httpx
import redis

from agentsearch.devstack import BIN, OwnPostgres, start_process, stop_process, wait_for
from agentsearch.devstack.netns import Hosts
from agentsearch.devstack.postgres import pg_binary
from agentsearch.devstack.stack import BROKER_DB, CACHE_DB, RESULTS_DB
from tests.chaos.harness import ChaosStack

# Every host has a port space of its own: each service keeps its usual port.
PORTS = {"redis": 6379, "postgres": 5432, "milvus": 19530, "api": 8000, "receiver": 9000}
WORKER_HOSTS = ("worker1", "worker2")


class HostPostgres(OwnPostgres):
    """The stack's own PostgreSQL server, run on ``host`` and listening on its address."""

    def __init__(self, hosts: Hosts, host: str) -> None:
        super().__init__()
        self.address, self.port = hosts.address(host), PORTS["postgres"]
        self.as_user = hosts.command(host, self.as_user)
        self.admin_url = f"postgresql://postgres@{self.address}:{self.port}/postgres"

    def start(self) -> None:
        # initdb trusts the loopback only; the other hosts come over the bridge.
        hba = self.data / "pg_hba.conf"
        network = f"{self.address.rsplit('.', 1)[0]}.0/24"
        if network not in hba.read_text():
            with hba.open("a") as fh:
                fh.write(f"host all all {network} trust\n")
        options = (f"-p {self.port} -c listen_addresses={self.address} -c unix_socket_directories='{self.dir}' "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60",
                  "start")


class HostsStack(ChaosStack):
    def __init__(self, workdir: Path, **kwargs) -> None:
        self.hosts = Hosts(["data", "api", *WORKER_HOSTS])
        self.ports = PORTS
        data = self.hosts.address("data")
        receiver_log = Path(workdir) / "deliveries.jsonl"
        super().__init__(workdir, workers=len(WORKER_HOSTS), concurrency=1, extra_env={
            # The receiver's private address: webhooks may reach it (agentsearch.pipeline.platform.egress refuses it
            # otherwise).
            "AGENTSEARCH_EGRESS_ALLOW": json.dumps([f"{data}/32"]),
            **kwargs.pop("extra_env", {})}, **kwargs)
        self.postgres.remove()  # DevStack's own server on the machine, made but never started: this one instead
        self.postgres = HostPostgres(self.hosts, "data")
        self.pg_admin = self.postgres.admin_url
        self.redis_base = f"redis://{data}:{PORTS['redis']}"
        self.redis_url = f"{self.redis_base}/{CACHE_DB}"
        self.database_url = f"postgresql+psycopg://postgres@{data}:{PORTS['postgres']}/{self.db_name}"
        self.api_url = f"http://{self.hosts.address('api')}:{PORTS['api']}"
        self.receiver_url = f"http://{data}:{PORTS['receiver']}/hook"
        self.receiver_log = receiver_log
        self.receiver_proc = None
        self.env.update({
            "AGENTSEARCH_DATABASE_URL": self.database_url,
            "AGENTSEARCH_BROKER_URL": f"{self.redis_base}/{BROKER_DB}",
            "AGENTSEARCH_RESULT_BACKEND": f"{self.redis_base}/{RESULTS_DB}",
            "AGENTSEARCH_REDIS_URL": self.redis_url,
            "AGENTSEARCH_MILVUS_URI": f"http://{data}:{PORTS['milvus']}",
            "AGENTSEARCH_API_URL": self.api_url,
        })

    def start(self) -> None:
        self.hosts.start()
        super().start()
        self.receiver_proc = start_process(
            self.hosts.command("data", [sys.executable, "-m", "tests.chaos.receiver", self.hosts.address("data"),
                                        str(PORTS["receiver"]), str(self.receiver_log)]),
            self.env, self.workdir / "receiver.log")

    def stop(self) -> None:
        try:
            for host in self.hosts.names:
                self.hosts.heal(host)
            if self.receiver_proc is not None:
                stop_process(self.receiver_proc)
            super().stop()
        finally:
            self.hosts.stop()

    # -- each process on its host -----------------------------------------------------------------------------

    def start_redis(self) -> None:
        data = self.hosts.address("data")
        self.redis_proc = start_process(self.hosts.command("data", [
            "redis-server", "--port", str(PORTS["redis"]), "--bind", data, "--protected-mode", "no", "--save", "",
            "--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(self.workdir),
            "--maxmemory-policy", "noeviction"]), self.env, self.logs["redis"])
        wait_for(lambda: redis.Redis.from_url(self.redis_base).ping(), 20, "redis", self.redis_proc,
                 self.logs["redis"])

    def start_milvus(self) -> None:
        data = self.hosts.address("data")
        self.milvus_proc = start_process(self.hosts.command("data", [
            str(BIN / "milvus-lite"), "server", "--data-dir", str(self.workdir / "milvus"), "--host", data,
            "--port", str(PORTS["milvus"])]), self.env, self.logs["milvus"])
        wait_for(lambda: socket.create_connection((data, PORTS["milvus"]), 1).close() or True, 60,
                 "milvus-lite server", self.milvus_proc, self.logs["milvus"])

    def start_api(self) -> None:
        self.api_proc = start_process(self.hosts.command("api", [
            str(BIN / "agentsearch"), "api", "--host", self.hosts.address("api"), "--port", str(PORTS["api"])]),
            self.env, self.logs["api"])
        wait_for(lambda: httpx.get(f"{self.api_url}/readyz").status_code == 200, 60, "api", self.api_proc,
                 self.logs["api"])

    def start_beat(self) -> None:
        self.logs["beat"] = self.workdir / "beat.log"
        self.beat_proc = start_process(self.hosts.command("data", [str(BIN / "agentsearch"), "beat", "--loglevel",
                                                                   "INFO"]),
                                       {**self.env, "AGENTSEARCH_DATA_DIR": str(self.workdir / "beat")},
                                       self.logs["beat"])

    def worker_command(self, args: list[str]) -> list[str]:
        return self.hosts.command(WORKER_HOSTS[len(self.worker_procs)], super().worker_command(args))

    def worker_host(self, index: int) -> str:
        return WORKER_HOSTS[index]

    def deliveries(self) -> list[dict]:
        """Every POST the receiver got, as it logged them."""
        if not self.receiver_log.exists():
            return []
        return [json.loads(line) for line in self.receiver_log.read_text().splitlines() if line]
