"""``agentsearch eval``: retrieval, iterative mode and answers measured on benchmark data (figures in docs/).

Usage::

    agentsearch eval retrieval --corpus corpus.jsonl --queries queries.jsonl --qrels qrels.tsv [--strategy hybrid]
    agentsearch eval iterative --corpus corpus.jsonl --queries queries.jsonl --qrels qrels.tsv [--llm]
    agentsearch eval answers --corpus corpus.jsonl --queries queries.jsonl --answers answers.jsonl
    agentsearch eval answers --corpus corpus.jsonl --queries claims.jsonl       # no gold: citation figures only
    agentsearch eval followups [--scifact /work/shared/eval/scifact --limit 300] [--llm]

Each indexes the corpus once into a collection of its own (reused on the next run) and goes through the same
search and answer code jobs use, in this process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from agentsearch.cli.errors import fail
from agentsearch.pipeline.agentic.config import IterativeConfig, Thresholds
from agentsearch.pipeline.eval.answers import load_gold_answers, run_answer_eval
from agentsearch.pipeline.eval.retrieval import (
    ensure_corpus_indexed,
    load_beir_corpus,
    load_beir_queries,
    load_qrels,
    run_agents_eval,
    run_retrieval_eval,
    score_run,
)
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.retrieval.config import SearchConfig

# The services (the embedding model, Milvus), the LLM client and the agentic loop are imported by the command that
# uses them: they take seconds to load, which `agentsearch --help` and every other command would pay.

DATA_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
JSON_OUT = click.Path(dir_okay=False, path_type=Path)


@click.group("eval")
def eval_group() -> None:
    """Measure retrieval and answers on benchmark data."""


def beir_data(command):
    """The options naming a BEIR data set: ``--corpus``, ``--queries`` and ``--qrels`` (relevance judgements)."""
    for name in ("--qrels", "--queries", "--corpus"):
        command = click.option(name, type=DATA_FILE, required=True)(command)
    return command


# Documents indexed between two moves of the bar: by 256, XQuAD's 240 sat at 0% until they were all indexed.
INDEX_BATCH_DOCS = 64


def _index_corpus(services, corpus: Path, n_docs: int, label: str) -> str:
    """The corpus's collection, indexed now or reused from an earlier run, with a progress bar."""
    with click.progressbar(length=n_docs, label=label) as bar:
        collection, chunks, reused = ensure_corpus_indexed(services, corpus, progress=bar.update,
                                                           batch_docs=INDEX_BATCH_DOCS)
    click.echo(f"collection {collection}: {chunks} chunks ({'reused' if reused else 'indexed now'})")
    return collection


def filter_option(filter_json: str | None) -> dict:
    """``--filter JSON`` as a search override (``{"filter": {...}}``, or nothing); a malformed one ends the command
    naming the path inside the filter at fault."""
    if filter_json is None:
        return {}
    from agentsearch.pipeline.retrieval.filters import parse_filter

    try:
        parsed = parse_filter(json.loads(filter_json))  # `null` is JSON too: no filter, as without --filter
        return {"filter": parsed.as_json()} if parsed is not None else {}
    except json.JSONDecodeError as exc:
        fail(f"--filter is not JSON: {exc}")
    except ValueError as exc:
        fail(f"--filter: {exc}")


def _write_report(report: dict, json_out: Path | None) -> None:
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")


@eval_group.command("retrieval")
@beir_data
@click.option("--strategy", type=click.Choice(["semantic", "keyword", "hybrid", "adaptive"]), default=None,
              help="Default: the service's default strategy.")
@click.option("--fusion", type=click.Choice(["rrf", "weighted"]), default=None)
@click.option("--sentence-weight", type=click.FloatRange(0, 10), default=None,
              help="Weight of the sentence signal beside the fused score; 0 turns it off. Default: the service's.")
@click.option("--limit", type=int, default=None, help="Only the first N queries.")
@click.option("--agents", "agent_list", default=None,
              help="Pre- and post-search agents (default configs) around the search, e.g. query_expander,reranker.")
@click.option("--rerank-depth", type=int, default=20, show_default=True,
              help="With --agents: how many top results the post-search agents see.")
@click.option("--filter", "filter_json", default=None,
              help='Metadata filter applied to every search, as JSON (docs/filters.md), e.g. '
                   '\'{"eq": {"key": "region", "value": "emea"}}\'.')
@click.option("--json", "json_out", type=JSON_OUT, default=None)
def eval_retrieval(corpus: Path, queries: Path, qrels: Path, strategy: str | None, fusion: str | None,
                   sentence_weight: float | None, agent_list: str | None, rerank_depth: int,
                   limit: int | None, filter_json: str | None, json_out: Path | None) -> None:
    """nDCG@10, Recall@100, MRR@10 and latency of a BEIR data set, through the retrieval path jobs use."""
    from agentsearch.pipeline.services import get_services

    try:
        judged = load_qrels(qrels)
        asked = {q: t for q, t in load_beir_queries(queries).items() if q in judged}
        n_docs = len(load_beir_corpus(corpus))
    except (ValueError, KeyError) as exc:
        fail(str(exc))
    if limit:
        asked = dict(list(asked.items())[:limit])
    settings = get_settings()
    overrides: dict[str, Any] = {k: v for k, v in {"strategy": strategy, "fusion": fusion}.items() if v}
    if sentence_weight is not None:
        overrides["sentence_weight"] = sentence_weight
    overrides.update(filter_option(filter_json))
    config = SearchConfig(**{**settings.search_defaults(), **overrides, "top_k": 100, "candidates": 100})
    services = get_services()
    collection = _index_corpus(services, corpus, n_docs, "indexing corpus ")
    agent_ids = [a.strip() for a in agent_list.split(",") if a.strip()] if agent_list else []
    for agent_id in agent_ids:
        if agent_id not in services.registry or services.registry.get(agent_id).stage == "response":
            fail(f"--agents: {agent_id!r} is not a pre- or post-search agent")
    with click.progressbar(length=len(asked), label="running queries") as bar:
        if agent_ids:
            run, extra = run_agents_eval(services, collection, load_beir_corpus(corpus), asked, config, agent_ids,
                                         rerank_depth, progress=bar.update)
        else:
            run, extra = run_retrieval_eval(services, collection, asked, config, progress=bar.update)
    report = {**score_run(run, judged, extra["latencies_ms"]), "strategy": config.strategy, "fusion": config.fusion,
              "sentence_weight": config.sentence_weight, "agents": agent_ids,
              **({"filter": config.filter.as_json()} if config.filter else {})}
    click.echo(
        f"strategy {config.strategy} ({config.fusion}){' + ' + ','.join(agent_ids) if agent_ids else ''}: "
        f"nDCG@10 {report['ndcg@10']:.4f}  Recall@100 "
        f"{report['recall@100']:.4f}  MRR@10 {report['mrr@10']:.4f}  latency p50 {report['latency_ms']['p50']:.1f} ms "
        f"p95 {report['latency_ms']['p95']:.1f} ms  ({report['queries']} queries)"
    )
    _write_report(report, json_out)


@eval_group.command("iterative")
@beir_data
@click.option("--target", type=int, default=5, show_default=True, help="Results the iterative mode aims to keep.")
@click.option("--max-iterations", type=int, default=None, help="Budget; default: chosen by query complexity (1-3).")
@click.option("--per-iteration", type=int, default=5, show_default=True, help="New results evaluated per iteration.")
@click.option("--first-threshold", type=float, default=4.0, show_default=True)
@click.option("--later-threshold", type=float, default=3.8, show_default=True)
@click.option("--adaptive-threshold", is_flag=True, help="Move thresholds with each batch's score distribution.")
@click.option("--sufficiency/--no-sufficiency", default=True, show_default=True,
              help="Stop early when the kept results cover the query.")
@click.option("--llm/--no-llm", "use_llm", default=False, show_default=True,
              help="Evaluate and refine with the configured LLM (AGENTSEARCH_OPENAI_*) instead of offline signals.")
@click.option("--llm-guard/--no-llm-guard", default=True, show_default=True,
              help="With --llm: stop using the LLM in a loop once its scores disagree with the retrieval.")
@click.option("--llm-timeout", type=float, default=20.0, show_default=True, help="Budget of each LLM call, s.")
@click.option("--limit", type=int, default=None, help="Only the first N queries.")
@click.option("--filter", "filter_json", default=None, help="Metadata filter applied to every search, as JSON.")
@click.option("--json", "json_out", type=JSON_OUT, default=None)
def eval_iterative(corpus: Path, queries: Path, qrels: Path, target: int, max_iterations: int | None,
                   per_iteration: int, first_threshold: float, later_threshold: float, adaptive_threshold: bool,
                   sufficiency: bool, use_llm: bool, llm_guard: bool, llm_timeout: float, limit: int | None,
                   filter_json: str | None, json_out: Path | None) -> None:
    """Iterative mode vs single-shot search: share of queries with a relevant document in the kept set."""
    from agentsearch.pipeline.eval.agentic import run_iterative_eval
    from agentsearch.pipeline.platform.llm import LLMClient
    from agentsearch.pipeline.services import get_services

    try:
        config = IterativeConfig(target=target, max_iterations=max_iterations, per_iteration=per_iteration,
                                 sufficiency=sufficiency, llm="auto" if use_llm else "off",
                                 llm_guard=llm_guard, llm_timeout_s=llm_timeout,
                                 thresholds=Thresholds(first=first_threshold, later=later_threshold,
                                                       adaptive=adaptive_threshold))
        judged = load_qrels(qrels)
        asked = {q: t for q, t in load_beir_queries(queries).items() if q in judged}
        n_docs = len(load_beir_corpus(corpus))
    except (ValidationError, ValueError, KeyError) as exc:
        fail(str(exc))
    if limit:
        asked = dict(list(asked.items())[:limit])
    filtered = filter_option(filter_json)  # refused before the model and the corpus load
    services = get_services()
    llm = LLMClient.from_settings(services.settings) if use_llm else None
    if use_llm and llm is None:
        fail("--llm needs AGENTSEARCH_OPENAI_BASE_URL and AGENTSEARCH_OPENAI_MODEL")
    collection = _index_corpus(services, corpus, n_docs, "indexing corpus ")
    defaults = {**services.settings.search_defaults(), "candidates": 100, **filtered}
    with click.progressbar(length=len(asked), label="running queries") as bar:
        report = run_iterative_eval(services, collection, asked, judged, config, defaults, llm=llm,
                                    progress=bar.update)
    it, single = report["iterative"], report["single_shot"]
    click.echo(
        f"iterative ({'LLM' if llm else 'offline'}): relevant in kept set {it['hit_rate']:.4f}, mean kept "
        f"{it['mean_kept']:.2f} (empty {it['empty_share']:.1%}), examined {it['mean_examined']:.2f}, iterations "
        f"{it['mean_iterations']:.2f}, stops {it['stop_reasons']}, p50 {it['latency_ms']['p50']:.0f} ms\n"
        f"iterative: recall@10 {it['recall@10']:.4f}, nDCG@10 {it['ndcg@10']:.4f}, LLM calls per job "
        f"{it['llm_calls_per_job']:.2f}, guard {it['llm_guard']}\n"
        f"single shot top 10: recall@10 {single['top_10']['recall@10']:.4f}, "
        f"nDCG@10 {single['top_10']['ndcg@10']:.4f}\n"
        f"single shot: top-{single['top_target']['k']} {single['top_target']['hit_rate']:.4f}, same size as kept "
        f"{single['matched_size']['hit_rate']:.4f}, same size as examined {single['examined_size']['hit_rate']:.4f}"
        f"  ({report['queries']} queries)"
    )
    _write_report(report, json_out)


@eval_group.command("answers")
@click.option("--corpus", type=DATA_FILE, required=True)
@click.option("--queries", type=DATA_FILE, required=True)
@click.option("--answers", "answers_path", type=DATA_FILE, default=None,
              help='JSON Lines of {"_id", "answers": [gold spans]}. Without it every query is answered and only '
                   "the citation check is measured (claims with no gold answer, as SciFact's).")
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option("--json", "json_out", type=JSON_OUT, default=None)
@click.option("--details", "details_out", type=JSON_OUT, default=None,
              help="Write each question's answer and hit as JSON Lines here.")
def eval_answers(corpus: Path, queries: Path, answers_path: Path | None, limit: int | None, json_out: Path | None,
                 details_out: Path | None) -> None:
    """Gold-span rate, verified citations and latency of answers, through the search-and-answer path jobs use."""
    from agentsearch.pipeline.platform.llm import LLMClient
    from agentsearch.pipeline.services import get_services

    try:
        gold = load_gold_answers(answers_path) if answers_path else None
        asked = {q: t for q, t in load_beir_queries(queries).items() if gold is None or gold.get(q)}
        n_docs = len(load_beir_corpus(corpus))
    except (ValueError, KeyError) as exc:
        fail(str(exc))
    if not asked:
        fail(f"no question of {queries} has gold answers in {answers_path}" if gold is not None
             else f"{queries} holds no query")
    if limit:
        asked = dict(list(asked.items())[:limit])
    services = get_services()
    llm = LLMClient.from_settings(services.settings)
    collection = _index_corpus(services, corpus, n_docs, "indexing corpus   ")
    details: list[dict] = _LinesOut(details_out) if details_out else []
    with click.progressbar(length=len(asked), label="answering questions") as bar:
        report = run_answer_eval(services, collection, asked, gold, llm=llm, progress=bar.update, details=details)
    made = f"answers ({'LLM ' + llm.model if llm else 'extractive'})"
    if gold is not None:
        click.echo(
            f"{made}: gold-span rate {report['gold_span_rate']:.4f}  "
            f"(gold span in the retrieved documents {report['gold_span_in_documents_rate']:.4f})  latency p50 "
            f"{report['latency_ms']['p50']:.1f} ms p95 {report['latency_ms']['p95']:.1f} ms  ({report['questions']} "
            "questions)"
        )
    else:
        click.echo(f"{made}: {report['questions']} queries without gold answers, latency p50 "
                   f"{report['latency_ms']['p50']:.1f} ms")
    click.echo(_citation_line(report["citations"]))
    if "grounding" in report:
        click.echo(_grounding_line(report["grounding"], gold is not None))
    _write_report(report, json_out)


class _LinesOut(list):
    """A list of records that also writes each one as a JSON line as it comes: a long run (a model on a CPU) leaves
    what it answered so far when it is stopped."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        path.write_text("")

    def append(self, record: dict) -> None:
        super().append(record)
        with self.path.open("a") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _citation_line(c: dict) -> str:
    ms = c["check_ms"] or {"p50": 0.0, "p95": 0.0}
    probes = c["probes"]
    line = (f"citations: fully supported answers {c['fully_supported_rate']:.4f}  sentences {c['sentences']}  "
            f"check p50 {ms['p50']:.2f} ms p95 {ms['p95']:.2f} ms  wrong citations caught: recited "
            f"{probes['recited']['caught_rate']} of {probes['recited']['citations']}, number changed "
            f"{probes['number']['caught_rate']} of {probes['number']['citations']}")
    if "gold_in_verified_span_rate" in c:
        line += (f"  gold span inside a verified span {c['gold_in_verified_span_rate']:.4f} "
                 f"(of answers holding it: {c['gold_in_verified_span_of_hits']})")
    return line


def _grounding_line(g: dict, with_gold: bool) -> str:
    ms, first = g["answer_step_ms"], g["first_delta_ms"]
    line = ""
    if with_gold:
        line = (f"offline on the same documents: gold-span rate {g['offline_gold_span_rate']:.4f} (lost "
                f"{g['lost_against_offline']}, gained {g['gained_against_offline']}); the model's delivered "
                f"sentences alone {g['model_sentences_gold_span_rate']:.4f}\n")
    s = g["sentences"]
    return line + (
        f"grounding: model sentences delivered in {g['llm_sentences_delivered_rate']:.4f} of answers; sentences "
        f"supported {s['supported']}, partly {s['partial']}, unsupported {s['unsupported']}; delivered without "
        f"their mark {g['delivered_without_mark']}, marked partial {g['delivered_marked_partial']}\n"
        f"answer step p50/p95: LLM {ms['llm'].get('p50')}/{ms['llm'].get('p95')} ms, offline "
        f"{ms['offline'].get('p50')}/{ms['offline'].get('p95')} ms; first answer.delta LLM "
        f"{first['llm'].get('p50')}/{first['llm'].get('p95')} ms, offline {first['offline'].get('p50')}/"
        f"{first['offline'].get('p95')} ms; first words after the search (quick answer) "
        f"{g['first_words_ms'].get('p50')}/{g['first_words_ms'].get('p95')} ms\n"
        f"the model's answer kept: its gold-holding sentences delivered {g['model_gold_sentences_delivered_rate']} "
        f"of {g['model_gold_sentences']}; delivered length against the draft, median "
        f"{g['length_chars'].get('ratio_p50')}x (the rule before, quotes always appended: "
        f"{g['length_chars'].get('before_rule_ratio_p50')}x) over {g['length_chars'].get('answers', 0)} answers; "
        f"gold-span rate by the rule before {g['before_rule_gold_span_rate']:.4f}")


@eval_group.command("followups")
@click.option("--set", "pairs_path", type=DATA_FILE, default=None,
              help="A follow-up set (JSONL: id, first, follow_up, standalone, relevant); with the sample corpus by "
                   "default: examples/followups.jsonl.")
@click.option("--corpus", type=DATA_FILE, default=None,
              help="The corpus of --set (id/title/text lines, or BEIR _id lines); "
                   "default examples/sample_corpus.jsonl.")
@click.option("--scifact", "scifact_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Derive follow-ups from SciFact training claims in this directory (corpus.jsonl, "
                   "queries_train.jsonl, qrels/train.tsv) instead.")
@click.option("--limit", type=int, default=None, help="Only the first N pairs.")
@click.option("--llm/--no-llm", "use_llm", default=False, show_default=True,
              help="Rewrite through the configured LLM (mode auto) instead of the offline rules.")
@click.option("--json", "json_out", type=JSON_OUT, default=None)
def eval_followups(pairs_path: Path | None, corpus: Path | None, scifact_dir: Path | None, limit: int | None,
                   use_llm: bool, json_out: Path | None) -> None:
    """Retrieval of follow-up questions as asked, through the query_contextualizer, and as the expected
    standalone query: nDCG@10, Recall@1/5/10 and MRR@10 of each follow-up's relevant document."""
    from agentsearch.pipeline.eval.followups import (
        load_followups,
        run_followup_eval,
        sample_corpus_as_beir,
        scifact_followups,
    )
    from agentsearch.pipeline.services import get_services

    examples = Path(__file__).resolve().parent.parent / "examples"
    settings = get_settings()
    try:
        if scifact_dir is not None:
            pairs = scifact_followups(scifact_dir / "queries_train.jsonl", scifact_dir / "qrels" / "train.tsv", limit)
            beir = scifact_dir / "corpus.jsonl"
        else:
            pairs = load_followups(pairs_path or examples / "followups.jsonl")[:limit]
            source = corpus or examples / "sample_corpus.jsonl"
            first = json.loads(source.read_text(encoding="utf-8").splitlines()[0])
            beir = source if "_id" in first else sample_corpus_as_beir(source, settings.ensure_data_dir())
        n_docs = len(load_beir_corpus(beir))
    except (ValueError, KeyError, OSError) as exc:
        fail(str(exc))
    services = get_services()
    collection = _index_corpus(services, beir, n_docs, "indexing corpus ")
    config = SearchConfig(**{**settings.search_defaults(), "top_k": 10})
    llm = None
    if use_llm:
        from agentsearch.pipeline.platform.llm import LLMClient

        llm = LLMClient.from_settings(settings)
        if llm is None:
            fail("--llm: no LLM endpoint configured (AGENTSEARCH_OPENAI_BASE_URL, AGENTSEARCH_OPENAI_MODEL)")
    with click.progressbar(length=len(pairs), label="running follow-ups") as bar:
        report = run_followup_eval(services, collection, pairs, config,
                                   agent_config={"mode": "auto" if use_llm else "offline"}, llm=llm,
                                   progress=bar.update)
    click.echo(f"{report['pairs']} follow-ups, strategy {config.strategy} ({config.fusion})")
    for name in ("as_asked", "contextualised", "expected"):
        s = report[name]
        click.echo(f"  {name:<15} nDCG@10 {s['ndcg@10']:.4f}  Recall@1 {s['recall@1']:.4f}  Recall@5 "
                   f"{s['recall@5']:.4f}  Recall@10 {s['recall@10']:.4f}  MRR@10 {s['mrr@10']:.4f}")
    click.echo(f"  rewrites covering the expected query's words: {report['rewrite_covers_expected']:.2%}")
    _write_report(report, json_out)


@eval_group.command("formats")
@click.option("--formats", "format_list", default=None,
              help="Comma-separated, of pdf, docx, pptx, xlsx, csv, html, markdown, scan, scan-ru (default: all).")
@click.option("--questions", type=click.IntRange(1), default=None,
              help="N development questions spread evenly over the articles (default: all 603).")
@click.option("--xquad", "xquad_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The XQuAD folder (en/ and ru/ in BEIR layout); default ../shared/eval/xquad.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the rendered files and the stack's data go (default: a temporary folder).")
@click.option("--search", "search_json", default=None,
              help='Retrieval overrides of every job, the baseline\'s too, as JSON, e.g. \'{"strategy": "semantic"}\' '
                   "(default: the service's).")
@click.option("--json", "json_out", type=JSON_OUT, default=None)
def eval_formats(format_list: str | None, questions: int | None, xquad_dir: Path | None, workdir: Path | None,
                 search_json: str | None, json_out: Path | None) -> None:
    """Format invariance: XQuAD articles uploaded as PDF, Word, PowerPoint, Excel, CSV, HTML, Markdown and scanned
    pages to a stack of its own, each question's gold page, slide, row or section found in the top 5, over the same
    paragraphs uploaded as JSON Lines documents."""
    import tempfile

    from agentsearch.bench.format_invariance import run_on_stack
    from agentsearch.pipeline.eval.article_files import FORMATS
    from agentsearch.pipeline.eval.format_invariance import XQUAD

    chosen = [f.strip() for f in format_list.split(",") if f.strip()] if format_list else list(FORMATS)
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown:
        fail(f"--formats: unknown {', '.join(unknown)} (known: {', '.join(FORMATS)})")
    try:
        search = SearchConfig(**json.loads(search_json)).model_dump(mode="json", exclude_unset=True) \
            if search_json else None
    except (json.JSONDecodeError, ValidationError) as exc:
        fail(f"--search: {exc}")
    with tempfile.TemporaryDirectory(prefix="agentsearch-formats-") as tmp:
        report = run_on_stack(workdir or Path(tmp), chosen, questions, xquad_dir or XQUAD,
                              say=click.echo, search=search)
    for lang, base in report["baseline"].items():
        click.echo(f"baseline {lang} (a JSON Lines document per paragraph): gold paragraph in the top "
                   f"{report['top_k']} {base['fraction']:.4f}, its article {base['article_fraction']:.4f}  "
                   f"({base['questions']} questions)")
    for name, s in report["formats"].items():
        click.echo(f"{name:<9} ratio {s['ratio']}  gold place in the top {report['top_k']} {s['fraction']:.4f}  "
                   f"article found {s['article_fraction']:.4f} (at another place {s['article_at_wrong_place']})  "
                   f"documents {s['indexing']['documents']}  goal {s['goal']}")
    _write_report(report, json_out)
