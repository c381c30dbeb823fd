"""Does a question set made from a collection's documents rank search settings as its public judgements do?

SciFact and XQuAD treated as a team's collections: their documents only are indexed (a subset of SciFact's abstracts,
one XQuAD language), a question set is made from them offline (``agentsearch.pipeline.eval.questions``, the cloze
method, in each question shape asked for; their own questions are never read for it), and three search settings
(keyword, dense, hybrid) are measured twice: nDCG@10 on the generated set
(``agentsearch.pipeline.eval.quality_runs.measure``, the job's road, top 10) and nDCG@10 on the public queries and
qrels, restricted to queries whose relevant documents are all indexed. The two rankings are printed side by side,
with each pair of settings' difference and its paired bootstrap interval (``agentsearch.bench.setting_order``): a
pair whose interval holds 0 is a tie.

    agentsearch bench generated-set --scifact-docs 1000 --size 200 --shape line --shape near --shape recall
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentsearch.bench.common import SCIFACT

XQUAD = SCIFACT.parent / "xquad"
DEFAULT_DATA_DIR = Path("~/.cache/agentsearch/bench/generated-sets")
STRATEGIES = {"keyword": "keyword", "dense": "semantic", "hybrid": "hybrid"}


def _subset(corpus: Path, docs: int | None, data_dir: Path, name: str) -> Path:
    """The first ``docs`` lines of the corpus as a file of the bench's own (the index is reused by path)."""
    if not docs:
        return corpus
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()][:docs]
    path = data_dir / f"{name}-{docs}.jsonl"
    if not path.exists() or path.read_text(encoding="utf-8") != "\n".join(lines) + "\n":
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ranking(scores: dict[str, float]) -> list[str]:
    """Settings best first (ties in the order given)."""
    return sorted(scores, key=lambda name: -scores[name])


def measure_dataset(services: Any, corpus: Path, queries: Path, qrels: Path, size: int, seed: int,
                    llm: Any = None, shapes: tuple[str, ...] = ("line",)) -> dict[str, Any]:
    """One collection: the public queries' figures and, for each offline question shape, a generated set's, each
    setting's order told by a paired bootstrap (``agentsearch.bench.setting_order``)."""
    from agentsearch.bench.setting_order import compare, pair_orders
    from agentsearch.pipeline.eval.eval_sets import make_questions
    from agentsearch.pipeline.eval.quality_runs import Asked, RunSettings, measure
    from agentsearch.pipeline.eval.questions import Rarity
    from agentsearch.pipeline.eval.retrieval import (
        ensure_corpus_indexed,
        load_beir_corpus,
        load_beir_queries,
        load_qrels,
        ndcg_at,
        run_retrieval_eval,
    )
    from agentsearch.pipeline.retrieval.config import SearchConfig

    settings = services.settings
    docs = load_beir_corpus(corpus)
    collection, chunks, _ = ensure_corpus_indexed(services, corpus)
    indexed = {d["id"] for d in docs}
    judged = load_qrels(qrels)
    public = {q: t for q, t in load_beir_queries(queries).items() if q in judged and set(judged[q]) <= indexed}
    public_each: dict[str, list[float]] = {}
    for label, strategy in STRATEGIES.items():
        config = SearchConfig(**{**settings.search_defaults(), "strategy": strategy, "top_k": 10})
        run_, _ = run_retrieval_eval(services, collection, public, config)
        public_each[label] = [ndcg_at(run_[q], judged[q]) for q in public]
    public_scores = {label: round(sum(v) / len(v), 4) for label, v in public_each.items()}
    public_pairs = pair_orders(public_each, seed=seed)
    rarity = Rarity.of([d["text"] for d in docs])
    sets = {}
    for shape in shapes:
        made = make_questions([(d["id"], d["title"], d["text"]) for d in docs], size, rarity, llm=llm, seed=seed,
                              shape=shape)
        asked = [Asked(q.question, q.answer, q.document_id) for q in made]
        each: dict[str, list[float]] = {}
        for label, strategy in STRATEGIES.items():
            each[label] = []
            measure(services, collection, asked, RunSettings({"strategy": strategy}, top_k=10),
                    search_name=collection, answers=False, each=each[label])
        generated = {label: round(sum(v) / len(v), 4) for label, v in each.items()}
        pairs = pair_orders(each, seed=seed)
        sets[shape] = {"generated_questions": len(made),
                       "by_origin": {o: sum(q.origin == o for q in made) for o in ("llm", "cloze")},
                       "generated": generated, "generated_ranking": ranking(generated),
                       "same_order": ranking(generated) == ranking(public_scores),
                       "pairs": pairs, "against_public": compare(pairs, public_pairs),
                       "examples": [q.as_json() for q in made[:3]]}
    return {"documents": len(docs), "chunks": chunks, "public_queries": len(public), "public": public_scores,
            "public_ranking": ranking(public_scores), "public_pairs": public_pairs, "sets": sets}


def run(scifact_docs: int | None, xquad_language: str, size: int, seed: int = 0,
        data_dir: Path = DEFAULT_DATA_DIR, llm_server: bool = False, datasets: tuple[str, ...] = ("scifact", "xquad"),
        shapes: tuple[str, ...] = ("line",), llm_model: str | None = None) -> dict[str, Any]:
    """``llm_server``: the questions written by a local LLM server (started here: ``llm_model``, default the suite's
    SmolLM2-135M), checked; ``shapes``: the offline questions' shapes measured, each a set of its own."""
    if llm_server:
        from agentsearch.devstack.llm_server import SERVED_MODEL, LLMServer
        from agentsearch.pipeline.platform.llm import LLMClient

        with LLMServer(data_dir.expanduser() / "llm-server", model=llm_model or SERVED_MODEL) as server:
            return _run(scifact_docs, xquad_language, size, seed, data_dir, LLMClient(server.url, server.model),
                        datasets, shapes)
    return _run(scifact_docs, xquad_language, size, seed, data_dir, None, datasets, shapes)


def _run(scifact_docs: int | None, xquad_language: str, size: int, seed: int, data_dir: Path, llm: Any,
         datasets: tuple[str, ...], shapes: tuple[str, ...]) -> dict[str, Any]:
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.services import Services

    settings = Settings(data_dir=data_dir.expanduser(), milvus_uri=None)
    settings.ensure_data_dir()
    services = Services(settings)
    load = [round(x, 2) for x in os.getloadavg()]
    scifact = _subset(SCIFACT / "corpus.jsonl", scifact_docs, settings.data_dir, "scifact")
    xquad = XQUAD / xquad_language
    result: dict[str, Any] = {"load_at_start": load, "size": size, "seed": seed,
                              "llm": getattr(llm, "model", None) if llm is not None else None,
                              "embedding_model": settings.embedding_model}
    if "scifact" in datasets:
        result["scifact"] = measure_dataset(services, scifact, SCIFACT / "queries_train.jsonl",
                                            SCIFACT / "qrels" / "train.tsv", size, seed, llm, shapes)
    if "xquad" in datasets:
        result[f"xquad_{xquad_language}"] = measure_dataset(services, xquad / "corpus.jsonl", xquad / "queries.jsonl",
                                                            xquad / "qrels" / "dev.tsv", size, seed, llm, shapes)
    result["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return result


def _pair_text(pairs: dict[str, Any]) -> str:
    return ", ".join(f"{p['order'] if p['order'] == 'tie' else p['order'] + ' ahead'} in {name} "
                     f"({p['difference']:+.4f}, 95% {p['low']:+.4f}..{p['high']:+.4f})" for name, p in pairs.items())


def report_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for name, part in result.items():
        if not isinstance(part, dict) or "sets" not in part:
            continue
        lines.append(f"{name}: {part['documents']} documents, {part['public_queries']} public queries")
        lines.append(f"  public    {'  '.join(f'{k} {v:.4f}' for k, v in part['public'].items())}   "
                     f"{' > '.join(part['public_ranking'])}")
        lines.append(f"    {_pair_text(part['public_pairs'])}")
        for shape, got in part["sets"].items():
            lines.append(f"  {shape:9} {'  '.join(f'{k} {v:.4f}' for k, v in got['generated'].items())}   "
                         f"{' > '.join(got['generated_ranking'])}   ({got['generated_questions']} questions, "
                         f"{got['by_origin']['llm']} by the LLM)")
            lines.append(f"    {_pair_text(got['pairs'])}")
            lines.append(f"    ranking {'same order' if got['same_order'] else 'ORDER DIFFERS'}; against the public "
                         f"pairs, ties told: {got['against_public']['verdict']} {got['against_public']['pairs']}")
    lines.append(f"load average {result['load_at_start']} at start, {result['load_at_end']} at end")
    return lines


def write_json(result: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(result, indent=2) + "\n")
