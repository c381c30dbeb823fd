"""A parsed file as a stored document (``agentsearch.pipeline.ingestion.files.file_document``), its chunks along its
parts (``chunk_parts``, ``index_documents``), and the windows of a long file
(``agentsearch.pipeline.ingestion.file_parse``)."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.ingestion.chunking import ChunkingConfig, chunk_parts
from agentsearch.pipeline.ingestion.documents_in import IngestError
from agentsearch.pipeline.ingestion.file_parse import FIRST_WINDOW_PAGES, _merged, _window_pages
from agentsearch.pipeline.ingestion.files import file_document
from agentsearch.pipeline.ingestion.indexing import index_documents
from agentsearch.pipeline.parsing import ParsedFile, Part
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer


def _embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0] for t in texts]


def test_parts_are_joined_with_their_offsets_and_unreadable_characters_are_left_out_and_counted():
    parsed = ParsedFile(title="Report\x00", parts=[Part("Revenue rose.", {"page": 1}), Part("  ", {"page": 2}),
                                                   Part("Costs f\x00ell \ufffe.", {"page": 3})], pages=3,
                        notes=["page 2 was read by OCR"])
    document = file_document(parsed, "report.pdf", "pdf")
    assert document.text == "Revenue rose.\n\nCosts fell ."
    assert [(document.text[p["start"]:p["end"]], p["location"]) for p in document.parts] == [
        ("Revenue rose.", {"page": 1}), ("Costs fell .", {"page": 3})]
    assert document.notes == ["page 2 was read by OCR", "2 characters that could not be read were left out"]
    assert document.title == "Report" and document.metadata == {"source": "report.pdf", "format": "pdf", "pages": 3}


def test_a_file_with_no_text_is_refused_naming_it_and_saying_what_the_reading_noted():
    with pytest.raises(IngestError, match=r"^scan\.png: no text could be read from the file "
                                         r"\(blank page; 1 character that could not be read was left out\)$"):
        file_document(ParsedFile(title=None, parts=[Part("\x00 ", {"page": 1})], notes=["blank page"]), "scan.png",
                      "image")


def test_chunks_never_run_across_pages_or_sections_but_rows_of_one_sheet_are_packed():
    text_parts = [("First page.", {"page": 1}), ("Second page.", {"page": 2}),
                  ("Region: North; Revenue: 4", {"sheet": "Q4", "row": 2}),
                  ("Region: South; Revenue: 5", {"sheet": "Q4", "row": 3}),
                  ("Region: East; Revenue: 6", {"sheet": "Q1", "row": 2})]
    text, parts = "", []
    for piece, location in text_parts:
        text += ("\n\n" if text else "")
        parts.append({"start": len(text), "end": len(text) + len(piece), "location": location})
        text += piece
    assert chunk_parts(text, parts, max_chars=1000) == [
        ("First page.", {"page": 1}), ("Second page.", {"page": 2}),
        ("Region: North; Revenue: 4\nRegion: South; Revenue: 5", {"sheet": "Q4", "rows": [2, 3]}),
        ("Region: East; Revenue: 6", {"sheet": "Q1", "row": 2})]
    # Rows pack up to the chunk size; a sheet's rows past it start a chunk of their own.
    assert [loc for _, loc in chunk_parts(text, parts, max_chars=30)][2:4] == [{"sheet": "Q4", "row": 2},
                                                                               {"sheet": "Q4", "row": 3}]
    assert chunk_parts("One. Two.", None) == [("One. Two.", {})]


def test_indexed_chunks_carry_their_location_and_heading_and_a_changed_document_has_new_chunk_ids():
    parts = [{"start": 0, "end": 23, "location": {"section": "Results > Revenue"}}]
    embedded: list[str] = []

    def embed(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return _embed(texts)

    config = ChunkingConfig(sentence_vectors=False)
    (chunk,) = index_documents([("q4", "Q4", "Revenue rose 12% in Q4.", {})], embed, KeywordAnalyzer(), config,
                               {"q4": parts})
    assert chunk.metadata["location"] == {"section": "Results > Revenue"}
    assert embedded == ["Q4 > Results > Revenue. Revenue rose 12% in Q4."]  # the heading travels with the text
    assert "revenu" in chunk.keywords and "result" in chunk.keywords
    (same,) = index_documents([("q4", "Q4", "Revenue rose 12% in Q4.", {})], _embed, KeywordAnalyzer(), config,
                              {"q4": parts})
    (changed,) = index_documents([("q4", "Q4", "Revenue rose 13% in Q4.", {})], _embed, KeywordAnalyzer(), config,
                                 {"q4": parts})
    assert same.id == chunk.id and changed.id != chunk.id and changed.id.startswith("q4#")


def test_a_long_file_is_read_in_windows_sized_by_the_speed_of_the_first():
    assert _window_pages({}, 10.0) == FIRST_WINDOW_PAGES
    first = _merged({}, ParsedFile(title="Scan", parts=[Part("a", {"page": 1}), Part("b", {"page": 2})], pages=9),
                    range(0, 2), seconds=4.0)
    assert first["next"] == 2 and first["pages_per_s"] == 0.5 and first["title"] == "Scan"
    assert _window_pages(first, 10.0) == 5
    second = _merged(first, ParsedFile(title=None, parts=[Part("c", {"page": 3})], pages=9, notes=["p. 3 by OCR"]),
                     range(2, 7), seconds=10.0)
    assert second["next"] == 7 and [p["text"] for p in second["parts"]] == ["a", "b", "c"]
    assert second["notes"] == ["p. 3 by OCR"] and second["title"] == "Scan"
    cut_short = _merged(second, ParsedFile(title=None, parts=[], pages=9, read_until=8), range(7, 12), seconds=10.0)
    assert cut_short["next"] == 8 and cut_short["pages_per_s"] == 0.1  # the reader stopped at its time budget
    last = _merged(cut_short, ParsedFile(title=None, parts=[], pages=9), range(8, 12), seconds=1.0)
    assert last["next"] == 9  # a window past the end stops at the last page
