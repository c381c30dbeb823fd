"""``agentsearch bench retrieval`` and ``bench generated-set``: the benchmarks of search quality, registered in the
``bench`` group by ``agentsearch.cli.benchmarks``.

Usage::

    agentsearch bench retrieval                                     # SciFact training claims against the baseline
    agentsearch bench retrieval --write-baseline --release 0.9 --commit abc123
    agentsearch bench generated-set --scifact-docs 1000 --size 200 --shape line --shape near --shape recall
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from agentsearch.cli.errors import fail


@click.command("retrieval")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N training claims.")
@click.option("--docs", type=click.IntRange(1, 5183), default=None,
              help="Only the first N abstracts, and the claims judged within them (default: as many as the "
                   "baseline's, all 5,183 for a whole-corpus one).")
@click.option("--delay-ms", type=click.FloatRange(0), default=0.0, show_default=True,
              help="Slow every search by this much on purpose: the regression the comparison must catch.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the corpus's Milvus Lite index is kept between runs (default ~/.cache/agentsearch/bench/"
                   "retrieval).")
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Baseline JSON (default src/agentsearch/bench/results/retrieval_baseline.json).")
@click.option("--write-baseline", is_flag=True, help="Store this run's figures as the baseline instead.")
@click.option("--release", default=None, help="With --write-baseline: the release the figures are of.")
@click.option("--commit", default=None, help="With --write-baseline: its commit.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"figures": {"ndcg@10", "recall@100", "p50_ms", "p95_ms", ...}, "comparison": {...}} here.')
def bench_retrieval(limit: int | None, docs: int | None, delay_ms: float, data_dir: Path | None,
                    baseline_path: Path | None, write_baseline: bool, release: str | None, commit: str | None,
                    json_out: Path | None) -> None:
    """SciFact training claims over the whole corpus (nDCG@10, recall@100, search p50 and p95) against the previous
    release's stored figures; exits 1 saying "regressed" past the tolerances (0.005 nDCG or recall, 20% latency)."""
    from datetime import UTC, datetime

    # Milvus Lite and the model load with it: see src/agentsearch/cli/__init__.py
    from agentsearch.bench import retrieval_regression as rr

    baseline_path = baseline_path or rr.BASELINE
    data_dir = data_dir or rr.DEFAULT_DATA_DIR
    if write_baseline:
        if not release or not commit:
            fail("--write-baseline needs --release and --commit, the release the figures are of")
        try:
            figures = rr.measure(data_dir, limit, delay_ms, docs=docs)
        except FileNotFoundError as exc:
            fail(str(exc))
        baseline = {"release": release, "commit": commit, "measured": datetime.now(UTC).strftime("%Y-%m-%d"),
                    "load": figures["load_at_start"][0],
                    "command": f"agentsearch bench retrieval --write-baseline --release {release} --commit {commit}"
                               + (f" --docs {docs}" if docs else ""),
                    "figures": {k: figures[k] for k in (*rr.QUALITY, *rr.LATENCY, "mrr@10", "queries", "docs")}}
        baseline_path.write_text(json.dumps(baseline, indent=2) + "\n")
        click.echo(f"wrote {baseline_path}: {json.dumps(baseline['figures'])}")
        return
    try:
        result = rr.run(data_dir, limit, delay_ms, baseline_path, docs=docs)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps({k: result[k] for k in ("figures", "comparison")}, indent=2) + "\n")
    click.echo("\n".join(rr.table(result["comparison"])))
    verdict = result["comparison"]["verdict"]
    click.echo(f"retrieval: {verdict}")
    if verdict == "regressed":
        raise SystemExit(1)


@click.command("generated-set")
@click.option("--scifact-docs", type=click.IntRange(10), default=1000, show_default=True,
              help="The first N SciFact abstracts as the collection (5183: all).")
@click.option("--xquad-language", default="en", show_default=True)
@click.option("--size", type=click.IntRange(1, 500), default=200, show_default=True, help="Generated questions.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--llm", "llm_server", is_flag=True, help="Questions written by a local LLM server (SmolLM2-135M).")
@click.option("--llm-model", default=None, help="With --llm: the model served instead, e.g. "
                                                "qwen2.5-coder-0.5b-instruct (make llm-server-qwen).")
@click.option("--only", type=click.Choice(["scifact", "xquad"]), default=None, help="One data set alone.")
@click.option("--shape", "shapes", type=click.Choice(["line", "near", "recall"]), multiple=True,
              help="The offline questions' shape, each a set of its own (repeat for more; default line).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def bench_generated_set(scifact_docs: int, xquad_language: str, size: int, seed: int, llm_server: bool,
                        llm_model: str | None, only: str | None, shapes: tuple[str, ...], json_out: Path | None
                        ) -> None:
    """nDCG@10 of keyword, dense and hybrid search on a generated question set beside the public qrels."""
    from agentsearch.bench import generated_sets

    result = generated_sets.run(scifact_docs, xquad_language, size, seed, llm_server=llm_server,
                                datasets=(only,) if only else ("scifact", "xquad"), shapes=shapes or ("line",),
                                llm_model=llm_model)
    for line in generated_sets.report_lines(result):
        click.echo(line)
    if json_out is not None:
        generated_sets.write_json(result, json_out)
