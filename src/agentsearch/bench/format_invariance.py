"""The format-invariance evaluation (``agentsearch.pipeline.eval.format_invariance``) on a stack of its own: XQuAD's
articles rendered into files of each format, uploaded, and every question asked as a job, beside the same paragraphs
uploaded as JSON Lines documents. ``agentsearch eval formats`` runs it.

Usage::

    report = run_on_stack(Path("/tmp/formats"), ["pdf", "docx"], questions=200)
    report["formats"]["pdf"]["ratio"]            # the format's score over the baseline's
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsearch.devstack import DevStack
from agentsearch.pipeline.eval.article_files import load_articles, load_questions, render
from agentsearch.pipeline.eval.format_invariance import (
    TOP_K,
    XQUAD,
    Asked,
    ask_all,
    baseline_jsonl,
    goal_of,
    language_of,
    ratio,
    runs_of,
    score_baseline,
    score_format,
    upload,
)


def run_on_stack(workdir: Path, formats: list[str], questions: int | None = None, xquad: Path = XQUAD,
                 say: Callable[[str], None] = print, search: dict[str, Any] | None = None) -> dict[str, Any]:
    """Render, upload and ask on a stack of its own (one worker of two processes); the report of every format.
    ``search``: retrieval overrides of every job, the baseline's too (``{"strategy": "semantic"}``)."""
    started = time.monotonic()
    languages = sorted({language_of(f) for f in formats})
    articles = {lang: load_articles(xquad / lang / "corpus.jsonl") for lang in languages}
    asked_of = {lang: load_questions(xquad / lang, questions) for lang in languages}
    report: dict[str, Any] = {"questions": {lang: len(asked_of[lang]) for lang in languages}, "top_k": TOP_K,
                              "formats": {}, "baseline": {}, "runs": {},
                              "search": search or {}}
    baselines: dict[str, dict[str, Asked]] = {}
    with DevStack(workdir / "stack", workers=1, concurrency=2, user="format-eval") as stack, stack.http() as http:
        for lang in languages:
            indexed = upload(http, f"baseline-{lang}", [(f"xquad-{lang}.jsonl", baseline_jsonl(articles[lang]))])
            say(f"baseline {lang}: {indexed['documents']} in {indexed['seconds']} s")
            asked = ask_all(http, indexed["collection_id"], asked_of[lang], search=search)
            baselines[lang] = {q.question_id: q for q in asked}
            report["runs"][f"baseline-{lang}"] = runs_of(asked)
            report["baseline"][lang] = {**score_baseline(asked), "indexing": indexed}
            say(f"baseline {lang}: {report['baseline'][lang]['fraction']:.4f}")
        for file_format in formats:
            lang = language_of(file_format)
            names = {a.id: a.name for a in articles[lang]}
            began = time.monotonic()
            files = [render(a, file_format, workdir / file_format) for a in articles[lang]]
            rendered_s = time.monotonic() - began
            indexed = upload(http, f"formats-{file_format}", [(p.name, p.read_bytes()) for p in files])
            say(f"{file_format}: rendered in {rendered_s:.1f} s, {indexed['documents']} in {indexed['seconds']} s")
            began = time.monotonic()
            asked = ask_all(http, indexed["collection_id"], asked_of[lang], search=search)
            asked_s = time.monotonic() - began
            report["runs"][file_format] = runs_of(asked)
            scored = score_format(file_format, asked, names, baseline=baselines[lang])
            base = report["baseline"][lang]
            report["formats"][file_format] = {**scored, "ratio": ratio(scored, base), "goal": goal_of(file_format),
                                              "language": lang, "render_s": round(rendered_s, 1),
                                              "ask_s": round(asked_s),
                                              "bytes": sum(p.stat().st_size for p in files), "indexing": indexed}
            say(f"{file_format}: {scored['fraction']:.4f} (article {scored['article_fraction']:.4f}), ratio "
                f"{report['formats'][file_format]['ratio']}")
    report["seconds"] = round(time.monotonic() - started)
    return report
