"""The README's ingestion, timed whole: ``agentsearch ingest docs.jsonl --collection NAME`` in the embedded mode beside
the plain model started as a program of its own, in the same rounds.

    .venv/bin/agentsearch bench ingest --embedded --no-stack --docs 1000 --rounds 3
    .venv/bin/agentsearch bench ingest --embedded --no-stack --baseline /tmp/before     # before and after

What a new user waits for: the command's wall time, start-up included (Python, the API in its own process, the
model, Milvus Lite, the schema of a new data directory), from the first SciFact abstracts written as the README's
JSON Lines. Each run has a data directory of its own, created empty, as a first ingest on a new machine has; the
exported ONNX model is shared (``make install`` builds it once). The plain model is a Python process of its own too:
it imports sentence-transformers, loads the packaged all-MiniLM-L6-v2 weights and embeds each chunk the service
makes (pieces of 1,000 characters, each with its title, ``ingest.chunk_texts``) once, in batches of 32; its wall
time is timed from outside the same way. A ``--baseline`` tree (a git worktree of an earlier commit) runs the same
command with its code. With ``spin=True`` this tree's command also runs with ONNX Runtime's idle threads spinning
(``AGENTSEARCH_EMBEDDING_SPIN=true``); off by default since the passages' passes run on sessions of one thread each,
which have no idle threads to spin (``OnnxEngine``'s ``parallel``). The sides rotate from round to round and
medians are reported; the 1-minute load average is kept beside each time, and so are the CPU seconds (user and
system) each program used: on a shared machine they move less with the load than the wall time does.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentsearch.bench.common import load_average

PLAIN_MODEL, PLAIN_BATCH = "all-MiniLM-L6-v2", 32
COMMAND_SIDES = ("embedded", "embedded-spin", "embedded-baseline")
TIMEOUT_S = 3600

# The plain model as a program: everything it imports and loads is inside the timed run.
PLAIN_PROGRAM = """
import json, sys
from sentence_transformers import SentenceTransformer
from agentsearch.pipeline.retrieval.model_files import resolve_model_path
texts = json.load(open(sys.argv[1]))
model = SentenceTransformer(str(resolve_model_path(sys.argv[2])), device="cpu")
model.encode(texts, batch_size=int(sys.argv[3]), normalize_embeddings=True, show_progress_bar=False)
"""


def source_dir(tree: Path) -> Path:
    """The directory a tree's package is imported from: ``tree/src`` in this repository's layout, else the tree."""
    return tree / "src" if (tree / "src" / "agentsearch").is_dir() else tree


def readme_lines(documents: list[dict]) -> str:
    """BEIR records as the README's JSON Lines: ``{"id", "title", "text"}`` a line."""
    return "".join(json.dumps({"id": d["id"], "title": d["title"], "text": d["text"]}) + "\n" for d in documents)


def command_env(tree: Path | None, data_dir: Path) -> dict[str, str]:
    """The environment of one run of the command: the embedded defaults (no API URL, no key), a new data
    directory, and the code of ``tree`` when given."""
    # The defaults, whatever the caller's shell sets: the spinning side sets its one variable itself.
    unset = ("AGENTSEARCH_API_URL", "AGENTSEARCH_API_KEY", "AGENTSEARCH_EMBEDDING_SPIN")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["AGENTSEARCH_DATA_DIR"] = str(data_dir)
    if tree is not None:
        env["PYTHONPATH"] = str(source_dir(tree).resolve())
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user and system, its threads and children included) of one program run; a
    failed run raises with the start and the end of what it wrote."""
    before = _children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    seconds = time.perf_counter() - started
    cpu_s = _children_cpu_s() - before
    if done.returncode != 0:
        # The cause is often first and a shutdown's tracebacks last: both ends are kept.
        said = done.stderr or done.stdout
        said = said if len(said) <= 1600 else f"{said[:800]}\n...\n{said[-800:]}"
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({done.returncode}): {said}")
    return seconds, cpu_s


def _children_cpu_s() -> float:
    """CPU seconds of this process's ended children: ``subprocess.run`` has waited for the one just run."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(docs: int = 1000, rounds: int = 3, baseline: Path | None = None, corpus: Path | None = None,
            spin: bool = False) -> dict:
    """Seconds per round of the plain model, this tree's command and the baseline's (see the module's docstring)."""
    from agentsearch.bench.ingest import CORPUS, chunk_texts
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
    from agentsearch.pipeline.platform.settings import Settings

    documents = load_beir_corpus(corpus or CORPUS)[:docs]
    settings = Settings()
    texts = chunk_texts(documents, ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars))
    sides = ["plain", "embedded"] + (["embedded-spin"] if spin else []) + (["embedded-baseline"] if baseline else [])
    record: dict[str, dict[str, list[float]]] = {s: {"seconds": [], "cpu_s": [], "loads": []} for s in sides}
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-command-") as tmp:
        work = Path(tmp)
        (work / "docs.jsonl").write_text(readme_lines(documents))
        (work / "texts.json").write_text(json.dumps(texts))
        for round_ in range(rounds):
            shift = round_ % len(sides)
            for side in sides[shift:] + sides[:shift]:
                record[side]["loads"].append(round(load_average()[0], 2))
                if side == "plain":
                    argv = [sys.executable, "-c", PLAIN_PROGRAM, str(work / "texts.json"), PLAIN_MODEL,
                            str(PLAIN_BATCH)]
                    env = command_env(None, work / "unused")
                else:
                    tree = baseline if side == "embedded-baseline" else None
                    argv = [sys.executable, "-m", "agentsearch", "ingest", str(work / "docs.jsonl"),
                            "--collection", f"bench-{round_}"]
                    env = command_env(tree, work / f"data-{side}-{round_}")
                    if side == "embedded-spin":
                        env["AGENTSEARCH_EMBEDDING_SPIN"] = "true"
                seconds, cpu_s = timed(argv, env)
                record[side]["seconds"].append(round(seconds, 2))
                record[side]["cpu_s"].append(round(cpu_s, 2))
                print(f"round {round_ + 1}, {side}: {seconds:.1f} s, {cpu_s:.1f} CPU s "
                      f"(load {record[side]['loads'][-1]:.2f})", flush=True)
    return {"docs": len(documents), "chunks": len(texts), "rounds": rounds, "baseline_tree": str(baseline or ""),
            "sides": record, "late_chunking": settings.late_chunking, "runtime": settings.embedding_runtime}


def figures(result: dict) -> dict:
    """Medians, each command over the plain model (the plain model's seconds over the command's: above 1 is faster),
    and before over after; each ratio also per round, where both ran under the same load."""
    sides = result["sides"]
    median = {s: statistics.median(r["seconds"]) for s, r in sides.items()}
    # Results written before the CPU seconds were kept have none.
    cpu: dict[str, float | None] = {s: round(statistics.median(r["cpu_s"]), 2) if r.get("cpu_s") else None
                                    for s, r in sides.items()}
    out = {**{k: result[k] for k in ("docs", "chunks", "rounds", "baseline_tree", "late_chunking", "runtime")},
           "sides": {s: {"median_s": round(median[s], 2), "median_cpu_s": cpu[s], **r}
                     for s, r in sides.items()}}
    for side in COMMAND_SIDES:
        if side in sides:
            out[f"{side}_over_plain"] = round(median["plain"] / median[side], 3)
            plain_cpu, own_cpu = cpu["plain"], cpu[side]
            out[f"{side}_over_plain_cpu"] = (round(plain_cpu / own_cpu, 3) if plain_cpu and own_cpu else None)
            out[f"{side}_over_plain_rounds"] = [round(p / e, 3) for p, e in
                                                zip(sides["plain"]["seconds"], sides[side]["seconds"], strict=True)]
    if "embedded-baseline" in sides:
        out["speedup"] = round(median["embedded-baseline"] / median["embedded"], 3)
    return out


def report_lines(f: dict) -> list[str]:
    """The table of the command's sides, for ``ingest.write``."""
    names = {"plain": "plain model, a process of its own (sentence-transformers, fp32, batch 32, load included)",
             "embedded": "`agentsearch ingest docs.jsonl --collection NAME`, embedded mode, this tree",
             "embedded-spin": "the same, ONNX Runtime's idle threads spinning (`AGENTSEARCH_EMBEDDING_SPIN=true`)",
             "embedded-baseline": f"the same command, before (`{f['baseline_tree']}`)"}
    lines = ["| side | median s | rounds, s | median CPU s | rounds, CPU s | load (1 min) each round "
             "| plain model's s ÷ this | its CPU s ÷ this |",
             "|---|---:|---|---:|---|---|---:|---:|"]
    for side, row in f["sides"].items():
        over, over_cpu, cpu = f.get(f"{side}_over_plain"), f.get(f"{side}_over_plain_cpu"), row.get("median_cpu_s")
        lines.append(f"| {names[side]} | {row['median_s']:.1f} | {', '.join(f'{s:.1f}' for s in row['seconds'])} | "
                     f"{'' if cpu is None else f'{cpu:.1f}'} | {', '.join(f'{s:.1f}' for s in row.get('cpu_s', []))} | "
                     f"{', '.join(f'{x:.2f}' for x in row['loads'])} | {'' if over is None else f'**{over:.2f}**'} | "
                     f"{'' if over_cpu is None else f'{over_cpu:.2f}'} |")
    lines.append("")
    if "speedup" in f:
        lines.append(f"The command before ÷ after: **{f['speedup']:.2f} times** as fast "
                     f"(per round, over the plain model: before {f['embedded-baseline_over_plain_rounds']}, "
                     f"after {f['embedded_over_plain_rounds']}).")
    return lines
