"""A ZIP's end record read from its last bytes (``agentsearch.pipeline.parsing.zip_end``), and a file format told
without reading a ZIP's directory (``agentsearch.pipeline.parsing.sniff``): what the API and the workers read of an
untrusted Office file."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from agentsearch.pipeline.parsing import ParseLimits, ParseRefused, read_file, sniff
from agentsearch.pipeline.parsing.zip_end import MAX_DIRECTORY_BYTES, MAX_PARTS, EndRecord, check_directory, end_record
from tests.support.zips import huge_directory, with_end, word_file

CANNOT_OPEN = r"^a damaged ZIP file \(Office files are ZIP files\): it cannot be opened"


def _archive(names: list[str], comment: bytes = b"") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            archive.writestr(name, f"<part>{name}</part>")
        archive.comment = comment
    return out.getvalue()


def _word_file() -> bytes:
    return word_file("The Halesowen budget was approved.")


def _directory_of(data: bytes) -> tuple[int, int]:
    """What ``zipfile`` itself finds: the entries and where the directory starts."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return len(archive.infolist()), archive.start_dir


@pytest.mark.parametrize("comment", [b"", b"a comment of the archive " * 100], ids=["no-comment", "comment"])
def test_the_end_record_gives_the_entries_and_the_directory_as_zipfile_reads_them(comment):
    data = _archive([f"word/part{i}.xml" for i in range(37)], comment)
    end = end_record(io.BytesIO(data))
    assert (end.entries, end.directory_offset) == _directory_of(data) == (37, end.directory_offset)
    assert end.directory_bytes == len(data) - end.directory_offset - 22 - len(comment) and not end.zip64


def test_a_zip64_end_record_is_read_for_its_counts(monkeypatch):
    # zipfile writes the ZIP64 records past 65,535 entries; a lower limit writes them for five.
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
    data = _archive([f"xl/sheet{i}.xml" for i in range(5)])
    monkeypatch.undo()
    assert b"PK\x06\x06" in data[-120:]
    end = end_record(io.BytesIO(data))
    assert end.zip64 and (end.entries, end.directory_offset) == _directory_of(data) == (5, end.directory_offset)


def test_a_real_zip64_directory_of_a_hundred_thousand_entries_is_counted_and_refused():
    data = huge_directory(_word_file(), 100_000)
    end = end_record(io.BytesIO(data))
    assert end.zip64 and end.entries == 100_000 + _directory_of(_word_file())[0]
    with pytest.raises(ParseRefused, match=rf"^the file lists {end.entries:,} parts, more than the {MAX_PARTS:,}"):
        check_directory(end)


@pytest.mark.parametrize("cut", [lambda d: d[: len(d) // 2], lambda d: d[:-10], lambda d: d[:-1]],
                         ids=["half", "last-10-bytes", "last-byte"])
def test_a_zip_cut_short_has_no_end_record(cut):
    with pytest.raises(ParseRefused, match=CANNOT_OPEN):
        end_record(io.BytesIO(cut(_word_file())))


@pytest.mark.parametrize("data", [b"", b"PK", b"Hello, plain text.\n" * 50, bytes(70_000)],
                         ids=["empty", "two-bytes", "text", "zeros"])
def test_a_file_that_is_no_zip_has_no_end_record(data):
    with pytest.raises(ParseRefused, match=CANNOT_OPEN):
        end_record(io.BytesIO(data))


def test_a_garbled_end_record_is_refused_naming_what_is_wrong():
    word = _word_file()
    with pytest.raises(ParseRefused, match=r"its directory lies past its end"):
        end_record(io.BytesIO(with_end(word, offset=len(word))))
    with pytest.raises(ParseRefused, match=r"its ZIP64 record is damaged"):
        garbled = bytearray(with_end(word, zip64=True))
        garbled[-98:-94] = b"XXXX"  # the ZIP64 record's signature
        end_record(io.BytesIO(bytes(garbled)))
    split = bytearray(word)
    split[-18:-16] = b"\x01\x00"  # the disk the directory starts on
    with pytest.raises(ParseRefused, match=r"^a ZIP file split across several files"):
        end_record(io.BytesIO(bytes(split)))


def test_the_directory_is_held_to_what_office_writes():
    check_directory(EndRecord(entries=MAX_PARTS, directory_bytes=MAX_DIRECTORY_BYTES, directory_offset=0, zip64=False))
    with pytest.raises(ParseRefused, match=r"the file lists 10,001 parts, more than the 10,000"):
        check_directory(EndRecord(MAX_PARTS + 1, 100, 0, False))
    # A record may state few entries over a large directory: zipfile reads the directory by its size.
    with pytest.raises(ParseRefused, match=r"directory of parts takes 10,240,001 bytes"):
        check_directory(EndRecord(3, MAX_DIRECTORY_BYTES + 1, 0, False))


# --- What sniffing reads --------------------------------------------------------------------------------------------


def _forbid_zipfile(monkeypatch) -> None:
    """``zipfile.ZipFile`` unusable in this process from now on: a reading of a directory here fails the test."""
    def opened(*args, **kwargs):
        raise AssertionError("zipfile.ZipFile opened outside the parsing child")
    monkeypatch.setattr(zipfile, "ZipFile", opened)


def test_a_word_file_is_sniffed_as_office_without_its_directory_being_read(monkeypatch):
    word = _word_file()
    _forbid_zipfile(monkeypatch)
    assert sniff(word, "report.pdf") == "office"


def test_a_directory_of_a_million_entries_is_refused_from_its_end_record_at_once(monkeypatch):
    data = huge_directory(_word_file(), 1_000_000)
    assert len(data) > 45_000_000
    _forbid_zipfile(monkeypatch)
    began = time.process_time()
    with pytest.raises(ParseRefused, match=r"^the file lists 1,000,0\d\d parts, more than the 10,000"):
        sniff(data, "big.docx")
    assert time.process_time() - began < 0.5  # reading the directory took 10 s of CPU


def test_an_end_record_claiming_few_entries_over_a_huge_directory_is_refused_by_its_size(monkeypatch):
    lying = huge_directory(_word_file(), 300_000, stated=12)
    _forbid_zipfile(monkeypatch)
    with pytest.raises(ParseRefused, match=r"directory of parts takes 14,\d{3},\d{3} bytes"):
        sniff(lying, "big.docx")


def test_opendocument_is_refused_from_its_first_entry_and_a_plain_zip_is_left_to_the_child(monkeypatch):
    odt, plain = io.BytesIO(), io.BytesIO()
    with zipfile.ZipFile(odt, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("content.xml", "<office:document-content/>")
    with zipfile.ZipFile(plain, "w") as archive:
        archive.writestr("holiday/photo.txt", "not an Office part")
    _forbid_zipfile(monkeypatch)
    with pytest.raises(ParseRefused, match=r"^an OpenDocument file"):
        sniff(odt.getvalue(), "minutes.odt")
    assert sniff(plain.getvalue(), "photos.zip") == "office"


def test_the_parsing_child_tells_the_office_kind_and_refuses_a_huge_directory_before_reading_it(tmp_path):
    word, big = tmp_path / "report.pdf", tmp_path / "big.docx"
    word.write_bytes(_word_file())
    big.write_bytes(huge_directory(_word_file(), 1_000_000))
    parsed = read_file(word, "office", ParseLimits())
    assert parsed.format == "docx" and parsed.text == "The Halesowen budget was approved."
    began = time.monotonic()
    for file_format in ("office", "docx"):
        with pytest.raises(ParseRefused, match=r"^the file lists 1,000,0\d\d parts, more than the 10,000"):
            read_file(big, file_format, ParseLimits())
    assert time.monotonic() - began < 10  # the child's start, twice; not the directory's 10 s of CPU each
