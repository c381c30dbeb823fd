"""A Notion row's property values as its document's lines and metadata (``kinds.notion_properties``), including the
keys a search filter can name and the values left out."""

from __future__ import annotations

from agentsearch.pipeline.retrieval.filters import KEY_PATTERN
from agentsearch.pipeline.sources.kinds.notion_properties import properties


def test_names_become_filter_keys_that_never_take_the_projects_own_mark():
    lines, metadata = properties({
        "Due date": {"type": "date", "date": {"start": "2027-06-01", "end": None}},
        "2027 goal": {"type": "number", "number": 3},
        "_access_groups": {"type": "select", "select": {"name": "everyone"}},
        "Stage/Phase": {"type": "status", "status": {"name": "Doing"}},
    })
    assert metadata == {"due_date": "2027-06-01", "p_2027_goal": 3, "access_groups": "everyone",
                        "stage_phase": "Doing"}
    assert all(KEY_PATTERN.fullmatch(key) for key in metadata)
    assert lines == ["- **2027 goal**: 3", "- **Due date**: 2027-06-01", "- **Stage/Phase**: Doing",
                     "- **_access_groups**: everyone"]


def test_empty_values_and_self_changing_types_are_left_out_and_formulas_give_their_result():
    lines, metadata = properties({
        "Name": {"type": "title", "title": [{"plain_text": "Plan"}]},
        "Status": {"type": "select", "select": None},
        "Tags": {"type": "multi_select", "multi_select": []},
        "Edited": {"type": "last_edited_time", "last_edited_time": "2026-11-25T08:00:00.000Z"},
        "Related": {"type": "relation", "relation": [{"id": "x"}]},
        "Zero": {"type": "number", "number": 0},
        "Score": {"type": "formula", "formula": {"type": "number", "number": 7.5}},
        "Ends": {"type": "formula", "formula": {"type": "date", "date": {"start": "2027-01-01"}}},
    })
    assert metadata == {"zero": 0, "score": 7.5, "ends": "2027-01-01"}
    assert lines == ["- **Ends**: 2027-01-01", "- **Score**: 7.5", "- **Zero**: 0"]
