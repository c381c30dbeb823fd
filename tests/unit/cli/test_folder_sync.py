"""What ``agentsearch sync`` uploads and deletes (``agentsearch.cli.folder_sync``): a folder's files against a
collection's documents, by content hash; which files are documents and which are left out
(``agentsearch.cli.folder_files``); and a file
read once, whatever it does on disk meanwhile."""

from __future__ import annotations

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest

from agentsearch.cli.client import ApiClient
from agentsearch.cli.folder_files import UnreadableFile, file_digest, folder_listing, read_file, shown
from agentsearch.cli.folder_sync import plan_sync


def files_of(folder: Path) -> dict[str, Path]:
    return {document_id: file.path for document_id, file in folder_listing(folder).files.items()}


def test_a_folder_s_files_are_documents_named_by_their_path_without_the_extension(tmp_path):
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "leave.md").write_text("# Leave")
    (tmp_path / "q4.pdf").write_bytes(b"%PDF-")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("hidden")
    (tmp_path / ".~lock.q4.pdf#").write_text("hidden")
    assert files_of(tmp_path) == {"hr/leave": tmp_path / "hr" / "leave.md", "q4": tmp_path / "q4.pdf"}
    (tmp_path / "q4.docx").write_bytes(b"PK")
    with pytest.raises(click.ClickException, match="would both be document 'q4'"):
        folder_listing(tmp_path)


def test_new_and_changed_files_are_uploaded_and_documents_of_removed_files_and_their_attachments_deleted(tmp_path):
    local = {"new": (Path("new.txt"), "n1"), "same": (Path("same.pdf"), "s1"), "edited": (Path("edited.md"), "e2"),
             "was-text": (Path("was-text.txt"), "w1")}
    remote = [{"id": "same", "content_hash": "s1"}, {"id": "edited", "content_hash": "e1"},
              {"id": "gone", "content_hash": "g1"}, {"id": "gone/invoice", "content_hash": "i1",
                                                     "metadata": {"attached_to": "gone"}},
              {"id": "sent-as-json", "content_hash": None}, {"id": "was-text", "content_hash": None}]
    plan = plan_sync(local, remote)
    assert plan.upload == [(Path("new.txt"), "new"), (Path("edited.md"), "edited"),
                           (Path("was-text.txt"), "was-text")]
    assert (plan.added, plan.changed, plan.unchanged) == (1, 2, 1)
    # Documents that never came from a file are not the folder's to delete.
    assert plan.delete == ["gone", "gone/invoice"]


def test_the_digest_is_the_sha256_of_the_bytes(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"abc")
    assert file_digest(tmp_path / "a.txt") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_links_out_of_the_folder_or_to_hidden_files_are_skipped_and_named_and_links_within_it_followed(tmp_path):
    folder = tmp_path / "shared"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave")
    (folder / ".private").mkdir()
    (folder / ".private" / "keys.txt").write_text("hidden")
    (tmp_path / "secret.txt").write_text("outside")
    (tmp_path / ".netrc").write_text("outside and hidden")
    (folder / "passwd.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "netrc.txt").symlink_to(tmp_path / ".netrc")
    (folder / "keys.txt").symlink_to(folder / ".private" / "keys.txt")
    (folder / "up.txt").symlink_to("../secret.txt")  # relative, resolved from the link's folder
    (folder / "gone.txt").symlink_to(folder / "nowhere.txt")
    (folder / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    (folder / "leave.md").symlink_to("hr/leave.md")
    listing = folder_listing(folder)
    assert {i: f.path for i, f in listing.files.items()} == {"hr/leave": folder / "hr" / "leave.md",
                                                              "leave": folder / "leave.md"}
    assert listing.files["leave"].source == (folder / "hr" / "leave.md").resolve()
    skipped = dict(listing.skipped)
    assert set(skipped) == {folder / n for n in ("passwd.txt", "netrc.txt", "keys.txt", "up.txt", "gone.txt",
                                                 "elsewhere")}, skipped
    assert "outside the folder" in skipped[folder / "passwd.txt"] and str(tmp_path / "secret.txt") in skipped[
        folder / "passwd.txt"]
    assert "outside the folder" in skipped[folder / "netrc.txt"] and "outside" in skipped[folder / "up.txt"]
    assert skipped[folder / "keys.txt"] == "a link to a hidden file (.private/keys.txt)"
    assert "leads nowhere" in skipped[folder / "gone.txt"]
    assert "outside the folder" in skipped[folder / "elsewhere"]


def test_a_fifo_and_a_socket_are_skipped_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")  # opening it for reading would wait for a writer that never comes
    (tmp_path / "pipe-link.txt").symlink_to("pipe.txt")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "app.sock"))
        (tmp_path / "zero").symlink_to("/dev/zero")
        (tmp_path / "notes.txt").write_text("notes")
        found: list = []
        walker = threading.Thread(target=lambda: found.append(folder_listing(tmp_path)), daemon=True)
        walker.start()
        walker.join(10)
    assert not walker.is_alive(), "the listing waited on the FIFO"
    (listing,) = found
    assert {i: f.path for i, f in listing.files.items()} == {"notes": tmp_path / "notes.txt"}
    skipped = dict(listing.skipped)
    assert skipped[tmp_path / "pipe.txt"] == skipped[tmp_path / "pipe-link.txt"] == "not a regular file but a FIFO"
    assert skipped[tmp_path / "app.sock"] == "not a regular file but a socket"
    assert "outside the folder" in skipped[tmp_path / "zero"]


def test_a_file_swapped_for_a_fifo_or_a_link_after_the_listing_is_refused_when_read_not_waited_on(tmp_path):
    (tmp_path / "notes.txt").write_text("notes")
    (tmp_path / "secret.txt").write_text("secret")
    listing = folder_listing(tmp_path)
    (tmp_path / "notes.txt").unlink()
    os.mkfifo(tmp_path / "notes.txt")
    with pytest.raises(UnreadableFile, match="no longer a regular file"):
        read_file(listing.files["notes"].source, 1000)
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "notes.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(UnreadableFile, match="cannot be opened"):
        file_digest(listing.files["notes"].source)


def test_a_name_that_is_not_utf8_is_sent_with_its_bad_bytes_replaced_and_said(tmp_path):
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY, 0o644))
    listing = folder_listing(tmp_path)
    (file,) = listing.files.values()
    assert list(listing.files) == ["caf\ufffd"] and file.name == "caf\ufffd.txt"
    assert listing.renamed == [(file.path, "caf\ufffd")]
    assert shown(file.path).endswith("caf\\xe9.txt")
    assert read_file(file.source, 10) == b""


def test_a_file_is_read_once_up_to_the_limit(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"x" * 11)
    assert read_file(tmp_path / "big.txt", 11) == b"x" * 11
    with pytest.raises(UnreadableFile, match="larger than an upload may be"):
        read_file(tmp_path / "big.txt", 10)


def test_a_file_that_grows_between_the_request_s_making_and_its_sending_is_sent_as_it_was_read(tmp_path):
    """httpx sets a file's Content-Length from its size when the request is made; a file that grows before its bytes
    are streamed would overrun it (h11's "Too much data for declared Content-Length")."""
    received: list[bytes] = []

    class Api(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps({"documents": [{"id": "log"}], "rejected": []}).encode()
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    log = tmp_path / "log.txt"
    log.write_text("first line\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = ApiClient(f"http://127.0.0.1:{server.server_port}", "key")

    def grow(request) -> None:
        """Runs once the request is made, before its body is sent: the file grows in between."""
        with log.open("a") as stream:
            stream.write("a line written meanwhile\n" * 100)

    client.http.event_hooks["request"] = [grow]
    try:
        answer = client.upload_files("c1", [(log, "log")])
    finally:
        client.close()
        server.shutdown()
    assert answer["rejected"] == []
    (body,) = received
    assert b"first line\n" in body and b"meanwhile" not in body
