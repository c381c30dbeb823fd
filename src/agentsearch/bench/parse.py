"""Parse speed: pages per second of each format's reader, OCR pages per second, and the share of ingestion time
that parsing takes for a folder of mixed files.

    .venv/bin/python -m agentsearch.bench.parse [--pages 240] [--ocr-pages 6] [--rounds 3] [--no-stack]

1. Reading: one file per format, XQuAD en paragraphs rendered as the format-invariance evaluation renders them
   (``agentsearch.pipeline.eval.article_files``: one paragraph per page, slide, row or heading section), read through
   ``agentsearch.pipeline.parsing.read_file`` (the real child process: interpreter start, sniffed format, the reader)
   with the service's limits but its CPU time raised so no file is refused. A "page" is one place of the file: a page, a
   slide, a row, a section. Median of the rounds.
2. OCR: a scanned PDF (150 dpi page images, no text layer) read the same way, with the service's OCR languages
   (``ocr_languages``: all the language packs it installs) and with English alone.
3. The share of ingestion: ten files of mixed formats uploaded at once to a stack of its own (one worker, two
   processes, after a warm-up file): the worker's own task times from its log (Celery's ``succeeded in Xs``),
   parse_document against parse_document + ingest_documents, and the wall clock from the upload request to
   the last document indexed.

Results go to src/agentsearch/bench/results/parse.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from agentsearch.bench.common import load_average, machine, write_result
from agentsearch.pipeline.eval.article_files import Article, load_articles, render
from agentsearch.pipeline.eval.format_invariance import XQUAD, upload

BORN_DIGITAL = ("pdf", "docx", "pptx", "xlsx", "csv", "html", "markdown")
# The sniffed format each rendering is read as.
READ_AS = {"pdf": "pdf", "docx": "docx", "pptx": "pptx", "xlsx": "xlsx", "csv": "csv", "html": "html",
           "markdown": "markdown", "scan": "pdf"}
# The mixed folder: (format, paragraphs); 124 places in all, three of them scanned pages.
FOLDER = (("pdf", 40), ("pdf", 10), ("scan", 3), ("docx", 20), ("pptx", 15), ("xlsx", 12), ("csv", 9),
          ("html", 5), ("markdown", 5), ("markdown", 5))
_TASK_TIME = re.compile(r"Task agentsearch\.(parse_document|ingest_documents)\[[^\]]+\] succeeded in ([0-9.]+)s")


def book(paragraphs: int, name: str, start: int = 0, language: str = "en") -> Article:
    """One file's worth of XQuAD paragraphs (from the ``start``-th on), as one article called ``name``."""
    every = [p for a in load_articles(XQUAD / language / "corpus.jsonl") for p in a.paragraphs]
    chosen = (every * (1 + (start + paragraphs) // len(every)))[start:start + paragraphs]
    return Article(name, name, tuple(chosen))


def limits(languages: str | None = None):
    """The service's parse limits, CPU time raised to ten minutes (a bench file is never refused for time)."""
    from agentsearch.pipeline.parsing import ParseLimits
    from agentsearch.pipeline.platform.settings import get_settings

    service = ParseLimits.from_settings(get_settings())
    return dataclasses.replace(service, time_s=600, ocr_languages=languages or service.ocr_languages)


def read_rate(path: Path, file_format: str, places: int, rounds: int, parse_limits) -> dict:
    """Places per second of ``read_file`` on ``path``, per round, and the parts it gave."""
    from agentsearch.pipeline.parsing import ParseRefused, read_file

    rates, parts = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        try:
            parsed = read_file(path, file_format, parse_limits)
        except ParseRefused as exc:
            return {"places": places, "parts": 0, "bytes": path.stat().st_size, "median": 0.0, "rounds": [],
                    "refused": str(exc)}
        rates.append(places / (time.perf_counter() - started))
        parts = len(parsed.parts)
    return {"places": places, "parts": parts, "bytes": path.stat().st_size, "median": statistics.median(rates),
            "rounds": rates}


def measure_reading(folder: Path, pages: int, ocr_pages: int, rounds: int) -> dict:
    """Pages per second of every born-digital format, and of OCR with the service's languages and with English."""
    results: dict = {"formats": {}, "ocr": {}}
    service = limits()
    text = book(pages, "xquad-book")
    for file_format in BORN_DIGITAL:
        path = render(text, file_format, folder / file_format)
        results["formats"][file_format] = read_rate(path, READ_AS[file_format], pages, rounds, service)
        print(f"{file_format}: {results['formats'][file_format]['median']:.1f} pages/s", flush=True)
    scan = render(book(ocr_pages, "xquad-scan"), "scan", folder / "scan")
    for label, languages in (("service languages", service.ocr_languages), ("English only", "eng")):
        results["ocr"][label] = {**read_rate(scan, "pdf", ocr_pages, rounds, limits(languages)),
                                 "languages": languages}
        print(f"OCR, {label}: {results['ocr'][label]['median']:.3f} pages/s", flush=True)
    return results


def task_seconds(log_lines: list[str]) -> dict[str, list[float]]:
    """The run times of the parse and ingest tasks in a worker's log lines."""
    times: dict[str, list[float]] = {"parse_document": [], "ingest_documents": []}
    for line in log_lines:
        found = _TASK_TIME.search(line)
        if found:
            times[found[1]].append(float(found[2]))
    return times


def measure_share(folder: Path, workdir: Path) -> dict:
    """Ten mixed files uploaded to a stack: parse task time against all of ingestion's task time, and wall clock."""
    from agentsearch.bench.common import bench_stack, wait_idle

    files, start = [], 0
    for number, (file_format, paragraphs) in enumerate(FOLDER):
        files.append(render(book(paragraphs, f"mixed-{number}-{file_format}", start), file_format, folder / "mixed"))
        start += paragraphs
    warm_up = render(book(2, "warm-up", 239), "markdown", folder / "warm")
    with bench_stack(workdir, workers=1, concurrency=2) as stack, stack.http() as http:
        wait_idle(stack)
        upload(http, "warm-up", [(warm_up.name, warm_up.read_bytes())], poll_s=0.2)
        before = len(stack.worker_log_lines("succeeded in"))
        started = time.monotonic()
        indexed = upload(http, "mixed", [(f.name, f.read_bytes()) for f in files], poll_s=0.2)
        wall = time.monotonic() - started
        times = task_seconds(stack.worker_log_lines("succeeded in")[before:])
    parse, ingest = sum(times["parse_document"]), sum(times["ingest_documents"])
    return {"files": [f"{f.name} ({n} places)" for f, (_, n) in zip(files, FOLDER, strict=True)],
            "places": sum(n for _, n in FOLDER), "bytes": sum(f.stat().st_size for f in files),
            "documents": indexed["documents"],
            "parse_task_s": parse, "ingest_task_s": ingest, "parse_tasks": len(times["parse_document"]),
            "ingest_tasks": len(times["ingest_documents"]), "parse_share": parse / (parse + ingest),
            "wall_s": wall}


def measure(pages: int = 240, ocr_pages: int = 6, rounds: int = 3, stack: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="agentsearch-parse-") as tmp:
        result = {"pages": pages, "ocr_pages": ocr_pages, "rounds": rounds, "load_at_start": load_average(),
                  **measure_reading(Path(tmp) / "files", pages, ocr_pages, rounds)}
        if stack:
            result["load_at_share"] = load_average()
            result["share"] = measure_share(Path(tmp) / "files", Path(tmp) / "stack")
    return result


def table(r: dict, command: str) -> str:
    about = machine()
    lines = [
        "# Parse speed", "",
        f"Command: `{command}`",
        f"Machine: {about['nproc']} CPUs ({about['CPU model']}), Python {about['Python']}; load average at the start "
        f"(1, 5, 15 min): {', '.join(f'{x:.2f}' for x in r['load_at_start'])}.",
        f"Files: XQuAD en paragraphs, one per place, {r['pages']} places per born-digital file, {r['ocr_pages']} "
        "scanned pages (150 dpi);",
        f"read through `agentsearch.pipeline.parsing.read_file` (a child process per read), "
        f"median of {r['rounds']} rounds.", "",
        "| format | places | parts read | KiB | median places/s | rounds |",
        "|---|---:|---:|---:|---:|---|",
    ]
    rows = [*r["formats"].items(), *((f"scanned PDF, OCR ({k}: {_languages(v['languages'])})", v)
                                     for k, v in r["ocr"].items())]
    for name, v in rows:
        rounds = v.get("refused") or ", ".join(f"{x:.2f}" for x in v["rounds"])
        lines.append(f"| {name} | {v['places']} | {v['parts']} | {v['bytes'] / 1024:.0f} | {v['median']:.2f} | "
                     f"{rounds} |")
    if "share" in r:
        s = r["share"]
        lines += [
            "", f"Share of ingestion (load average at its start: {r['load_at_share'][0]:.2f}): {len(s['files'])} files "
            f"({s['places']} places, {s['bytes'] / 2**20:.1f} MiB)",
            "uploaded at once to a stack (one worker, two processes):", *(f"- {f}" for f in s["files"]), "",
            "| | seconds |", "|---|---:|",
            f"| parse_document tasks ({s['parse_tasks']}) | {s['parse_task_s']:.1f} |",
            f"| ingest_documents tasks ({s['ingest_tasks']}: chunk, embed, BM25, Milvus) | {s['ingest_task_s']:.1f} |",
            f"| parsing's share of the worker's task time | {s['parse_share']:.0%} |",
            f"| wall clock, upload request to all indexed | {s['wall_s']:.1f} |",
            "", f"Documents: {s['documents']}.",
        ]
    return "\n".join(lines) + "\n"


def _languages(packs: str) -> str:
    count = packs.count("+") + 1
    return packs if count == 1 else f"{count} packs"


def write(result: dict, command: str) -> str:
    """The table of ``result`` written to src/agentsearch/bench/results/parse.md, and returned."""
    return write_result("parse.md", table(result, command))


def command_line(pages: int, ocr_pages: int, rounds: int, stack: bool) -> str:
    return (f".venv/bin/python -m agentsearch.bench.parse --pages {pages} --ocr-pages {ocr_pages} --rounds {rounds}"
            f"{'' if stack else ' --no-stack'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=240, help="Places per born-digital file.")
    parser.add_argument("--ocr-pages", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-stack", action="store_true", help="Skip the share of ingestion (no stack).")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args.pages, args.ocr_pages, args.rounds, not args.no_stack)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(write(result, command_line(args.pages, args.ocr_pages, args.rounds, not args.no_stack)))


if __name__ == "__main__":
    main()
