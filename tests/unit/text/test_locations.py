"""Where a passage stands in its file, in words (``agentsearch.pipeline.text.locations.describe_location``)."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.text.locations import describe_location

# The wording the PDF report, the email draft and the console (src/agentsearch/api/console/locations.js) share; the
# console's test (tests/integration/test_console_locations.py) checks its own function against these same cases.
CASES = [
    ({"page": 3}, "p. 3"),
    ({"page": 1}, "p. 1"),
    ({"slide": 2}, "slide 2"),
    ({"sheet": "Q4", "row": 7}, "Q4, row 7"),
    ({"sheet": "Q4", "rows": [7, 12]}, "Q4, rows 7\u201312"),
    ({"sheet": "Q4", "rows": [7, 7]}, "Q4, row 7"),
    ({"sheet": "Sales 2025", "row": 2}, "Sales 2025, row 2"),
    ({"row": 5}, "row 5"),
    ({"section": "Results > Revenue"}, "Results > Revenue"),
    ({"section": "Results"}, "Results"),
    (None, ""),
    ({}, ""),
]


@pytest.mark.parametrize(("location", "words"), CASES)
def test_each_kind_of_location_reads_as_a_reader_cites_it(location, words):
    assert describe_location(location) == words


def test_a_range_of_rows_is_written_with_an_en_dash():
    assert describe_location({"sheet": "Q4", "rows": [7, 12]}).split(", ")[1] == "rows 7–12"


@pytest.mark.parametrize("location", [
    {"page": None}, {"page": ""}, {"page": True}, {"page": [3]}, {"rows": [7]}, {"rows": "7-12"},
    {"section": 42}, {"sheet": None}, {"unknown": 1}, "p. 3", 3, [("page", 3)],
])
def test_what_is_not_a_location_of_a_known_kind_is_described_by_nothing(location):
    assert describe_location(location) == ""


def test_parts_of_more_than_one_kind_are_joined_page_first_section_last():
    assert describe_location({"section": "Summary", "page": 4}) == "p. 4, Summary"
    assert describe_location({"slide": 2, "section": "Notes"}) == "slide 2, Notes"


def test_text_is_kept_as_written_markup_included():
    # The caller escapes for its medium (reportlab's markup, HTML); the words themselves are never altered.
    assert describe_location({"section": "<b>Intro</b> & more"}) == "<b>Intro</b> & more"
    assert describe_location({"sheet": " Q4 ", "row": "7"}) == "Q4, row 7"
