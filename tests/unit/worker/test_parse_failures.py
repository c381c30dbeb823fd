"""A parse that breaks for a reason of its own ends its document ``failed`` with that reason, at once: not pending
until the reaper gives it up as lost (``agentsearch.worker.parsing.parse_document``, on the embedded app; its body
``agentsearch.pipeline.ingestion.file_parse``)."""

from __future__ import annotations

import time
import uuid

import agentsearch.pipeline.ingestion.file_parse


def test_a_parse_that_breaks_ends_failed_with_the_true_reason_and_keeps_no_bytes(client, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(agentsearch.pipeline.ingestion.file_parse, "read_file", broken)
    collection = client.post("/v1/collections", json={"name": f"broken-{uuid.uuid4().hex[:6]}"}).json()["id"]
    sent = client.post(f"/v1/collections/{collection}/files", files=[("files", ("notes.txt", b"Harbour notes."))])
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 30
    while (document := client.get(f"/v1/collections/{collection}/documents/notes").json())["status"] == "pending":
        assert time.monotonic() < deadline, f"still pending: {document}"
        time.sleep(0.1)
    assert document["status"] == "failed", document
    assert document["error"] == "notes.txt: the file could not be parsed (OSError: [Errno 28] No space left on device)"

    from agentsearch.pipeline.platform.tables.collections import DocumentFileRow

    with client.app.state.services.db.session() as s:
        assert s.query(DocumentFileRow).count() == 0
