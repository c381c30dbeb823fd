"""Long scans do not hold the ingest workers: each is read a window of pages at a time, each window at the back of
the queue (``agentsearch.worker.parsing``), so another user's small file sent meanwhile is indexed before the scans are
done.

The suite's stack has two worker processes for the ingest queue and windows of about two seconds of work
(``PARSE_WINDOW_S``): two scans keep both processes busy, and the small file competes with them.
"""

from __future__ import annotations

import time

from tests.integration.conftest import own_collection
from tests.support.scans import save_scanned_pdf, scan_page

SCAN_PAGES = 5


def _scan(path, topic: str) -> bytes:
    pages = [scan_page([f"Page {n} of the {topic} report.", f"Valve {n} was replaced in spring."], seed=n)
             for n in range(1, SCAN_PAGES + 1)]
    return save_scanned_pdf(pages, path).read_bytes()


def test_another_user_s_small_file_is_indexed_while_long_scans_are_still_being_read(stack, tmp_path):
    scans = {"inspection": _scan(tmp_path / "a.pdf", "inspection"), "survey": _scan(tmp_path / "b.pdf", "survey")}
    with stack.http() as scanner, stack.http(stack.create_user("note-taker")) as other:
        collection = own_collection(scanner, "scans")
        notes = own_collection(other, "notes")
        assert scanner.post(f"/v1/collections/{collection}/files",
                            files=[("files", (f"{name}.pdf", data)) for name, data in scans.items()]).status_code == 202

        def scan_rows() -> list[dict]:
            return scanner.get(f"/v1/collections/{collection}/documents").json()["items"]

        # Sent once both scans are being read, so that both worker processes are busy with them.
        deadline = time.monotonic() + 90
        while not all(row["pages_done"] for row in scan_rows()):
            assert time.monotonic() < deadline, "the scans' reading never started"
            time.sleep(0.1)
        assert other.post(f"/v1/collections/{notes}/files",
                          files=[("files", ("memo.txt", b"The canteen closes at three."))]).status_code == 202
        while other.get(f"/v1/collections/{notes}/documents/memo").json()["status"] == "pending":
            assert time.monotonic() < deadline, "the small file waited for ever"
            time.sleep(0.1)
        rows = scan_rows()
        assert other.get(f"/v1/collections/{notes}/documents/memo").json()["status"] == "indexed"
        assert any(row["status"] == "pending" and row["pages_done"] < SCAN_PAGES for row in rows), rows
        assert all(row["pages_total"] == SCAN_PAGES for row in rows)

        while scanner.get(f"/v1/collections/{collection}").json()["documents"]["pending"]:
            assert time.monotonic() < deadline + 60, "the scans were never finished"
            time.sleep(0.3)
        for name in scans:
            done = scanner.get(f"/v1/collections/{collection}/documents/{name}").json()
            assert done["status"] == "indexed", done["error"]
            assert [p["location"] for p in done["parts"]] == [{"page": n} for n in range(1, SCAN_PAGES + 1)]
            assert "Valve 4 was replaced" in done["text"] and f"of the {name} report" in done["text"]
