"""The API in the embedded mode as a process of its own (SQLite, Milvus Lite and worker threads in one process),
for a browser or a client to reach over HTTP with settings a test chooses: the suite's stack keeps the egress
guard's defaults, while a source read from a loopback server needs ``AGENTSEARCH_EGRESS_ALLOW``.

Usage::

    with EmbeddedApi(tmp_path / "api", {"AGENTSEARCH_EGRESS_ALLOW": '["127.0.0.1"]'}) as api:
        key = api.create_user("reader")        # as an operator makes one: its key
        with api.http(key) as http:
            http.get("/v1/collections")
        api.url                                 # http://127.0.0.1:PORT, what a browser opens
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx

from agentsearch.devstack import BIN, REPO, free_port, start_process, stop_process, wait_for


class EmbeddedApi:
    def __init__(self, workdir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.workdir / "api.log"
        # Nothing of the test process's own AGENTSEARCH_* settings: this API is made of the test's alone.
        self.env = {name: value for name, value in os.environ.items() if not name.upper().startswith("AGENTSEARCH_")}
        self.env.update({"PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
                         "AGENTSEARCH_DATA_DIR": str(self.workdir / "data"), **(extra_env or {})})
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> EmbeddedApi:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = start_process([str(BIN / "agentsearch"), "api", "--host", "127.0.0.1", "--port", str(self.port)],
                                  self.env, self.log)
        try:
            wait_for(lambda: httpx.get(f"{self.url}/readyz").status_code == 200, 120, "embedded api", self.proc,
                     self.log)
        except BaseException:
            stop_process(self.proc)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def create_user(self, name: str) -> str:
        done = subprocess.run([str(BIN / "agentsearch"), "users", "create", name], cwd=REPO, env=self.env,
                              capture_output=True, text=True, check=True)
        return done.stdout.strip().splitlines()[-1]

    def http(self, key: str, timeout_s: float = 30) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout_s, headers={"Authorization": f"Bearer {key}"})
