"""Files uploaded as documents (``POST /v1/collections/{id}/files``), parsed by the workers, found with their
location; a collection's documents read back; a folder kept in step by ``agentsearch sync``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from email.message import EmailMessage
from urllib.parse import quote

from docx import Document as WordDocument
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from tests.integration.conftest import BIN, SAMPLE_CORPUS, own_collection, search

WINDOWS_EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + b"\x00" * 48


def _wait_settled(http, collection_id: str, timeout_s: float = 120) -> dict:
    """The collection's document counts once none is pending."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
        if counts["pending"] == 0:
            return counts
        assert time.monotonic() < deadline, counts
        time.sleep(0.3)


def _pdf(path, pages: list[str]) -> bytes:
    pdf = canvas.Canvas(str(path), pagesize=A4)
    for text in pages:
        pdf.drawString(72, 750, text)
        pdf.showPage()
    pdf.save()
    return path.read_bytes()


def _docx(path, sections: dict[str, str]) -> bytes:
    document = WordDocument()
    for heading, text in sections.items():
        document.add_heading(heading, level=1)
        document.add_paragraph(text)
    document.save(str(path))
    return path.read_bytes()


def test_each_file_of_an_upload_is_taken_or_refused_on_its_own(stack):
    with stack.http() as http:
        collection_id = own_collection(http, "uploads")
        url = f"/v1/collections/{collection_id}/files"

        bad_lines = '{"id": "a", "title": "A", "text": "fine"}\n{"id": "b", "title": "B"}\n'
        answer = http.post(url, files=[("files", ("notes.md", b"# Meeting notes\n\nThe **grid** was stable.\n")),
                                       ("files", ("bad.jsonl", bad_lines.encode())),
                                       ("files", ("tool.exe", WINDOWS_EXE)),
                                       ("files", ("empty.txt", b""))])
        assert answer.status_code == 202, answer.text
        body = answer.json()
        assert body["accepted"] == 1 and body["documents"] == [{"id": "notes", "file": "notes.md",
                                                                "format": "markdown"}]
        refused = {r["file"]: r["error"] for r in body["rejected"]}
        assert refused["bad.jsonl"].startswith("line 2") and "binary" in refused["tool.exe"]
        assert refused["empty.txt"] == "the file is empty"

        only_bad = http.post(url, files=[("files", ("tool.exe", WINDOWS_EXE)), ("files", ("empty.txt", b""))])
        assert only_bad.status_code == 422
        assert [d["loc"] for d in only_bad.json()["detail"]] == [["body", "files", 0], ["body", "files", 1]]
        assert only_bad.json()["detail"][1]["msg"] == "empty.txt: the file is empty"

        # Sniffed, so read as a PDF by a worker, which refuses it: the document says why, and holds nothing.
        broken = http.post(url, files=[("files", ("broken.pdf", b"%PDF-1.4 not really"))])
        assert broken.status_code == 202 and broken.json()["documents"][0]["format"] == "pdf"
        jsonl = http.post(url, files=[("files", ("corpus.jsonl", SAMPLE_CORPUS.read_bytes()))])
        assert jsonl.status_code == 202, jsonl.text
        corpus_size = sum(1 for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip())
        assert _wait_settled(http, collection_id) == {"pending": 0, "indexed": corpus_size + 1, "failed": 1}

        failed = http.get(f"/v1/collections/{collection_id}/documents/broken").json()
        assert failed["status"] == "failed" and failed["error"].startswith("broken.pdf: ")
        assert failed["text"] == "" and failed["parts"] == []
        note = http.get(f"/v1/collections/{collection_id}/documents/notes").json()
        assert note["title"] == "Meeting notes" and "The grid was stable." in note["text"]
        assert note["metadata"]["format"] == "markdown" and len(note["content_hash"]) == 64
        listed = http.get(f"/v1/collections/{collection_id}/documents", params={"status": "failed"}).json()
        assert [d["id"] for d in listed["items"]] == ["broken"]
        assert http.get(f"/v1/collections/{collection_id}/documents/missing").status_code == 404

    # Another user's collection: its documents, agents and uploads answer 404, as a missing one does.
    with stack.http(stack.create_user("upload-stranger")) as stranger:
        assert stranger.get(f"/v1/collections/{collection_id}/documents").status_code == 404
        assert stranger.get(f"/v1/collections/{collection_id}/documents/notes").status_code == 404
        assert stranger.get(f"/v1/collections/{collection_id}/agents").status_code == 404
        assert stranger.post(url, files=[("files", ("x.txt", b"hello"))]).status_code == 404


def test_sources_and_citations_say_on_which_page_or_under_which_heading(stack, tmp_path):
    pdf = _pdf(tmp_path / "annual.pdf", ["The cooperative was founded by nine farmers.",
                                         "Members share one grain silo near the river.",
                                         "Revenue reached 412 million euros in 2025."])
    word = _docx(tmp_path / "policy.docx", {"Travel": "Staff book second class on trains under four hours.",
                                            "Expenses": "Receipts are filed within thirty days of the trip."})
    with stack.http() as http:
        collection_id = own_collection(http, "located")
        answer = http.post(f"/v1/collections/{collection_id}/files",
                           files=[("files", ("annual.pdf", pdf)), ("files", ("policy.docx", word))])
        assert answer.status_code == 202, answer.text
        assert _wait_settled(http, collection_id) == {"pending": 0, "indexed": 2, "failed": 0}
        annual = http.get(f"/v1/collections/{collection_id}/documents/annual").json()
        assert annual["pages_done"] == annual["pages_total"] == 3
        assert [p["location"] for p in annual["parts"]] == [{"page": 1}, {"page": 2}, {"page": 3}]

        job = search(http, collection_id, "How much revenue in 2025?")
        response = job["response"]
        assert response["sources"][0]["document_id"] == "annual"
        assert response["sources"][0]["location"] == {"page": 3}
        cited = [c for c in response["citations"] if c["document_id"] == "annual"]
        assert cited and all(c["location"] == {"page": 3} for c in cited)

        job = search(http, collection_id, "When must receipts be filed?")
        top = job["response"]["sources"][0]
        assert top["document_id"] == "policy" and top["location"] == {"section": "Expenses"}


def test_a_document_sent_again_is_found_whole_in_one_version_while_it_is_replaced(stack, tmp_path):
    old = [f"Gate {n} opens at seven in the morning." for n in range(1, 4)]
    new = [f"Gate {n} opens at nine in the evening." for n in range(1, 4)]
    with stack.http() as http:
        collection_id = own_collection(http, "replaced")
        url = f"/v1/collections/{collection_id}/files"
        assert http.post(url, files=[("files", ("gates.pdf", _pdf(tmp_path / "old.pdf", old)))]).status_code == 202
        _wait_settled(http, collection_id)
        assert http.post(url, files=[("files", ("gates.pdf", _pdf(tmp_path / "new.pdf", new)))]).status_code == 202
        while True:
            pending = http.get(f"/v1/collections/{collection_id}").json()["documents"]["pending"]
            sources = search(http, collection_id, "When does gate 2 open?", use_cache=False)["response"]["sources"]
            # Never missing while it is replaced, and every passage found is of one version.
            assert [s["document_id"] for s in sources] == ["gates"], sources
            if not pending:
                break
        final = http.get(f"/v1/collections/{collection_id}/documents/gates").json()
        assert "nine in the evening" in final["text"] and "seven" not in final["text"]
        answer = search(http, collection_id, "When does gate 2 open?", use_cache=False)["response"]["answer"]
        assert "nine in the evening" in answer


def test_sync_adds_changes_and_removes_and_a_second_run_reads_nothing(stack, tmp_path):
    folder = tmp_path / "shared"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\nStaff take twenty-eight days of annual leave.\n")
    (folder / "canteen.txt").write_text("The canteen serves lunch from noon.\n")
    (folder / ".hidden.txt").write_text("Not part of the folder's documents.\n")
    env = {**stack.env, "AGENTSEARCH_API_KEY": stack.api_key}

    def sync() -> str:
        done = subprocess.run([str(BIN / "agentsearch"), "sync", str(folder), "--collection", "shared"], env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "2 added, 0 changed, 0 deleted, 0 unchanged, 0 failed" in sync()
    assert "0 added, 0 changed, 0 deleted, 2 unchanged, 0 failed" in sync()
    with stack.http() as http:
        (collection,) = http.get("/v1/collections", params={"name": "shared"}).json()
        ids = {d["id"]: d for d in http.get(f"/v1/collections/{collection['id']}/documents").json()["items"]}
        assert set(ids) == {"hr/leave", "canteen"}

        (folder / "hr" / "leave.md").write_text("# Leave\n\nStaff take thirty days of annual leave.\n")
        (folder / "canteen.txt").unlink()
        assert "0 added, 1 changed, 1 deleted, 0 unchanged, 0 failed" in sync()
        listed = http.get(f"/v1/collections/{collection['id']}/documents").json()["items"]
        assert [d["id"] for d in listed] == ["hr/leave"]
        leave = http.get(f"/v1/collections/{collection['id']}/documents/hr/leave").json()
        assert "thirty days" in leave["text"]
        answer = search(http, collection["id"], "How many days of annual leave?")["response"]
        assert "thirty" in answer["answer"] and [s["document_id"] for s in answer["sources"]] == ["hr/leave"]


def test_sync_skips_links_out_of_the_folder_and_fifos_and_syncs_the_rest_past_a_bad_file(stack, tmp_path):
    """A link to a file outside the folder (or to a hidden one), a FIFO, a name that is not UTF-8 and a file the
    service refuses: each is named with what happened to it, the other files are synced, nothing waits on the FIFO,
    and the exit status says a file failed."""
    folder = tmp_path / "synced"
    folder.mkdir()
    (folder / "canteen.txt").write_text("The canteen serves lunch from noon.\n")
    (tmp_path / "secret.txt").write_text("The vault code is ZEBRA4471QUARTZ.\n")
    (tmp_path / ".hidden-secret.txt").write_text("The alarm code is OTTER9902BASALT.\n")
    (folder / "passwd.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "alarm.txt").symlink_to(tmp_path / ".hidden-secret.txt")
    os.mkfifo(folder / "pipe.txt")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as latin1:
        latin1.write("The café opens at seven.\n".encode())
    (folder / "empty.txt").write_bytes(b"")
    env = {**stack.env, "AGENTSEARCH_API_KEY": stack.api_key}

    def sync() -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "agentsearch"), "sync", str(folder), "--collection", "synced"], env=env,
                              capture_output=True, text=True, timeout=180)

    done = sync()
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "3 added, 0 changed, 0 deleted, 0 unchanged, 1 failed, 3 skipped" in done.stdout, done.stdout
    said = done.stderr
    assert f"skipped: {folder / 'passwd.txt'}: a link to {tmp_path / 'secret.txt'}, outside the folder" in said, said
    assert f"skipped: {folder / 'alarm.txt'}: a link to" in said
    assert f"skipped: {folder / 'pipe.txt'}: not a regular file but a FIFO" in said
    assert f"renamed: {folder}/caf\\xe9.txt: its name is not UTF-8; sent as document 'caf\ufffd'" in said, said
    assert f"failed: {folder / 'empty.txt'}: " in said
    with stack.http() as http:
        (collection,) = http.get("/v1/collections", params={"name": "synced"}).json()
        listed = http.get(f"/v1/collections/{collection['id']}/documents").json()["items"]
        assert {d["id"]: d["status"] for d in listed} == {"canteen": "indexed", "caf\ufffd": "indexed"}, listed
        texts = [http.get(f"/v1/collections/{collection['id']}/documents/{quote(d['id'], safe='')}").json()["text"]
                 for d in listed]
        assert "seven" in "".join(texts) and not any("ZEBRA" in t or "OTTER" in t for t in texts)
        for secret in ("ZEBRA4471QUARTZ", "OTTER9902BASALT"):
            found = search(http, collection["id"], f"What is the code {secret}?", use_cache=False)["response"]
            assert secret not in json.dumps([found["answer"], found["sources"]]), found
    again = sync()  # the renamed file keeps its document; the refused one is tried again
    assert "1 added, 0 changed, 0 deleted, 2 unchanged, 1 failed, 3 skipped" in again.stdout, again.stdout


def test_an_email_s_attachments_become_documents_of_their_own(stack):
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "ops@example.org", "team@example.org", "Harbour crane inspection"
    mail.set_content("The inspection report is attached.")
    mail.add_attachment(b"Crane 4 needs a new brake before March.", maintype="text", subtype="plain",
                        filename="findings.txt")
    with stack.http() as http:
        collection_id = own_collection(http, "mail")
        answer = http.post(f"/v1/collections/{collection_id}/files",
                           files=[("files", ("inspection.eml", mail.as_bytes()))])
        assert answer.status_code == 202 and answer.json()["documents"][0]["format"] == "eml", answer.text
        deadline = time.monotonic() + 120
        while len(listed := http.get(f"/v1/collections/{collection_id}/documents").json()["items"]) < 2 \
                or any(d["status"] == "pending" for d in listed):
            assert time.monotonic() < deadline, listed
            time.sleep(0.3)
        by_id = {d["id"]: d for d in listed}
        assert by_id["inspection"]["title"] == "Harbour crane inspection"
        assert by_id["inspection/findings"]["status"] == "indexed"
        assert by_id["inspection/findings"]["metadata"]["attached_to"] == "inspection"
        top = search(http, collection_id, "Which crane needs a new brake?")["response"]["sources"][0]
        assert top["document_id"] == "inspection/findings"
