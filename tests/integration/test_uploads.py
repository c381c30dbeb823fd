"""Files uploaded as documents (``POST /v1/collections/{id}/files``) and a collection's documents read back."""

from __future__ import annotations

import time

from tests.integration.conftest import SAMPLE_CORPUS


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
