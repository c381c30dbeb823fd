"""Benchmark 5: ingestion through the stack beside the plain embedding model, measured in the same run.

    .venv/bin/python -m agentsearch.bench.ingest [--docs 1000] [--workers 1,2] [--rounds 3] [--threads share] [--json
    OUT] .venv/bin/agentsearch bench ingest --docs 1000 --workers 1,2 --rounds 3 --json ingest.json     # the same
    git worktree add /tmp/before <commit>
    .venv/bin/agentsearch bench ingest --docs 5183 --workers 2 --baseline /tmp/before --no-plain   # before/after

The plain model is what anyone would start from: sentence-transformers with the packaged all-MiniLM-L6-v2 weights,
float32 on the CPU, batches of 32, normalised, in this process with torch's own threads. It embeds each chunk the
stack makes once (the texts ``agentsearch.pipeline.ingestion.indexing`` embeds for a document sent as JSON: the title, a
full stop, the piece), and nothing else.

Through the stack is a ``devstack.DevStack`` per configuration, all started before the first round: its own Redis,
a PostgreSQL database, ``milvus-lite server``, the API and one ``agentsearch worker --pool prefork --queues ingest
--concurrency W``: W ingest worker processes. One node with W processes rather than W nodes of one, because that is
how one host adds processes: the worker shares the host's cores among its own processes
(``src/agentsearch/worker/lifecycle.py``, torch) and the processes share the preloaded model's pages; W nodes on one
host would each take every core. Each process of this tree's stacks gets ``--threads`` threads for a model pass
(``AGENTSEARCH_EMBEDDING_THREADS``, and ``OMP_NUM_THREADS`` for torch): ``share`` is the cores divided among the
processes, 0 every core, several values a stack each. A ``--baseline`` tree (a git worktree of an earlier commit) runs
on stacks of its own, one per W, with its own rule for threads. Before the rounds every stack has gone quiet
(``agentsearch.bench.common.wait_idle``: the workers load the model and warm up after they report ready) and each of its
processes has indexed a few documents. A stack's time runs from the first ``POST /v1/collections/{id}/documents`` (256
documents a request, as ``agentsearch ingest`` sends them) until the API lists every document ``indexed``, a new
collection each round: the API, the tasks, chunking, embedding the chunks and their sentences, BM25 text, the Milvus
writes, PostgreSQL.

Rates count chunks. Each round runs every side once, the order rotating from round to round, and medians are
reported, because these machines are shared and noisy; the 1-minute load average is kept beside each figure. The
table goes to src/agentsearch/bench/results/ingest.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentsearch.bench.common import SCIFACT, Target, bench_stack, ingest, load_average, wait_idle, write_result
from agentsearch.devstack import ingest_through_api

CORPUS = SCIFACT / "corpus.jsonl"
PLAIN_MODEL, PLAIN_BATCH = "all-MiniLM-L6-v2", 32
GOAL_RATIO = 1.5
WARM_UP_DOCUMENTS = 4
# How long one ingestion may take: at the rates of small runs on two busy cores, the whole SciFact corpus through
# a stack of two processes takes one to one and a half hours.
TIMEOUT_S = 4 * 3600


@dataclass(frozen=True)
class Side:
    """One measured configuration: the plain model (``workers`` 0), or a stack of ``tree``'s code."""

    tree: str  # "plain", "this" or "baseline"
    workers: int = 0
    threads: int | None = None  # per process; None: the tree's own rule
    # The --threads value it came from ("share", "0", ...): sides that resolve alike are one side.
    setting: str | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        if self.tree == "plain":
            return "plain"
        return f"{self.tree}:{self.workers}" + ("" if self.threads is None else f":{self.threads}")


def cores() -> int:
    return len(os.sched_getaffinity(0))


def parse_counts(text: str) -> tuple[int, ...]:
    """``"1,2"`` -> ``(1, 2)``: process counts, each at least 1, in the order given, once each."""
    try:
        counts = tuple(dict.fromkeys(int(part) for part in text.split(",") if part.strip()))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise ValueError(f"worker process counts must be integers of at least 1: {text!r}")
    return counts


def parse_threads(text: str) -> tuple[str, ...]:
    """``"share,0"`` -> ``("share", "0")``: each ``share`` or a thread count (0: every core)."""
    values = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not values or any(v != "share" and not (v.isdigit() and int(v) <= 256) for v in values):
        raise ValueError(f"threads are 'share' or integers from 0 to 256: {text!r}")
    return values


def threads_for(value: str, workers: int, available: int) -> int:
    """Threads of one model pass in each of ``workers`` processes: ``share`` divides the cores among them (one
    process: 0, every core, which is the settings' own default)."""
    if value != "share":
        return int(value)
    return 0 if workers == 1 else max(1, available // workers)


def sides_of(workers: tuple[int, ...], threads: tuple[str, ...], baseline: bool, plain: bool = True,
             available: int | None = None) -> list[Side]:
    """The plain model, this tree's stacks for every process count and thread setting, the baseline's for every
    process count; a setting that resolves to one already listed is measured once."""
    available = available or cores()
    this = [Side("this", w, threads_for(t, w, available), t) for w in workers for t in threads]
    before = [Side("baseline", w) for w in workers] if baseline else []
    return ([Side("plain")] if plain else []) + list(dict.fromkeys(this)) + before


def chunk_texts(documents: list[dict], chunking) -> list[str]:
    """What ``index_documents`` embeds as chunks for documents sent as JSON (no parts): each piece with its heading,
    the title."""
    from agentsearch.pipeline.ingestion.chunking import chunk_parts, heading_of

    texts = []
    for d in documents:
        heading = heading_of(d["title"], {})
        texts += [f"{heading}. {piece}" if heading else piece
                  for piece, _ in chunk_parts(d["text"], None, chunking.max_chars, chunking.overlap_chars)]
    return texts


def timed_ingest(target: Target, name: str, documents: list[dict]) -> tuple[float, int | None]:
    """Seconds from the first POST of documents until every document is indexed, and the chunks the API counted
    (None from a tree whose API does not say)."""
    first_post: list[float] = []

    def note(request) -> None:
        if not first_post and request.method == "POST" and request.url.path.endswith("/documents"):
            first_post.append(time.perf_counter())

    with target.http() as http:
        http.event_hooks = {"request": [note], "response": []}
        collection_id = ingest_through_api(http, name, documents, TIMEOUT_S)
        seconds = time.perf_counter() - first_post[0]
        ingestion = http.get(f"/v1/collections/{collection_id}").json().get("ingestion") or {}
    return seconds, ingestion.get("chunks")


def warm_up(stack, documents: list[dict]) -> None:
    """Each ingest process indexes a few documents first (its first pass, its connections): one collection per
    process at once, so that every process takes one of the tasks."""
    target, processes = Target.of(stack), stack.concurrency
    with ThreadPoolExecutor(processes) as pool:
        list(pool.map(lambda i: ingest(target, f"bench-ingest-warm-up-{i}", documents[:WARM_UP_DOCUMENTS]),
                      range(processes)))


def settle(stack) -> float:
    """Wait until the stack's workers and its Milvus stop computing (Milvus builds indexes after a write)."""
    return wait_idle(stack, also=[stack.milvus_proc.pid])


def _stack(side: Side, workdir: Path, baseline: Path | None):
    options: dict[str, Any] = {"workers": 1, "concurrency": side.workers, "queues": "ingest"}
    if side.tree == "baseline":
        from agentsearch.bench.hop import _stack_of

        assert baseline is not None  # sides_of makes a baseline side only when a baseline tree is given

        return _stack_of(baseline, workdir, **options)
    threads = str(side.threads)
    return bench_stack(workdir, extra_env={"AGENTSEARCH_EMBEDDING_THREADS": threads,
                                           "OMP_NUM_THREADS": threads if side.threads else str(cores())}, **options)


def measure(docs: int | None = 1000, workers: tuple[int, ...] = (1, 2), rounds: int = 3,
            threads: tuple[str, ...] = ("share",), baseline: Path | None = None, plain: bool = True,
            corpus: Path = CORPUS) -> dict:
    """Every side's seconds per round (see the module's docstring); ``public`` makes the figures of them."""
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
    from agentsearch.pipeline.platform.settings import Settings

    documents = load_beir_corpus(corpus)[:docs]
    settings = Settings()  # the stacks' processes read the same environment
    chunking = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    texts = chunk_texts(documents, chunking)
    sides = sides_of(workers, threads, baseline is not None, plain)
    model = _plain_model() if plain else None
    result: dict[str, Any] = {"docs": len(documents), "chunks": len(texts), "chunk_chars": chunking.max_chars,
              "overlap_chars": chunking.overlap_chars, "rounds": rounds, "cores": cores(),
              "runtime": getattr(settings, "embedding_runtime", "torch"),
              "baseline_tree": str(baseline) if baseline else None, "load_at_start": load_average(),
              "sides": [{"key": s.key, "tree": s.tree, "workers": s.workers, "threads": s.threads,
                         "setting": s.setting, "seconds": [],
                         "loads": [], "chunks_counted": None} for s in sides]}
    if model is not None:
        import torch

        result["plain_model"] = {"model": PLAIN_MODEL, "batch_size": PLAIN_BATCH,
                                 "torch_threads": torch.get_num_threads()}
    record = {r["key"]: r for r in result["sides"]}
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, contextlib.ExitStack() as open_:
        started, stacks = time.monotonic(), {}
        for side in (s for s in sides if s.tree != "plain"):
            stacks[side.key] = open_.enter_context(_stack(side, Path(tmp) / side.key.replace(":", "-"), baseline))
        for stack in stacks.values():
            settle(stack)
            warm_up(stack, documents)
            settle(stack)
        result["setup_s"] = round(time.monotonic() - started, 1)
        print(f"{len(stacks)} stacks started, quiet and warmed up in {result['setup_s']:.0f} s", flush=True)
        for round_ in range(rounds):
            shift = round_ % len(sides)
            for side in sides[shift:] + sides[:shift]:
                row = record[side.key]
                row["loads"].append(round(load_average()[0], 2))
                if side.tree == "plain":
                    seconds = _plain_pass(model, texts)
                else:
                    seconds, counted = timed_ingest(Target.of(stacks[side.key]), f"bench-ingest-{round_}", documents)
                    row["chunks_counted"] = counted
                    if counted not in (None, len(texts)):
                        print(f"warning: the stack indexed {counted} chunks, the plain model embeds {len(texts)}")
                    settle(stacks[side.key])
                row["seconds"].append(seconds)
                print(f"round {round_ + 1}, {side.key}: {seconds:.1f} s, {len(texts) / seconds:.1f} chunks/s "
                      f"(load {row['loads'][-1]:.2f})", flush=True)
    result["load_at_end"] = load_average()
    return result


def _plain_model():
    from sentence_transformers import SentenceTransformer

    from agentsearch.pipeline.retrieval.model_files import resolve_model_path

    model = SentenceTransformer(str(resolve_model_path(PLAIN_MODEL)), device="cpu")
    model.encode(["warm-up: the first pass pays for lazy initialisation"] * PLAIN_BATCH, batch_size=PLAIN_BATCH)
    return model


def _plain_pass(model, texts: list[str]) -> float:
    started = time.perf_counter()
    model.encode(texts, batch_size=PLAIN_BATCH, normalize_embeddings=True, show_progress_bar=False)
    return time.perf_counter() - started


# -- the figures and the table ------------------------------------------------------------------------------------


def public(result: dict) -> dict:
    """What ``agentsearch bench ingest --json`` writes: the headline (this tree's stack with the most processes and
    the first thread setting, over the plain model), every side's medians, two processes over one, before over
    after."""
    chunks = result["chunks"]
    sides = []
    for row in result["sides"]:
        seconds = statistics.median(row["seconds"])
        sides.append({**{k: row[k] for k in ("key", "tree", "workers", "threads", "setting", "chunks_counted")},
                      "seconds": round(seconds, 2), "chunks_per_s": round(chunks / seconds, 2),
                      "rounds_seconds": [round(s, 2) for s in row["seconds"]],
                      "rounds_chunks_per_s": [round(chunks / s, 2) for s in row["seconds"]], "loads": row["loads"]})
    plain = next((s for s in sides if s["tree"] == "plain"), None)
    this = [s for s in sides if s["tree"] == "this"]
    # This tree's sides of the first thread setting listed, by process count: what the headline, the scaling and
    # before / after compare.
    by_workers = {s["workers"]: s for s in this if s["setting"] == this[0]["setting"]}
    headline = by_workers[max(by_workers)] if by_workers else None
    figures = {
        "docs": result["docs"], "chunks": chunks, "chunk_chars": result["chunk_chars"],
        "overlap_chars": result["overlap_chars"], "rounds": result["rounds"], "cores": result["cores"],
        "runtime": result["runtime"],
        "workers": headline["workers"] if headline else None, "threads": headline["threads"] if headline else None,
        "stack_chunks_per_s": headline["chunks_per_s"] if headline else None,
        "plain_model_chunks_per_s": plain["chunks_per_s"] if plain else None,
        "ratio": round(headline["chunks_per_s"] / plain["chunks_per_s"], 3) if headline and plain else None,
        "stack_seconds": headline["seconds"] if headline else None,
        "plain_model_seconds": plain["seconds"] if plain else None,
        "goal_ratio": GOAL_RATIO, "sides": sides,
        "load_average": {"start": result["load_at_start"], "end": result["load_at_end"]},
        "setup_s": result["setup_s"],
        "plain_model": result.get("plain_model"), "baseline_tree": result["baseline_tree"],
    }
    if len(by_workers) > 1:
        low, high = by_workers[min(by_workers)], by_workers[max(by_workers)]
        figures["scaling"] = {"workers": [low["workers"], high["workers"]],
                              "chunks_per_s": [low["chunks_per_s"], high["chunks_per_s"]],
                              "ratio": round(high["chunks_per_s"] / low["chunks_per_s"], 3)}
    before = {s["workers"]: s for s in sides if s["tree"] == "baseline"}
    figures["before_after"] = [
        {"workers": w, "threads": by_workers[w]["threads"], "seconds_before": b["seconds"],
         "seconds_after": by_workers[w]["seconds"], "speedup": round(b["seconds"] / by_workers[w]["seconds"], 3)}
        for w, b in before.items() if w in by_workers]
    return figures


def _threads(side: dict) -> str:
    if side["tree"] == "baseline":
        return "its own"
    return "every core" if side["threads"] == 0 else str(side["threads"])


def report_lines(figures: dict) -> list[str]:
    """The table of every side, then the headline against the goal, two processes over one, and before over after."""
    plain = figures["plain_model"]
    lines = ["| side | ingest processes | threads each | median s | median chunks/s | rounds, chunks/s | "
             "÷ plain model |", "|---|---:|---|---:|---:|---|---:|"]
    for s in figures["sides"]:
        if s["tree"] == "plain":
            name, processes, threads = ("plain model (sentence-transformers, fp32, batch 32)", "1 (this one)",
                                        f"{plain['torch_threads']} (torch's)")
        else:
            name = "stack, this tree" if s["tree"] == "this" else f"stack, before (`{figures['baseline_tree']}`)"
            processes, threads = str(s["workers"]), _threads(s)
        over = (f"{s['chunks_per_s'] / figures['plain_model_chunks_per_s']:.2f}"
                if figures["plain_model_chunks_per_s"] and s["tree"] != "plain" else "")
        lines.append(f"| {name} | {processes} | {threads} | {s['seconds']:.1f} | {s['chunks_per_s']:.1f} | "
                     f"{', '.join(f'{x:.1f}' for x in s['rounds_chunks_per_s'])} | {over} |")
    lines.append("")
    if figures["ratio"] is not None:
        met = "met" if figures["ratio"] >= figures["goal_ratio"] else "**missed**"
        lines.append(f"Through the stack ({figures['workers']} ingest processes) ÷ the plain model: "
                     f"**{figures['ratio']:.2f}**, goal ≥ {figures['goal_ratio']:g}: {met}.")
    if "scaling" in figures:
        (low, high), ratio = figures["scaling"]["workers"], figures["scaling"]["ratio"]
        lines.append(f"{high} ingest processes ÷ {low}: **{ratio:.2f}**.")
    for b in figures["before_after"]:
        lines.append(f"Wall time with {b['workers']} ingest processes, before / after: {b['seconds_before']:.0f} s / "
                     f"{b['seconds_after']:.0f} s, **{b['speedup']:.2f} times** as fast.")
    return lines


def command_line(docs: int, workers: tuple[int, ...], rounds: int, threads: tuple[str, ...],
                 baseline: Path | None, plain: bool = True, stack: bool = True, embedded: bool = False) -> str:
    return (f".venv/bin/agentsearch bench ingest --docs {docs} --workers {','.join(map(str, workers))} "
            f"--rounds {rounds} --threads {','.join(threads)}" + (f" --baseline {baseline}" if baseline else "")
            + ("" if plain else " --no-plain") + ("" if stack else " --no-stack")
            + (" --embedded" if embedded else " --no-embedded"))


def write(figures: dict | None, command: str, embedded: dict | None = None) -> str:
    """The report of ``figures`` (the stacks) and ``embedded`` (the README's command, ``ingest_command``), either
    of which may be missing, written to src/agentsearch/bench/results/ingest.md, and returned."""
    from agentsearch.bench import ingest_command

    lines = ["# Ingestion through the stack and through the README's command, beside the plain model", "",
             f"Command: `{command}`", ""]
    if embedded is not None:
        lines += [
            "## The README's command in the embedded mode (the README's figure)", "",
            f"The first {embedded['docs']} SciFact abstracts -> {embedded['chunks']} chunks; median of "
            f"{embedded['rounds']} rounds, sides rotating; `AGENTSEARCH_EMBEDDING_RUNTIME`: {embedded['runtime']}, "
            f"late chunking: {'on' if embedded['late_chunking'] else 'off'}; each time is a whole program's wall "
            "time, start-up included.", "", *ingest_command.report_lines(embedded), ""]
    if figures is not None:
        load = ", ".join(f"{x:.2f}" for x in figures["load_average"]["start"])
        lines += [
            "## Through the distributed stack", "",
            f"Data: the first {figures['docs']} SciFact abstracts -> {figures['chunks']} chunks; {figures['cores']} "
            f"cores; `AGENTSEARCH_EMBEDDING_RUNTIME` of this tree: {figures['runtime']}; median of "
            f"{figures['rounds']} rounds, sides rotating; load average at the start {load}; stacks ready in "
            f"{figures['setup_s']:.0f} s.", "", *report_lines(figures), ""]
    return write_result("ingest.md", "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--workers", type=parse_counts, default=(1, 2), help="ingest processes, e.g. 1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=parse_threads, default=("share",), help="share, or threads; e.g. share,0")
    parser.add_argument("--baseline", type=Path, default=None, help="a tree whose code stacks of their own run")
    parser.add_argument("--no-plain", action="store_true", help="leave the plain model out (before/after only)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures = public(measure(args.docs, args.workers, args.rounds, args.threads, args.baseline, not args.no_plain))
    if args.json:
        args.json.write_text(json.dumps(figures) + "\n")
    print(write(figures, " ".join([".venv/bin/python -m agentsearch.bench.ingest", *map(shlex.quote, sys.argv[1:])])))


if __name__ == "__main__":
    main()
