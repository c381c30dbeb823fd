"""What ``agentsearch sync`` uploads and deletes (``cli.folder_sync``): a folder's files against a collection's
documents, by content hash."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from cli.folder_sync import file_digest, folder_files, plan_sync


def test_a_folder_s_files_are_documents_named_by_their_path_without_the_extension(tmp_path):
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "leave.md").write_text("# Leave")
    (tmp_path / "q4.pdf").write_bytes(b"%PDF-")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("hidden")
    (tmp_path / ".~lock.q4.pdf#").write_text("hidden")
    assert folder_files(tmp_path) == {"hr/leave": tmp_path / "hr" / "leave.md", "q4": tmp_path / "q4.pdf"}
    (tmp_path / "q4.docx").write_bytes(b"PK")
    with pytest.raises(click.ClickException, match="would both be document 'q4'"):
        folder_files(tmp_path)


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
