"""Where the offline answer finds or loses the gold sentence, per XQuAD language, and what the answer step costs.

For each question of a language's development half (``--offset``, ``--limit``), the search runs as a job's does
(the service's defaults, on the embedded stack), then ``agentsearch.pipeline.job.workflow`` answers it (the
extractive answer, the service's embedder) and is timed. Reported per language:

- ``gold_paragraph``: the question's paragraph (qrels) among the retrieved documents;
- ``span_in_documents``: a gold span in the retrieved documents' text (a document is its best chunk, so the right
  paragraph may come with the wrong chunk);
- ``span_in_a_sentence``: a gold span inside one candidate sentence (not cut by the sentence splitter);
- ``gold_rank``: the best such sentence's rank among the scored candidates (1 = first), as counts;
- ``lost_on``: for each question whose gold sentence was a candidate but not chosen, the signals on which the
  first-ranked sentence beat it (``lexical``, ``semantic``, ``kind``, ``retrieval``);
- ``gold_span_rate``: the answer holds a gold span (citation marks read past), as ``agentsearch eval answers``;
- ``answer_ms``: the answer step's median and p95 per question;
- ``sentences``: the delivered sentences (``per_answer``: their mean per answer), ``off_question``: the share of
  them that hold none of the question's terms (the keyword analysis the answer scores with, a term of four letters
  or more also held inside a longer word) and no gold span: padding; ``fragments``: the share that are no sentence
  (under three words, scripts without spaces counted at their word length, or opening with a bare number). The
  same code counts both trees, from the answer's text alone.

With ``--baseline-tree DIR`` (a checkout of an earlier commit) the same questions are first answered by that code
in a child process (only ``gold_span_rate`` and ``answer_ms``, which every version has), and the table shows both
side by side. The two runs share the machine's state but not a process: Milvus Lite's file is opened by one at a
time. ``AGENTSEARCH_EMBEDDING_MODEL=multilingual-e5-small`` measures with E5.

Usage::

    .venv/bin/python -m agentsearch.bench.answer_languages --data ../shared/eval/xquad --languages ar,de --limit 100 \\
        [--offset 0] [--baseline-tree /tmp/base] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

SIGNALS = ("lexical", "semantic", "kind", "retrieval")
# An extractive answer's sentence: "Body [n]." (the mark may be missing, or another script's).
_CITED = re.compile(r"\s*(.+?)\s\[(\d+)\]([.!?。！？؟।]?)", re.DOTALL)
_BARE_NUMBER = re.compile(r"^(?:\(\d{1,3}\)|\d{1,3}(?:\.\d{1,3})*[.)]?)(?=\s|$)")
_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_THAI = re.compile(r"[\u0e00-\u0eff]")


def sentence_figures(question: str, answer: str, documents: list, spans: list[str], language: str) -> Counter:
    """Counts over one answer's delivered sentences: ``sentences``, ``off_question`` (none of the question's terms
    and no gold span), ``fragments`` (under three words or opening with a bare number)."""
    from agentsearch.pipeline.eval.answers import holds_gold_span
    from agentsearch.pipeline.job.answer.extractive import _analyzer, _holds, _language_of

    analyzer = _analyzer(language)
    languages = [_language_of(d, analyzer) for d in documents]
    terms = set(analyzer.query_terms(question, languages)[0])
    counts: Counter = Counter()
    for body, n, _ in _CITED.findall(answer):
        index = int(n) - 1
        if not 0 <= index < len(documents):
            continue
        counts["sentences"] += 1
        held = set(analyzer.terms_as(languages[index], body))
        if not any(_holds(t, held) for t in terms) and not holds_gold_span(body, spans):
            counts["off_question"] += 1
        words = len(body.split()) + len(_HAN.findall(body)) // 2 + len(_THAI.findall(body)) // 6
        counts["fragments"] += words < 3 or bool(_BARE_NUMBER.match(body))
    return counts


def _questions(data: Path, language: str, offset: int, limit: int) -> tuple[list[tuple[str, str]], dict, dict]:
    from agentsearch.pipeline.eval.answers import load_gold_answers
    from agentsearch.pipeline.eval.retrieval import load_beir_queries, load_qrels

    gold = load_gold_answers(data / language / "answers.jsonl")
    qrels = load_qrels(data / language / "qrels" / "dev.tsv")
    asked = [(q, t) for q, t in load_beir_queries(data / language / "queries.jsonl").items() if gold.get(q)]
    return asked[offset:offset + limit], gold, qrels


def measure(data: Path, language: str, offset: int, limit: int, diagnose: bool) -> dict:
    import inspect

    from agentsearch.pipeline.eval.answers import holds_gold_span
    from agentsearch.pipeline.eval.retrieval import ensure_corpus_indexed
    from agentsearch.pipeline.job.job_state import JobState
    from agentsearch.pipeline.job.workflow import answer_step, search_config
    from agentsearch.pipeline.services import get_services

    services = get_services()
    settings = services.settings
    collection, _, _ = ensure_corpus_indexed(services, data / language / "corpus.jsonl")
    retriever = services.uncached_retriever()
    asked, gold, qrels = _questions(data, language, offset, limit)
    if diagnose:  # an earlier version, measured without diagnostics, has no score_sentences
        from agentsearch.pipeline.job.answer import score_sentences
    # An earlier version's answer step may not take the model's name.
    named: dict[str, Any] = {"embedding_model": settings.embedding_model} if "embedding_model" in inspect.signature(
        answer_step).parameters else {}
    hits = 0
    figures: Counter = Counter()
    answer_ms: list[float] = []
    paragraph = in_documents = in_sentence = 0
    ranks: Counter = Counter()
    lost_on: Counter = Counter()
    for question_id, text in asked:
        state = JobState(job_id=f"bench-{question_id}", collection_id=collection, query=text, original_query=text,
                         top_k=settings.default_top_k)
        config = search_config(state, settings.search_defaults())
        state.documents = retriever.search(collection, text, config, model=settings.embedding_model).documents
        started = time.perf_counter()
        answered = answer_step(state, embed=services.embedder.embed, language=settings.keyword_language,
                                     **named)
        answer_ms.append((time.perf_counter() - started) * 1000)
        spans = gold[question_id]
        hits += holds_gold_span(answered.answer or "", spans)
        figures += sentence_figures(text, answered.answer or "", state.documents, spans, settings.keyword_language)
        if not diagnose:
            continue
        paragraph += any(d.id in qrels.get(question_id, {}) for d in state.documents)
        in_documents += any(holds_gold_span(d.text, spans) for d in state.documents)
        scored, _ = score_sentences(text, state.documents, embed=services.embedder.embed,
                                    language=settings.keyword_language, embedding_model=settings.embedding_model)
        rank = next((i for i, s in enumerate(scored) if holds_gold_span(s.text, spans)), None)
        if rank is None:
            continue
        in_sentence += 1
        ranks[str(rank + 1) if rank < 3 else "4-5" if rank < 5 else "6+"] += 1
        if not holds_gold_span(answered.answer or "", spans):
            first, found = scored[0], scored[rank]
            beaten = [s for s in SIGNALS if float(getattr(first, s) or 0) > float(getattr(found, s) or 0)]
            lost_on["+".join(beaten) or "tie"] += 1
    n = len(asked)
    report = {"language": language, "questions": n, "gold_span_rate": round(hits / n, 4),
              "answer_ms": {"p50": round(statistics.median(answer_ms), 2),
                            "p95": round(sorted(answer_ms)[int(0.95 * (n - 1))], 2)},
              "embedding_model": settings.embedding_model, "sentences": figures["sentences"],
              "per_answer": round(figures["sentences"] / n, 3),
              "off_question": round(figures["off_question"] / max(figures["sentences"], 1), 4),
              "fragments": round(figures["fragments"] / max(figures["sentences"], 1), 4)}
    if diagnose:
        report.update(gold_paragraph=round(paragraph / n, 4), span_in_documents=round(in_documents / n, 4),
                      span_in_a_sentence=round(in_sentence / n, 4), gold_rank=dict(ranks), lost_on=dict(lost_on))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/xquad"))
    parser.add_argument("--languages", default="en,de,es,ar,hi,ro,ru,th,zh")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--answers-only", action="store_true", help=argparse.SUPPRESS)  # the baseline's child
    args = parser.parse_args()
    data = args.data.resolve()
    languages = args.languages.split(",")

    if args.answers_only:
        print(json.dumps([measure(data, lang, args.offset, args.limit, diagnose=False) for lang in languages]))
        return
    baseline: dict[str, dict] = {}
    if args.baseline_tree is not None:
        child = subprocess.run(
            [sys.executable, __file__, "--data", str(data), "--languages", args.languages, "--offset",
             str(args.offset), "--limit", str(args.limit), "--answers-only"],
            env={**os.environ, "PYTHONPATH": str(_sources(args.baseline_tree))}, cwd=args.baseline_tree,
            capture_output=True, text=True, check=True)
        baseline = {r["language"]: r for r in json.loads(child.stdout.strip().splitlines()[-1])}
    reports = []
    print(f"{'lang':<5}{'n':>4}{'paragraph':>10}{'span in docs':>13}{'in a sentence':>14}  gold rank"
          f"{'':<24}{'gold span':>18}{'answer ms p50':>20}{'per answer':>16}{'off question':>18}{'fragments':>18}"
          "  lost on")
    for language in languages:
        r = measure(data, language, args.offset, args.limit, diagnose=True)
        r["baseline"] = baseline.get(language)
        reports.append(r)
        before = r["baseline"]
        span = (f"{before['gold_span_rate']:.3f} → " if before else "") + f"{r['gold_span_rate']:.3f}"
        cost = (f"{before['answer_ms']['p50']:.1f} → " if before else "") + f"{r['answer_ms']['p50']:.1f}"
        shares = [(f"{before[k]:{f}} → " if before and k in before else "") + f"{r[k]:{f}}"
                  for k, f in (("per_answer", ".2f"), ("off_question", ".3f"), ("fragments", ".3f"))]
        print(f"{language:<5}{r['questions']:>4}{r['gold_paragraph']:>10.3f}{r['span_in_documents']:>13.3f}"
              f"{r['span_in_a_sentence']:>14.3f}  {json.dumps(r['gold_rank']):<33}{span:>18}{cost:>20}"
              f"{shares[0]:>16}{shares[1]:>18}{shares[2]:>18}  "
              f"{json.dumps(r['lost_on'])}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2, ensure_ascii=False) + "\n")


def _sources(tree: Path) -> Path:
    """Where a checkout's package is: its ``src/`` in the src layout, else the checkout itself."""
    tree = tree.resolve()
    return tree / "src" if (tree / "src" / "agentsearch").is_dir() else tree


if __name__ == "__main__":
    main()
