"""All six response agents in one job through the real stack, their artifacts downloaded and read back.

The job runs on the prefork worker (response agents on the ``artifacts`` queue), each artifact is stored once in
PostgreSQL; the API inlines it as base64 and serves the raw bytes; ``agentsearch search --out DIR`` writes them.
"""

from __future__ import annotations

import base64
import io
import re
import subprocess
from pathlib import Path

from mutagen.mp3 import MP3
from PIL import Image
from pptx import Presentation

from tests.integration.conftest import BIN, REPO, runs_by_agent, search
from tests.support.readers import HtmlReader

QUERY = "What was Northwind Energy's revenue in Q4 2025?"
AGENTS = ["pptx_generator", "pdf_report", "chart_generator", "audio_summary", "email_draft", "executive_summary"]
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
FILES = {
    "pptx_generator": ("presentation.pptx", PPTX),
    "pdf_report": ("report.pdf", "application/pdf"),
    "chart_generator": ("chart.png", "image/png"),
    "audio_summary": ("summary.mp3", "audio/mpeg"),
    "email_draft": ("email_draft.html", "text/html; charset=utf-8"),
    "executive_summary": ("executive_summary.txt", "text/plain; charset=utf-8"),
}


def read_back(filename: str, data: bytes, tmp: Path) -> tuple[str, dict]:
    """Open one artifact with a reader that is not the one that wrote it: the text it holds and what it measures."""
    assert data, filename
    suffix = Path(filename).suffix
    if suffix == ".pptx":
        prs = Presentation(io.BytesIO(data))
        text = " ".join(sh.text_frame.text for s in prs.slides for sh in s.shapes if sh.has_text_frame)
        return text, {"slides": len(prs.slides)}
    if suffix == ".pdf":
        path = tmp / filename
        path.write_bytes(data)
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
        info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
        pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M)[1])
        assert f"Page 1 of {pages}" in text
        return text, {"pages": pages}
    if suffix == ".png":
        image = Image.open(io.BytesIO(data))
        assert image.format == "PNG"
        image.verify()
        return "", {"width": image.size[0], "height": image.size[1]}
    if suffix == ".mp3":
        return "", {"duration_s": MP3(io.BytesIO(data)).info.length}
    if suffix == ".html":
        parser = HtmlReader()
        parser.feed(data.decode("utf-8"))
        assert "script" not in parser.tags and "li" in parser.tags
        return "".join(parser.text), {}
    if suffix == ".txt":
        return data.decode("utf-8"), {}
    raise AssertionError(f"unexpected artifact {filename}")


def check_artifacts(files: dict[str, bytes], answer: str, tmp: Path, metadata: dict[str, dict] | None = None) -> None:
    """Every artifact opens, holds the answer's headline number, and (given its metadata) is what it declares."""
    read = {name: read_back(name, data, tmp) for name, data in files.items()}
    for name in ("presentation.pptx", "report.pdf", "email_draft.html"):
        assert "$412 million" in " ".join(read[name][0].split()), name
    assert read["executive_summary.txt"][0].startswith(f"Executive summary: {QUERY}")
    assert read["presentation.pptx"][1]["slides"] >= 3
    assert read["summary.mp3"][1]["duration_s"] > 3
    assert (read["chart.png"][1]["width"], read["chart.png"][1]["height"]) == (800, 450)
    if metadata is None:
        return
    assert read["presentation.pptx"][1]["slides"] == metadata["pptx_generator"]["slides"]
    assert read["report.pdf"][1]["pages"] == metadata["pdf_report"]["pages"]
    chart = metadata["chart_generator"]
    assert (read["chart.png"][1]["width"], read["chart.png"][1]["height"]) == (chart["width"], chart["height"])
    # The answer holds numbers, so the chart is made of them: each bar is a value written in the answer.
    assert chart["points"] and all(p["text"] in answer for p in chart["points"]), chart["points"]
    assert len({p["label"] for p in chart["points"]}) == len(chart["points"])
    audio = metadata["audio_summary"]
    assert abs(read["summary.mp3"][1]["duration_s"] - audio["duration_s"]) < 0.25
    assert audio["voice"] == "en-us"  # no language detector ran: the default voice


def test_six_artifacts_are_stored_inlined_and_downloadable(stack, collection, tmp_path):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=AGENTS)
        assert job["status"] == "succeeded", job["error"]
        runs = runs_by_agent(job)
        assert {a: runs[a]["status"] for a in AGENTS} == dict.fromkeys(AGENTS, "ok"), job["response"]["skipped"]
        answer = job["response"]["answer"]
        assert "$412 million" in answer

        artifacts = {a["agent_id"]: a for a in job["response"]["agent_artifacts"]}
        assert set(artifacts) == set(AGENTS)
        downloaded = {}
        for agent_id, (filename, content_type) in FILES.items():
            artifact = artifacts[agent_id]
            assert (artifact["filename"], artifact["content_type"]) == (filename, content_type)
            inlined = base64.b64decode(artifact["data"])
            assert artifact["size"] == len(inlined)
            download = http.get(artifact["url"])
            assert download.status_code == 200, (agent_id, download.text[:200])
            assert download.headers["content-type"] == content_type
            assert download.content == inlined, agent_id
            downloaded[filename] = download.content
    check_artifacts(downloaded, answer, tmp_path, {a: artifacts[a]["metadata"] for a in AGENTS})
    # Stored once, in the database, by reference: one row per agent, the bytes the API served.
    rows = stack.sql("SELECT agent_id, size FROM artifacts WHERE job_id = %s", job["job_id"])
    assert dict(rows) == {a: artifacts[a]["size"] for a in AGENTS}


def test_cli_search_writes_all_six_artifacts(stack, collection, tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [str(BIN / "agentsearch"), "search", QUERY, "--collection", "it-corpus", "--agents", ",".join(AGENTS),
         "--wait", "--out", str(out)],
        cwd=REPO, env=stack.env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(name for name, _ in FILES.values())
    files = {name: (out / name).read_bytes() for name, _ in FILES.values()}
    assert all(files.values())
    check_artifacts(files, "", tmp_path)
    for name in files:
        assert str(out / name) in done.stdout  # the command lists what it wrote
