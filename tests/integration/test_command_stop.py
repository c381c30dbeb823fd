"""``agentsearch ingest`` stopped by Ctrl-C while its worker threads index: it ends, says so, and loses nothing.

The command on the embedded defaults (the API, the worker threads and Milvus Lite in its own process), as the
README runs it. Stopped mid-way, it used to leave the interpreter's exit to its worker threads: the exit refused
Milvus Lite's in-process server any new work while a thread's upsert still waited on it, so every upsert ran to
its gRPC deadline, and the command ended minutes later in a page of tracebacks (or, with tasks still queued behind
them, not at all). Now it waits for the tasks its threads hold, drops the queued ones, and exits 130; sending the
same file again indexes the rest.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from agentsearch.devstack import BIN, REPO

pytestmark = pytest.mark.integration

DOCUMENTS = [{"id": f"note-{i}", "title": f"Note {i}",
              "text": " ".join(f"Item {i}.{j} of the register lists {j * 7 + i} boxes kept in room {j}."
                               for j in range(12))}
             for i in range(120)]


def command(path, env) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "agentsearch"), "ingest", str(path), "--collection", "stopped"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# Two commands each starting the whole embedded service: minutes on a crowded machine, past the suite's default.
@pytest.mark.timeout(900)
def test_ingest_stopped_mid_way_exits_at_once_and_the_same_command_finishes_the_rest(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSEARCH_")}
    # Tasks of four documents: many queued behind the four the worker threads hold when the signal comes.
    env.update(AGENTSEARCH_DATA_DIR=str(tmp_path / "data"), AGENTSEARCH_INGEST_TASK_DOCUMENTS="4")

    stopped = command(path, env)
    assert stopped.stdout is not None
    assert stopped.stdout.readline().strip() == f"indexing {len(DOCUMENTS)} documents"
    time.sleep(3)
    assert stopped.poll() is None, "the command ended before it could be stopped"
    stopped.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = stopped.communicate(timeout=600)
    waited = time.monotonic() - sent

    assert stopped.returncode == 130, out + err
    assert "error: interrupted: the documents are kept" in err
    for noise in ("Traceback", "DEADLINE_EXCEEDED", "cannot schedule new futures"):
        assert noise not in err, err
    # Four tasks of four documents at most were left to finish: far less than the whole set takes.
    assert waited < 120, f"{waited:.0f} s to stop"

    again = command(path, env)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, out + err
    assert re.search(rf": {len(DOCUMENTS)} indexed, 0 failed$", out.strip()), out
