"""A sender's file name made one the service keeps (``upload_name``) and one it writes (``bare_name``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsearch.pipeline.parsing import ParseRefused
from agentsearch.pipeline.parsing.file_names import MAX_NAME_BYTES, bare_name, upload_name


@pytest.mark.parametrize("sent, kept", [
    ("report.pdf", "report.pdf"),
    ("../x.txt", "x.txt"),
    ("../../etc/passwd.txt", "passwd.txt"),
    ("..\\..\\Windows\\win.ini", "win.ini"),
    ("C:\\Users\\me\\notes.md", "notes.md"),
    ("a/b/.hidden", ".hidden"),
    ("..report.txt", "..report.txt"),
])
def test_an_upload_is_stored_under_its_last_segment(sent, kept):
    assert upload_name(sent) == kept


@pytest.mark.parametrize("sent, says", [
    ("..", "'..' names no file"),
    ("a/..", "'..' names no file"),
    ("..\\..", "'..' names no file"),
    (".", "'.' names no file"),
    ("a/.", "'.' names no file"),
    ("", "has no name"),
    ("folder/", "has no name"),
    ("minutes\x00.txt", "NUL"),
    ("n" * 197 + ".txt", f"longer than {MAX_NAME_BYTES} bytes"),
])
def test_a_name_that_names_no_file_is_refused_saying_why(sent, says):
    with pytest.raises(ParseRefused, match=r"file name|file has no name") as refused:
        upload_name(sent)
    assert says in str(refused.value)


@pytest.mark.parametrize("name, safe", [
    ("..", "upload"),
    ("a/..", "upload"),
    (".", "upload"),
    ("", "upload"),
    ("../x.txt", "x.txt"),
    ("..\\x.txt", "x.txt"),
    (".bashrc", "bashrc"),
    ("minutes\x00.txt", "minutes.txt"),
    ("line\nbreak.csv", "linebreak.csv"),
    (" report.pdf ", "report.pdf"),
])
def test_a_bare_name_is_safe_to_join_to_a_folder(tmp_path, name, safe):
    assert bare_name(name, "upload") == safe
    path = tmp_path / bare_name(name, "upload")
    path.write_bytes(b"x")  # a file of the folder itself, never the folder or its parent
    assert path.parent == tmp_path and path.is_file()


def test_a_long_bare_name_is_cut_keeping_its_extension():
    name = bare_name("é" * 150 + ".xlsx", "upload")
    assert name.endswith("é.xlsx") and len(name.encode()) <= MAX_NAME_BYTES
    assert Path(name).suffix == ".xlsx"
