"""Per-artifact generation time of the six response agents, and a look at what two of them render.

Builds one realistic response input (the extractive answer to the demo question over five documents of the sample
corpus, with citations and reasoning steps), runs each response agent once to warm up (imports, font caches) and
then N more times, and prints the median per artifact. The table, the machine and the command go to
``src/agentsearch/bench/results/artifacts.md``.

It also renders page 1 of the PDF report with ``pdftoppm -png -r 60`` and, when ``libreoffice`` is on PATH, the
first slide of the deck (pptx -> pdf with ``libreoffice --headless --convert-to pdf``, then pdftoppm), into
``src/agentsearch/bench/results/``, so one can see that they look right.

Usage::

    .venv/bin/python -m agentsearch.bench.artifacts             # 5 runs per artifact
    .venv/bin/python -m agentsearch.bench.artifacts --runs 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from agentsearch.pipeline.agents.base import AgentContext, Document, ResponseAgentInput, Stage
from agentsearch.pipeline.agents.builtin.audio_summary import AudioSummary
from agentsearch.pipeline.agents.builtin.chart_generator import ChartGenerator
from agentsearch.pipeline.agents.builtin.email_draft import EmailDraft
from agentsearch.pipeline.agents.builtin.executive_summary import ExecutiveSummary
from agentsearch.pipeline.agents.builtin.pdf_report import PdfReport
from agentsearch.pipeline.agents.builtin.pptx_generator import PptxGenerator
from agentsearch.pipeline.job.answer import extractive_answer

REPO = Path(__file__).resolve().parents[3]
RESULTS = REPO / "src" / "agentsearch" / "bench" / "results"
QUERY = "What was Northwind Energy's revenue in Q4 2025, and how did it compare with Q4 2024?"
DOCUMENTS = {"nw-2025-q4": 0.748, "nw-2025-q1": 0.741, "nw-2025-q3": 0.686, "nw-2024-q4": 0.673, "nw-2024-q3": 0.659}

# (artifact label, agent, config)
CASES = [
    ("PowerPoint (.pptx)", PptxGenerator, {}),
    ("PDF report (.pdf)", PdfReport, {}),
    ("chart (.png)", ChartGenerator, {}),
    ("chart (.svg)", ChartGenerator, {"format": "svg"}),
    ("audio summary (.mp3)", AudioSummary, {}),
    ("email draft (.html)", EmailDraft, {}),
    ("executive summary (.txt)", ExecutiveSummary, {}),
]


def realistic_input() -> ResponseAgentInput:
    sample = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
    corpus = {d["id"]: d for d in map(json.loads, sample.read_text().splitlines())}
    documents = [
        Document(id=i, title=corpus[i]["title"], text=corpus[i]["text"], score=s, metadata=corpus[i]["metadata"])
        for i, s in DOCUMENTS.items()
    ]
    answer = extractive_answer(QUERY, documents, max_sentences=4, with_cot=True)
    return ResponseAgentInput(
        answer=answer.text,
        sources=answer.sources,
        query=QUERY,
        documents=documents,
        cot_steps=answer.cot_steps,
        metadata={"language": "en"},
    )


def machine() -> dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "uname -m": subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip(),
        "CPUs": str(os.cpu_count()),
        "CPU model": cpu or "unknown",
        "Python": platform.python_version(),
        "OS": platform.platform(),
    }


def render_png(pdf: Path, prefix: Path, page: int = 1) -> Path | None:
    """One page of a PDF as a small PNG (pdftoppm -png -r 60 -f N -l N)."""
    if shutil.which("pdftoppm") is None:
        return None
    subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", str(page), "-l", str(page), "-singlefile", str(pdf),
                    str(prefix)], check=True, timeout=60)
    return prefix.with_suffix(".png")


def render_slides(pptx: Path, prefixes: list[Path]) -> tuple[list[Path], str]:
    """The first slides of a deck as PNGs: LibreOffice makes a PDF of it, pdftoppm renders its pages."""
    office = shutil.which("libreoffice") or shutil.which("soffice")
    if office is None:
        return [], "libreoffice is not on PATH: slides not rendered"
    with tempfile.TemporaryDirectory(prefix="agentsearch-lo-") as tmp:
        # Own profile directory: a running LibreOffice (or a stale lock) must not swallow the conversion.
        profile = Path(tmp) / "profile"
        started = time.perf_counter()
        subprocess.run(
            [office, f"-env:UserInstallation=file://{profile}", "--headless", "--convert-to", "pdf", "--outdir", tmp,
             str(pptx)],
            check=True, timeout=180, capture_output=True,
        )
        converted = Path(tmp) / (pptx.stem + ".pdf")
        seconds = time.perf_counter() - started
        pngs = [render_png(converted, prefix, page) for page, prefix in enumerate(prefixes, start=1)]
        return [p for p in pngs if p], f"libreoffice --headless --convert-to pdf took {seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per artifact (after one warm-up run)")
    args = parser.parse_args()

    inp = realistic_input()
    ctx = AgentContext(pipeline_stage=Stage.RESPONSE, query=QUERY)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = []
    outputs = {}
    for label, cls, config in CASES:
        agent = cls(config)
        started = time.perf_counter()
        artifact = agent.run(inp, ctx)
        cold_ms = (time.perf_counter() - started) * 1000
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            artifact = agent.run(inp, ctx)
            times.append((time.perf_counter() - started) * 1000)
        outputs[artifact.filename] = artifact
        median = statistics.median(times)
        rows.append((label, cls.agent_id, len(artifact.data), median, min(times), max(times), cold_ms))

    header = "| artifact | agent | size | median ms | min ms | max ms | first run ms |"
    lines = [header, "|---|---|---:|---:|---:|---:|---:|"]
    for label, agent_id, size, median, low, high, cold in rows:
        ms = [f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 0.1 else f"{v:.3f}" for v in (median, low, high, cold)]
        lines.append(f"| {label} | `{agent_id}` | {size / 1024:.1f} KiB | " + " | ".join(ms) + " |")
    table = "\n".join(lines)
    print(table)

    notes = []
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp:
        pdf = Path(tmp) / "report.pdf"
        pdf.write_bytes(outputs["report.pdf"].data)
        page = render_png(pdf, RESULTS / "report-page1")
        notes.append(f"PDF page 1: `{page.relative_to(REPO)}`" if page else "pdftoppm missing: PDF page not rendered")
        pptx = Path(tmp) / "presentation.pptx"
        pptx.write_bytes(outputs["presentation.pptx"].data)
        slides, how = render_slides(pptx, [RESULTS / "slide1", RESULTS / "slide2"])
        notes.append(f"slides 1-2: {', '.join(f'`{p.relative_to(REPO)}`' for p in slides)} ({how})" if slides else how)
    (RESULTS / "chart.png").write_bytes(outputs["chart.png"].data)
    notes.append("chart: `src/agentsearch/bench/results/chart.png` (the PNG artifact itself)")
    for note in notes:
        print(note)

    command = "  ".join(["", ".venv/bin/python -m agentsearch.bench.artifacts", *sys.argv[1:]]).strip()
    md = [
        "# Response artifact generation time",
        "",
        f"Median of {args.runs} runs per artifact, after one warm-up run (its time is the last column: first use pays",
        "for imports and font caches). One process, one thread, the agents called directly (no queue, no storage).",
        f"Input: the extractive answer to \"{QUERY}\" over five sample-corpus documents "
        f"({len(inp.answer)} characters, {len(inp.sources)} sources, {len(inp.cot_steps or [])} reasoning steps).",
        "",
        table,
        "",
        "Machine:",
        "",
        *[f"- {k}: {v}" for k, v in machine().items()],
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        f"Command: `{command}`",
        "",
        "Rendered:",
        "",
        *[f"- {n}" for n in notes],
        "",
    ]
    (RESULTS / "artifacts.md").write_text("\n".join(md))
    print(f"wrote {(RESULTS / 'artifacts.md').relative_to(REPO)}")


if __name__ == "__main__":
    main()
