"""Whether the offline answer quotes titles: XQuAD's English articles rendered as files (``article_files``: a
heading "Part k" above each paragraph of a Word, HTML or Markdown file, the article's title on each slide, a page
of a PDF), read by the real readers in their child process, chunked as ingestion chunks them, and each question
answered on its article's chunks.

Per format:

- ``fragments``: the share of delivered sentences that are no sentence: under three words or opening with a bare
  number;
- ``titled``: the share that carry a title glued to their front ("Part 3 Super Bowl 50 was ...", the deck's
  "Super Bowl 50 Super Bowl 50 was ...");
- ``gold_span_rate``: answers holding a gold span (citation marks read past), as ``agentsearch eval answers``.

The answer is the extractive one, lexical (no embedding model), on every chunk of the question's article with equal
search scores: the reading and the sentences are measured, not the search. With ``--baseline-tree DIR`` (an earlier
checkout) the same is measured by that code in a child process and shown before this code's figures; the counting is
this module's in both.

Usage::

    .venv/bin/python -m agentsearch.bench.answer_formats --data ../shared/eval/xquad/en --questions 200 \\
        [--formats pdf,docx,pptx,html,markdown] [--baseline-tree /tmp/base] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

FORMATS = ("pdf", "docx", "pptx", "html", "markdown")
_CITED = re.compile(r"\s*(.+?)\s\[(\d+)\][.!?]?", re.DOTALL)
_BARE_NUMBER = re.compile(r"^\(?\d{1,3}(?:\.\d{1,3})*[.)]?(?=\s|$)")
_PART = re.compile(r"^Part \d+\b")


def counts_of(answer: str, title: str, spans: list[str]) -> Counter:
    """Over one answer's delivered sentences: ``sentences``, ``fragments``, ``titled``."""
    counts: Counter = Counter()
    for body, _ in _CITED.findall(answer):
        counts["sentences"] += 1
        counts["fragments"] += len(body.split()) < 3 or bool(_BARE_NUMBER.match(body))
        after = body[len(title):].lstrip() if body.startswith(f"{title} ") else ""
        counts["titled"] += bool(_PART.match(body)) or bool(after[:1].isupper())
    return counts


def measure(data: Path, formats: list[str], questions: int) -> dict[str, dict]:
    from agentsearch.pipeline.documents import Document
    from agentsearch.pipeline.eval.answers import holds_gold_span, load_gold_answers
    from agentsearch.pipeline.eval.article_files import load_articles, load_questions, render, split_paragraph_id
    from agentsearch.pipeline.ingestion.chunking import chunk_parts
    from agentsearch.pipeline.ingestion.files import read_file_document
    from agentsearch.pipeline.job.answer import extractive_answer
    from agentsearch.pipeline.parsing.parsed import ParseLimits

    articles = {a.id: a for a in load_articles(data / "corpus.jsonl")}
    gold = load_gold_answers(data / "answers.jsonl")
    asked = [q for q in load_questions(data, questions) if gold.get(q[0])]
    reports: dict[str, dict] = {}
    for file_format in formats:
        chunks: dict[str, list[Document]] = {}
        with tempfile.TemporaryDirectory(prefix="answer-formats-") as folder:
            for article in articles.values():
                read = read_file_document(render(article, file_format, Path(folder)), file_format, ParseLimits())
                chunks[article.id] = [Document(id=f"{article.id}-{i}", title=article.title, text=text, score=1.0)
                                      for i, (text, _) in enumerate(chunk_parts(read.text, read.parts))]
        counts: Counter = Counter()
        hits = 0
        for question_id, text, paragraph in asked:
            article = articles[split_paragraph_id(paragraph)[0]]
            answer = extractive_answer(text, chunks[article.id], language="english").text
            hits += holds_gold_span(answer, gold[question_id])
            counts += counts_of(answer, article.title, gold[question_id])
        sentences = max(counts["sentences"], 1)
        reports[file_format] = {"questions": len(asked), "sentences": counts["sentences"],
                                "per_answer": round(counts["sentences"] / len(asked), 3),
                                "fragments": round(counts["fragments"] / sentences, 4),
                                "titled": round(counts["titled"] / sentences, 4),
                                "gold_span_rate": round(hits / len(asked), 4)}
    return reports


def _sources(tree: Path) -> Path:
    tree = tree.resolve()
    return tree / "src" if (tree / "src" / "agentsearch").is_dir() else tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/xquad/en"))
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # the baseline's child
    args = parser.parse_args()
    data, formats = args.data.resolve(), args.formats.split(",")
    if args.measure_only:
        print(json.dumps(measure(data, formats, args.questions)))
        return
    baseline: dict[str, dict] = {}
    if args.baseline_tree is not None:
        child = subprocess.run([sys.executable, __file__, "--data", str(data), "--formats", args.formats,
                                "--questions", str(args.questions), "--measure-only"],
                               env={**os.environ, "PYTHONPATH": str(_sources(args.baseline_tree))},
                               capture_output=True, text=True, check=True)
        baseline = json.loads(child.stdout.strip().splitlines()[-1])
    after = measure(data, formats, args.questions)
    print(f"{'format':<10}{'n':>5}{'sentences/answer':>20}{'fragments':>18}{'titled':>18}{'gold span':>18}")
    for file_format, r in after.items():
        b = baseline.get(file_format)
        cells = [(f"{b[k]:{f}} → " if b else "") + f"{r[k]:{f}}"
                 for k, f in (("per_answer", ".2f"), ("fragments", ".3f"), ("titled", ".3f"),
                              ("gold_span_rate", ".3f"))]
        print(f"{file_format:<10}{r['questions']:>5}{cells[0]:>20}{cells[1]:>18}{cells[2]:>18}{cells[3]:>18}",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps({"after": after, "baseline": baseline}, indent=2) + "\n")


if __name__ == "__main__":
    main()
