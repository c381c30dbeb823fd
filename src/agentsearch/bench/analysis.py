"""What the keyword side of ingestion costs per language: detecting each chunk's language and analysing it for BM25.

Every paragraph of each XQuAD language is chunked as ingestion chunks it and put through ``chunk_keywords`` (the
call ``index_documents`` makes per chunk), ``--rounds`` times; the median round gives milliseconds per 1,000
chunks, with the language detection alone beside it. The one-time loads (the language model, jieba's dictionary,
pythainlp, fugashi's dictionary) are timed apart, on the first text that needs each.

Usage::

    .venv/bin/python -m agentsearch.bench.analysis --data ../shared/eval/xquad [--languages en,de,zh] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/xquad"))
    parser.add_argument("--languages", default="en,de,es,ro,ru,ar,hi,th,zh")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from agentsearch.pipeline.ingestion.chunking import chunk_text
    from agentsearch.pipeline.ingestion.indexing import chunk_keywords
    from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
    from agentsearch.pipeline.retrieval.language import detect_language

    analyzer = KeywordAnalyzer("auto")
    print(f"{'language':<9}{'chunks':>7}{'first text ms':>15}{'ms / 1,000 chunks':>19}{'detection alone':>17}")
    for language in args.languages.split(","):
        rows = [json.loads(line) for line in (args.data / language / "corpus.jsonl").read_text().splitlines()]
        chunks = [(r.get("title") or "", piece) for r in rows for piece in chunk_text(r["text"])]
        started = time.perf_counter()
        chunk_keywords(analyzer, *chunks[0], {})  # loads what this language needs, once per process
        first_ms = (time.perf_counter() - started) * 1000
        rounds, detection = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for title, piece in chunks:
                chunk_keywords(analyzer, title, piece, {})
            rounds.append((time.perf_counter() - started) * 1000 / len(chunks) * 1000)
            started = time.perf_counter()
            for _, piece in chunks:
                detect_language(piece)
            detection.append((time.perf_counter() - started) * 1000 / len(chunks) * 1000)
        print(f"{language:<9}{len(chunks):>7}{first_ms:>15.0f}{statistics.median(rounds):>19.0f}"
              f"{statistics.median(detection):>17.0f}")


if __name__ == "__main__":
    main()
