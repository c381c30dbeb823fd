"""How an upload spreads over the ingest workers, and how long a killed worker's documents take to end, measured on
this machine with the default settings (docs/documents.md, "Never stuck").

    .venv/bin/python tests/chaos/measure_ingestion.py [--documents 200] [--task-documents 32] [--kill node|process]

A stack of two worker nodes of one process each on the ingest queue, and beat (the reaper every
``REAPER_INTERVAL_S``, 30 s by default). Prints the upload's tasks, the documents each node indexed, the time to
index them all and the rate; with ``--kill`` a node (main process and pool: SIGKILL) or one pool process is killed
once it has started a task, a new node is started for a killed node, and it prints how long after the kill the lost
documents were sent again (the reaper's line in beat's log) and how long until every document ended.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from agentsearch.devstack import DevStack
from tests.integration.test_ingestion_workers import SENTENCES, documents, rows, under_way, upload, watch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument("--task-documents", type=int, default=32)
    parser.add_argument("--kill", choices=("node", "process"))
    options = parser.parse_args()
    env = {"AGENTSEARCH_INGEST_TASK_DOCUMENTS": str(options.task_documents)}
    with DevStack(Path(tempfile.mkdtemp(prefix="measure-ingestion-")), workers=2, concurrency=1,
                  queues="celery,ingest", user="measure-user", beat=True, extra_env=env) as stack, stack.http() as http:
        docs = documents("measured", SENTENCES)[:options.documents] if options.documents <= 100 else [
            {**d, "id": f"{d['id']}-{k}"} for k in range(-(-options.documents // 100))
            for d in documents("measured", SENTENCES)][:options.documents]
        started = time.monotonic()
        collection_id, accepted = upload(http, "measured", docs)
        print(f"{len(docs)} documents sent as {len(accepted['task_ids'])} tasks")
        killed_at = None
        if options.kill is not None:
            victim = stack.alive_workers()[-1]
            held = under_way(stack, collection_id, stack.worker_names[victim])
            if options.kill == "node":
                stack.kill_worker(victim)
            else:
                for pid in stack.worker_children(victim):
                    os.kill(pid, signal.SIGKILL)
            killed_at, killed_wall = time.monotonic(), time.time()
            print(f"killed {options.kill} {stack.worker_names[victim]} holding {len(held)} documents")
            if options.kill == "node":
                stack.wait_worker_ready(stack.add_worker(queues="celery,ingest", concurrency=1))
        views = watch(http, collection_id, timeout_s=3600, every_s=1.0)
        ended = time.monotonic()
        last = views[-1]["ingestion"]
        print(f"all ended after {ended - started:.1f} s: {views[-1]['documents']}; {last['chunks']} chunks; "
              f"{last['documents_per_s']:.2f} documents/s, {last['chunks_per_s']:.2f} chunks/s over the last minute")
        print("documents per node:", dict(Counter(r[2] for r in rows(stack, collection_id))))
        if killed_at is not None:
            print(f"ended {ended - killed_at:.1f} s after the kill")
            for line in stack.logs["beat"].read_text().splitlines():
                if "lost their worker or task" in line:
                    at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    print(f"sent again {at - killed_wall:.1f} s after the kill: {line[24:]}")


if __name__ == "__main__":
    main()
