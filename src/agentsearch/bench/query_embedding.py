"""The query side of the embedding runtimes: how long embedding one query takes on each, in one run.

    .venv/bin/python -m agentsearch.bench.query_embedding [--queries 200] [--rounds 3]

Each runtime (``AGENTSEARCH_EMBEDDING_RUNTIME``: torch, the runtime before ONNX; onnx; onnx-int8, the default) embeds
the same SciFact claims one at a time, as a job's search does; rounds alternate the runtimes and the median of each
round's p50 is reported, because these machines are noisy. Results go to
src/agentsearch/bench/results/query_embedding.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from agentsearch.bench.common import SCIFACT, machine

REPO = Path(__file__).resolve().parents[3]
RUNTIMES = ("torch", "onnx", "onnx-int8")


def measure(queries: int = 200, rounds: int = 3) -> dict:
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.retrieval.embedder import Embedder
    from agentsearch.pipeline.retrieval.onnx_export import onnx_model_for

    settings = get_settings()
    lines = (SCIFACT / "queries_train.jsonl").read_text().splitlines()[:queries]
    claims = [json.loads(line)["text"] for line in lines]
    model = settings.embedding_model
    embedders = {runtime: Embedder(model, onnx_path=onnx_model_for(model, runtime, settings.model_cache_dir),
                                   threads=settings.embedding_threads)
                 for runtime in RUNTIMES}
    for embedder in embedders.values():
        embedder.embed_queries(claims[:8])  # warm-up: the first pass pays for lazy initialisation
    p50s: dict[str, list[float]] = {runtime: [] for runtime in RUNTIMES}
    for _ in range(rounds):
        for runtime, embedder in embedders.items():
            times = []
            for claim in claims:
                started = time.perf_counter()
                embedder.embed_queries([claim])
                times.append((time.perf_counter() - started) * 1000)
            p50s[runtime].append(statistics.median(times))
    medians = {runtime: statistics.median(values) for runtime, values in p50s.items()}
    return {"queries": len(claims), "rounds": rounds, "p50_ms": medians, "rounds_p50_ms": p50s,
            "ratio_torch_to_default": medians["torch"] / medians["onnx-int8"]}


def write(result: dict, command: str) -> str:
    about = machine()
    rows = "\n".join(f"| {runtime} | {result['p50_ms'][runtime]:.1f} | "
                     f"{', '.join(f'{x:.1f}' for x in result['rounds_p50_ms'][runtime])} |" for runtime in RUNTIMES)
    report = f"""# Embedding one query

Command: `{command}`
Machine: {about['nproc']} CPUs ({about['CPU model']}), Python {about['Python']}.
Data: the first {result['queries']} SciFact training claims, one at a time.

| runtime | p50 ms (median of rounds) | each round's p50 |
|---|---:|---|
{rows}

torch ÷ onnx-int8: **{result['ratio_torch_to_default']:.2f}**
"""
    out = REPO / "src" / "agentsearch" / "bench" / "results" / "query_embedding.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = measure(args.queries, args.rounds)
    command = f".venv/bin/python -m agentsearch.bench.query_embedding --queries {args.queries} --rounds {args.rounds}"
    print(write(result, command))


if __name__ == "__main__":
    main()
