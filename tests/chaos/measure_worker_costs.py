"""What a worker process pays for the embedding model, measured on this machine (docs/reliability.md).

    .venv/bin/python tests/chaos/measure_worker_costs.py [--profile]

Prints how long loading the model takes (what a replacement pool process would pay without the model preloaded
in the worker's main process), the answer step's time with torch's default thread count and with one thread per
process, and with ``--profile`` where the answer step spends its time (pyinstrument, if installed).
"""

from __future__ import annotations

import json
import sys
import time

import torch

from agentsearch.devstack import REPO
from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from agentsearch.pipeline.retrieval.embedder import Embedder

ROUNDS = 10


def main() -> None:
    started = time.perf_counter()
    embedder = Embedder("all-MiniLM-L6-v2")
    print(f"model load: {time.perf_counter() - started:.2f} s")
    sample = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
    corpus = [json.loads(line) for line in sample.read_text().splitlines() if line]
    state = JobState(job_id="j", collection_id="c", query="What was Northwind Energy's revenue in 2024?",
                     documents=[Document(id=d["id"], title=d["title"], text=d["text"], score=0.9) for d in corpus[:5]])
    embedder.embed(["warm up"])
    for threads in sorted({torch.get_num_threads(), 1}, reverse=True):
        torch.set_num_threads(threads)
        started = time.perf_counter()
        for _ in range(ROUNDS):
            answer_step(state, embed=embedder.embed)
        print(f"answer step, {threads} torch thread(s): {(time.perf_counter() - started) / ROUNDS:.3f} s")
    if "--profile" in sys.argv:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        for _ in range(5):
            answer_step(state, embed=embedder.embed)
        profiler.stop()
        print(profiler.output_text())


if __name__ == "__main__":
    main()
