"""The passages' model pass, one session on every core against one session of one thread per core side by side.

    .venv/bin/python -m agentsearch.bench.embedding_sessions [--docs 300] [--rounds 3]

The first ``--docs`` SciFact abstracts chunked as ingestion chunks them, and the sentences of those chunks, each
embedded in calls of 512 texts (``ChunkingConfig.embed_batch``, what an ingest task sends at once) by the int8 graph
on two engines in one process: ``OnnxEngine`` with one session on every core (the runtime before) and with
``parallel=True`` (the default since). The engines alternate within each round; wall and CPU seconds of each side are
kept with the 1-minute load, medians reported, and written to src/agentsearch/bench/results/embedding_sessions.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from agentsearch.bench.common import load_average, machine

REPO = Path(__file__).resolve().parents[3]
SIDES = {"one session, every core": False, "sessions of one thread side by side": True}
CALL = 512  # ChunkingConfig().embed_batch: ingestion's calls, each split by the engine into batches of 32


def texts_of(docs: int) -> tuple[list[str], list[str]]:
    """The chunks of the first ``docs`` SciFact abstracts as ingestion embeds them, and their distinct sentences."""
    from agentsearch.bench.ingest import CORPUS, chunk_texts
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
    from agentsearch.pipeline.text import whole_sentences

    chunks = chunk_texts(load_beir_corpus(CORPUS)[:docs], ChunkingConfig())
    return chunks, list(dict.fromkeys(s for chunk in chunks for s in whole_sentences(chunk)))


def timed_pass(encode, texts: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (this process, all its threads) to embed ``texts`` in calls of ``CALL``."""
    started, cpu = time.perf_counter(), os.times()
    for start in range(0, len(texts), CALL):
        encode(texts[start:start + CALL])
    after = os.times()
    return time.perf_counter() - started, (after.user - cpu.user) + (after.system - cpu.system)


def measure(docs: int = 300, rounds: int = 3) -> dict:
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.retrieval.model_files import resolve_model_path
    from agentsearch.pipeline.retrieval.onnx_engine import OnnxEngine
    from agentsearch.pipeline.retrieval.onnx_export import onnx_model_for

    settings = get_settings()
    path = onnx_model_for(settings.embedding_model, "onnx-int8", settings.model_cache_dir)
    assert path is not None
    model = resolve_model_path(settings.embedding_model)
    chunks, sentences = texts_of(docs)
    engines = {side: OnnxEngine(model, path, threads=settings.embedding_threads, parallel=parallel)
               for side, parallel in SIDES.items()}
    for engine in engines.values():
        engine.encode(chunks[:CALL])  # the sessions are made at the first pass
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for round_ in range(rounds):
        order = list(SIDES) if round_ % 2 == 0 else list(reversed(SIDES))
        for side in order:
            load = load_average()[0]
            chunk_s, chunk_cpu = timed_pass(engines[side].encode, chunks)
            sentence_s, sentence_cpu = timed_pass(engines[side].encode, sentences)
            runs[side].append({"chunks_s": round(chunk_s, 2), "chunks_cpu_s": round(chunk_cpu, 2),
                               "sentences_s": round(sentence_s, 2), "sentences_cpu_s": round(sentence_cpu, 2),
                               "load": round(load, 2)})
            print(f"round {round_ + 1}, {side}: {runs[side][-1]}", flush=True)
    return {"docs": docs, "chunks": len(chunks), "sentences": len(sentences), "rounds": rounds,
            "cores": os.cpu_count(), "runs": runs}


def medians(result: dict) -> dict[str, dict[str, float]]:
    return {side: {key: round(statistics.median(run[key] for run in runs), 2) for key in runs[0]}
            for side, runs in result["runs"].items()}


def report(result: dict, command: str) -> str:
    rows = medians(result)
    before, after = (rows[side] for side in SIDES)
    lines = ["# The passages' pass: one session on every core, or sessions of one thread side by side", "",
             f"`{command}` on {machine()['CPU model']} ({result['cores']} cores): {result['chunks']} chunks of the "
             f"first {result['docs']} SciFact abstracts "
             f"and their {result['sentences']} distinct sentences, int8 graph, calls of {CALL} texts, "
             f"{result['rounds']} rounds alternating the sides (medians).", "",
             "| side | chunks s | chunks CPU s | sentences s | sentences CPU s | load (1 min) |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {side} | {r['chunks_s']:.1f} | {r['chunks_cpu_s']:.1f} | {r['sentences_s']:.1f} | "
              f"{r['sentences_cpu_s']:.1f} | {r['load']:.2f} |" for side, r in rows.items()]
    speedup = (before["chunks_s"] + before["sentences_s"]) / (after["chunks_s"] + after["sentences_s"])
    lines += ["", f"Side by side ÷ one session, wall time of both passes: **{speedup:.2f}×** as fast.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = measure(args.docs, args.rounds)
    text = report(result, f".venv/bin/python -m agentsearch.bench.embedding_sessions --docs {args.docs} "
                          f"--rounds {args.rounds}")
    (REPO / "src/agentsearch/bench/results/embedding_sessions.md").write_text(text)
    (REPO / "src/agentsearch/bench/results/embedding_sessions.json").write_text(json.dumps(result, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
