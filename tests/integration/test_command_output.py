"""What ``agentsearch ingest`` prints, run as a user runs it: its progress bar and its result line, nothing else.

The command runs without ``AGENTSEARCH_API_URL`` (the API, the worker threads and the model in its own process)
against a real ``milvus-lite server`` process. It printed the model libraries' "Loading weights" bars and warnings
(``src/agentsearch/cli/quiet.py``), and gRPC's GOAWAY "too_many_pings" lines: pymilvus's client pinged an idle
connection every 10 s, which milvus-lite server, on gRPC core's defaults, refuses (``GRPC_OPTIONS`` in
``src/agentsearch/pipeline/retrieval/vector_store.py``). The GOAWAY came after 140 s of idle connection, longer than a
small ingest lasts: the second test reads the pings themselves in gRPC's trace, beside a client on pymilvus's own
options, which does send them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agentsearch.devstack import BIN, REPO, free_port, start_milvus_lite, stop_process

pytestmark = pytest.mark.integration

DOCUMENTS = [
    {"id": "gates", "title": "Opening hours", "text": "Gate 2 opens at nine in the evening for late deliveries."},
    {"id": "leave", "title": "Annual leave", "text": "Staff take twenty-eight days of annual leave a year."},
    {"id": "canteen", "title": "Canteen", "text": "The canteen serves lunch from noon until two o'clock."},
]
NOISE = ("GOAWAY", "too_many_pings", "Loading weights", "Traceback", "Warning", "WARNING")

# A client that idles past pymilvus's 10 s keepalive; "ours" has the store's GRPC_OPTIONS, "pymilvus" none of them.
IDLE_CLIENT = """
import sys, time
from agentsearch.pipeline.retrieval import vector_store
if sys.argv[2] == "pymilvus":
    vector_store.GRPC_OPTIONS = {}
store = vector_store.VectorStore(sys.argv[1])
store._client.list_collections()
time.sleep(13)
store._client.list_collections()
"""


@pytest.fixture(scope="module")
def milvus_uri(tmp_path_factory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("quiet-milvus")
    port = free_port()
    proc = start_milvus_lite(workdir / "data", port, dict(os.environ), workdir / "milvus.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def test_ingest_prints_its_progress_bar_and_its_result_and_nothing_else(milvus_uri, tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSEARCH_")}
    env.update(AGENTSEARCH_DATA_DIR=str(tmp_path / "data"), AGENTSEARCH_MILVUS_URI=milvus_uri,
               # The model on torch (sentence-transformers), whose every load printed "Loading weights"; the
               # ONNX Runtime export prints its warnings only the first time, when it builds the model.
               AGENTSEARCH_EMBEDDING_RUNTIME="torch")
    done = subprocess.run([str(BIN / "agentsearch"), "ingest", str(path), "--collection", "quiet"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    for noise in NOISE:
        assert noise not in output, output
    assert done.stderr == ""
    # Not on a terminal, click's bar is its label, once.
    *bar, result = done.stdout.splitlines()
    assert bar == [f"indexing {len(DOCUMENTS)} documents"], done.stdout
    assert re.fullmatch(rf"collection quiet \([0-9a-f-]+\): {len(DOCUMENTS)} indexed, 0 failed", result), result


def test_an_idle_connection_sends_milvus_no_ping(milvus_uri):
    env = {**os.environ, "GRPC_VERBOSITY": "debug", "GRPC_TRACE": "http_keepalive"}
    clients = {options: subprocess.Popen([sys.executable, "-c", IDLE_CLIENT, milvus_uri, options], cwd=REPO, env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for options in ("ours", "pymilvus")}
    pings = {}
    for options, proc in clients.items():
        _, trace = proc.communicate(timeout=120)
        assert proc.returncode == 0, trace[-3000:]
        # A ping sent ("Finish keepalive ping" when its ack comes), not a timer reset by a call ("... cancelled").
        pings[options] = [line for line in trace.splitlines()
                          if "keepalive ping" in line.lower() and "cancel" not in line.lower()]
    assert pings["pymilvus"], "gRPC's trace shows no ping of pymilvus's own keepalive either: it proves nothing"
    assert pings["ours"] == []
