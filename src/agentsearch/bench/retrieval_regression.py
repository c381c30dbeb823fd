"""Retrieval regression: SciFact's training claims over the whole corpus, compared with the previous release's figures.

Every training claim (809) is searched through ``Retriever.search`` as ``agentsearch eval retrieval`` does (the
service's default strategy, fusion and sentence weight, top 100, no result cache), over the 5,183 abstracts indexed
once into a Milvus Lite file kept between runs (``--data-dir``; building it takes minutes, a search does not). It
reports nDCG@10, recall@100 and the p50 and p95 of one search, and compares them with the stored baseline
(``results/retrieval_baseline.json``): a quality figure more than ``QUALITY_TOLERANCE`` below the baseline, or a
latency more than ``LATENCY_TOLERANCE`` above it, is **regressed**. Latency depends on the machine and its load,
which the report records beside the baseline's.

    agentsearch bench retrieval                                 # all training claims, against the stored baseline
    agentsearch bench retrieval --limit 200 --json now.json     # the first 200 claims
    agentsearch bench retrieval --delay-ms 100                  # a search slowed on purpose: says "regressed"
    agentsearch bench retrieval --write-baseline --release 1.4  # this tree's figures become the baseline

The comparison alone: ``compare(figures, baseline)``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agentsearch.bench.common import SCIFACT

BASELINE = Path(__file__).resolve().parent / "results" / "retrieval_baseline.json"
DEFAULT_DATA_DIR = Path("~/.cache/agentsearch/bench/retrieval")
# Absolute drop of a quality figure (nDCG@10, recall@100) past which it regressed: 0.005 is above the run-to-run
# spread of one tree (none: the ranking is deterministic) and below the 0.006 the previous round lost unseen.
QUALITY_TOLERANCE = 0.005
# Relative rise of p50 or p95 past which it regressed: the issue's own tolerance; the spread of one tree's p50
# between runs on a shared machine is not measured yet, and a latency compared with a baseline of another load says
# little (the baseline records its load).
LATENCY_TOLERANCE = 0.20
QUALITY = ("ndcg@10", "recall@100")
LATENCY = ("p50_ms", "p95_ms")


def compare(figures: dict[str, float], baseline: dict[str, float], quality_tolerance: float = QUALITY_TOLERANCE,
            latency_tolerance: float = LATENCY_TOLERANCE) -> dict[str, Any]:
    """Each figure beside the baseline's, its change and whether it regressed; ``verdict`` is "regressed" when any
    did, else "ok". A figure the baseline lacks is shown and never regresses.

    >>> compare({"ndcg@10": 0.72, "recall@100": 0.95, "p50_ms": 300, "p95_ms": 400},
    ...         {"ndcg@10": 0.73, "recall@100": 0.95, "p50_ms": 240, "p95_ms": 380})["verdict"]
    'regressed'
    """
    rows = []
    for name in (*QUALITY, *LATENCY):
        now, before = figures.get(name), baseline.get(name)
        if now is None:
            continue
        row: dict[str, Any] = {"figure": name, "now": now, "baseline": before, "regressed": False}
        if before is not None:
            if name in QUALITY:
                row["change"] = round(now - before, 4)
                row["limit"] = f"drop ≤ {quality_tolerance:g}"
                row["regressed"] = now < before - quality_tolerance
            else:
                row["change"] = round(now / before - 1, 4) if before else 0.0
                row["limit"] = f"rise ≤ {latency_tolerance:.0%}"
                row["regressed"] = now > before * (1 + latency_tolerance)
        rows.append(row)
    return {"rows": rows, "verdict": "regressed" if any(r["regressed"] for r in rows) else "ok"}


class Slowed:
    """A retriever whose every search takes ``delay_s`` longer: the regression a benchmark must catch."""

    def __init__(self, retriever: Any, delay_s: float) -> None:
        self._retriever, self._delay_s = retriever, delay_s

    def search(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self._delay_s)
        return self._retriever.search(*args, **kwargs)


def measure(data_dir: Path = DEFAULT_DATA_DIR, limit: int | None = None, delay_ms: float = 0.0,
            scifact: Path = SCIFACT, progress=None, docs: int | None = None) -> dict[str, Any]:
    """The figures of this tree: the corpus indexed into ``data_dir`` (or reused from there), then the claims.
    ``docs``: the first ``docs`` abstracts only, and the claims all of whose judged abstracts are among them (an
    index built in minutes where the whole corpus takes an hour on a loaded machine)."""
    import os

    from agentsearch.pipeline.eval.retrieval import (
        ensure_corpus_indexed,
        load_beir_queries,
        load_qrels,
        run_retrieval_eval,
        score_run,
    )
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.retrieval.config import SearchConfig
    from agentsearch.pipeline.services import Services

    corpus, qrels_path = scifact / "corpus.jsonl", scifact / "qrels" / "train.tsv"
    for path in (corpus, qrels_path, scifact / "queries_train.jsonl"):
        if not path.is_file():
            raise FileNotFoundError(f"SciFact file missing: {path}")
    # The store is the bench's own Milvus Lite file, whatever the environment names: the index is reused by path.
    settings = Settings(data_dir=data_dir.expanduser(), milvus_uri=None)
    if docs:
        settings.ensure_data_dir()
        lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()][:docs]
        corpus = settings.data_dir / f"corpus-{docs}.jsonl"
        if not corpus.exists() or corpus.read_text(encoding="utf-8") != "\n".join(lines) + "\n":
            corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    services = Services(settings)
    started = time.perf_counter()
    collection, chunks, reused = ensure_corpus_indexed(services, corpus)
    index_s = time.perf_counter() - started
    judged = load_qrels(qrels_path)
    asked = {q: t for q, t in load_beir_queries(scifact / "queries_train.jsonl").items() if q in judged}
    if docs:
        indexed = {str(json.loads(line)["_id"]) for line in corpus.read_text(encoding="utf-8").splitlines()}
        asked = {q: t for q, t in asked.items() if set(judged[q]) <= indexed}
    if limit:
        asked = dict(list(asked.items())[:limit])
    config = SearchConfig(**{**settings.search_defaults(), "top_k": 100, "candidates": 100})
    retriever = services.uncached_retriever()
    # One search first: the model's session, Milvus's load of the collection and the language model are made then.
    retriever.search(collection, next(iter(asked.values())), config, model=settings.embedding_model)
    load = os.getloadavg()
    searcher = Slowed(retriever, delay_ms / 1000) if delay_ms else retriever
    run, extra = run_retrieval_eval(services, collection, asked, config, progress=progress, retriever=searcher)
    scores = score_run(run, judged, extra["latencies_ms"])
    return {"ndcg@10": scores["ndcg@10"], "recall@100": scores["recall@100"], "mrr@10": scores["mrr@10"],
            "p50_ms": scores["latency_ms"]["p50"], "p95_ms": scores["latency_ms"]["p95"],
            "queries": scores["queries"], "docs": docs or 5183, "chunks": chunks, "index_reused": reused,
            "index_s": round(index_s, 1),
            "delay_ms": delay_ms, "load_at_start": [round(x, 2) for x in load],
            "strategy": config.strategy, "fusion": config.fusion, "sentence_weight": config.sentence_weight,
            "runtime": settings.embedding_runtime}


def load_baseline(path: Path = BASELINE) -> dict[str, Any]:
    """The stored baseline: ``{"release", "commit", "measured", "command", "figures": {...}}``."""
    try:
        baseline = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"retrieval baseline {path} unreadable: {exc}") from None
    if not isinstance(baseline, dict) or not isinstance(baseline.get("figures"), dict):
        raise ValueError(f"retrieval baseline {path}: no figures")
    return baseline


def table(comparison: dict[str, Any]) -> list[str]:
    """The comparison as Markdown rows."""
    lines = ["| figure | baseline | now | change | tolerance | |", "|---|---:|---:|---:|---|---|"]
    for r in comparison["rows"]:
        latency = r["figure"] in LATENCY
        show = (lambda v: f"{v:.1f}") if latency else (lambda v: f"{v:.4f}")
        change = "" if "change" not in r else (f"{r['change']:+.1%}" if latency else f"{r['change']:+.4f}")
        lines.append(f"| {r['figure']} | {show(r['baseline']) if r['baseline'] is not None else ''} | "
                     f"{show(r['now'])} | {change} | {r.get('limit', '')} | "
                     f"{'**regressed**' if r['regressed'] else 'ok'} |")
    return lines


def report_lines(result: dict[str, Any]) -> list[str]:
    """The suite's section: the figures, the baseline they are held to, and the verdict."""
    f, baseline = result["figures"], result["baseline"]
    return [
        "## Retrieval regression: SciFact training claims over the whole corpus",
        "",
        f"{f['queries']} training claims, {f['chunks']} chunks of {f['docs']} of the 5,183 abstracts (index "
        f"{'reused' if f['index_reused'] else 'built in this run'}), `Retriever.search` with the service's defaults "
        f"({f['strategy']}, {f['fusion']}, sentence weight {f['sentence_weight']:g}, runtime {f['runtime']}), top 100, "
        f"no cache; load average at its start {', '.join(f'{x:.2f}' for x in f['load_at_start'])} "
        f"(`src/agentsearch/bench/retrieval_regression.py`). Baseline: {baseline['release']} (`{baseline['commit']}`), "
        f"measured {baseline['measured']} at load {baseline.get('load', '?')}.",
        "",
        *table(result["comparison"]),
        "",
        f"Verdict: **{result['comparison']['verdict']}** (quality may drop by {QUALITY_TOLERANCE:g}, latency rise by "
        f"{LATENCY_TOLERANCE:.0%}).",
        "",
    ]


def run(data_dir: Path = DEFAULT_DATA_DIR, limit: int | None = None, delay_ms: float = 0.0,
        baseline_path: Path = BASELINE, progress=None, docs: int | None = None) -> dict[str, Any]:
    """``measure`` and ``compare`` with the stored baseline: what the suite and ``agentsearch bench retrieval`` run.
    The run is of as many abstracts as the baseline (``docs``: the same number, or None)."""
    baseline = load_baseline(baseline_path)
    of = baseline["figures"].get("docs", 5183)
    if docs is not None and docs != of:
        raise ValueError(f"retrieval baseline {baseline_path} is of {of} abstracts, not {docs}: run with --docs {of}, "
                         "or store a baseline of these")
    docs = None if of == 5183 else of
    figures = measure(data_dir, limit, delay_ms, progress=progress, docs=docs)
    held_to = dict(baseline["figures"])
    if held_to.get("queries") != figures["queries"]:
        # Another set of claims scores otherwise: only the time of one search compares.
        held_to = {k: v for k, v in held_to.items() if k not in QUALITY}
    return {"figures": figures, "baseline": baseline, "comparison": compare(figures, held_to)}
