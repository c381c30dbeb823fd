"""Files uploaded as documents (``POST /v1/collections/{id}/files``) and a collection's documents read back."""

from __future__ import annotations

import time

import httpx

from tests.integration.conftest import SAMPLE_CORPUS, extra_api
from tests.support.pdfs import page_text, pdf_file, shared_stream


def _wait_indexed(http, collection_id: str) -> dict:
    deadline = time.monotonic() + 120
    while True:
        counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
        if counts["pending"] == 0:
            return counts
        assert time.monotonic() < deadline, counts
        time.sleep(0.3)


def test_files_are_read_as_the_cli_reads_them_and_a_bad_file_is_refused_whole(stack):
    with stack.http() as http:
        collection_id = http.post("/v1/collections", json={"name": "uploads"}).json()["id"]
        url = f"/v1/collections/{collection_id}/files"

        bad = '{"id": "a", "title": "A", "text": "fine"}\n{"id": "b", "title": "B"}\n'
        refused = http.post(url, files=[("files", ("notes.md", b"# Notes\n\nKept?\n")),
                                        ("files", ("bad.jsonl", bad.encode()))])
        assert refused.status_code == 422
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "files", 1] and error["msg"].startswith("bad.jsonl: line 2")
        assert http.get(f"/v1/collections/{collection_id}/documents").json()["total"] == 0  # nothing of it stored

        wrong_type = http.post(url, files=[("files", ("tool.exe", b"MZ"))])
        assert wrong_type.status_code == 422 and wrong_type.json()["detail"][0]["loc"] == ["body", "files", 0]
        broken_pdf = http.post(url, files=[("files", ("broken.pdf", b"%PDF-1.4 not really"))])
        assert broken_pdf.status_code == 422 and "broken.pdf" in broken_pdf.json()["detail"][0]["msg"]

        accepted = http.post(url, files=[("files", ("notes.md", b"# Meeting notes\n\nThe **grid** was stable.\n")),
                                         ("files", ("corpus.jsonl", SAMPLE_CORPUS.read_bytes()))])
        assert accepted.status_code == 202, accepted.text
        corpus_size = sum(1 for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip())
        assert accepted.json()["accepted"] == corpus_size + 1
        assert _wait_indexed(http, collection_id) == {"pending": 0, "indexed": corpus_size + 1, "failed": 0}

        listed = http.get(f"/v1/collections/{collection_id}/documents", params={"limit": 5}).json()
        assert listed["total"] == corpus_size + 1 and len(listed["items"]) == 5
        note = http.get(f"/v1/collections/{collection_id}/documents/notes").json()
        assert note["title"] == "Meeting notes" and note["text"] == "Meeting notes.\n\nThe grid was stable."
        assert http.get(f"/v1/collections/{collection_id}/documents/missing").status_code == 404

    # Another user's collection: its documents, agents and uploads answer 404, as a missing one does.
    with stack.http(stack.create_user("upload-stranger")) as stranger:
        assert stranger.get(f"/v1/collections/{collection_id}/documents").status_code == 404
        assert stranger.get(f"/v1/collections/{collection_id}/documents/notes").status_code == 404
        assert stranger.get(f"/v1/collections/{collection_id}/agents").status_code == 404
        assert stranger.post(url, files=[("files", ("x.txt", b"hello"))]).status_code == 404


def test_a_pdf_past_the_time_or_page_limit_is_refused_naming_the_file_and_nothing_is_stored(stack, tmp_path):
    """Three pages sharing one content stream of 1.8 M operators: 4 KB that took over ten CPU seconds of the API
    process to read. Past the limits a PDF is refused as any bad file is: a 422 naming it, nothing of the request
    stored; a PDF within them is read and indexed as before."""
    env = {**stack.env, "AGENTSEARCH_PDF_READ_TIME_S": "2", "AGENTSEARCH_PDF_MAX_PAGES": "3"}
    note = ("files", ("notes.md", b"# Notes\n\nThe grid was stable.\n"))
    with extra_api(env, tmp_path / "api.log") as url, \
            httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {stack.api_key}"}) as http:
        collection_id = http.post("/v1/collections", json={"name": "pdf-limits"}).json()["id"]
        upload = f"/v1/collections/{collection_id}/files"

        slow = pdf_file([shared_stream(1_800_000)] * 3)
        assert len(slow) < 8 * 1024
        refused = http.post(upload, files=[note, ("files", ("slow.pdf", slow))])
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "files", 1]
        assert error["msg"] == "slow.pdf: the PDF took longer than 2 s to read"

        four_pages = pdf_file([page_text(f"Page {n} of four.") for n in range(1, 5)])
        refused = http.post(upload, files=[note, ("files", ("long.pdf", four_pages))])
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "files", 1] and error["msg"] == "long.pdf: the PDF has more than 3 pages"
        assert http.get(f"/v1/collections/{collection_id}/documents").json()["total"] == 0  # notes.md neither

        three_pages = pdf_file([page_text(f"Page {n} of three.") for n in range(1, 4)])
        accepted = http.post(upload, files=[note, ("files", ("short.pdf", three_pages))])
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["accepted"] == 2
        assert _wait_indexed(http, collection_id) == {"pending": 0, "indexed": 2, "failed": 0}
        short = http.get(f"/v1/collections/{collection_id}/documents/short").json()
        assert short["text"] == "Page 1 of three.\n\nPage 2 of three.\n\nPage 3 of three."
        assert short["metadata"] == {"source": "short.pdf", "pages": 3}
