"""A source's mapping of places (folders, paths, key prefixes) to document groups."""

import pytest

from agentsearch.pipeline.sources.kinds.permissions import GroupMapping, Unmapped


def test_the_longest_mapped_place_holding_an_item_gives_its_groups():
    mapping = GroupMapping({"INBOX": "staff", "INBOX/HR": ["hr", "board", "hr"], "/": "everyone"})
    assert mapping.groups_of("INBOX/HR/2026") == ["board", "hr"]
    assert mapping.groups_of("INBOX/HR") == ["board", "hr"]
    assert mapping.groups_of("INBOX/HRM") == ["staff"]  # whole names only
    assert mapping.groups_of("Archive") == ["everyone"]


def test_an_unmapped_item_is_unrestricted_unless_a_mapping_is_required():
    assert GroupMapping({"HR": "hr"}).groups_of("INBOX") is None
    with pytest.raises(Unmapped, match="INBOX: no group mapping holds it"):
        GroupMapping({"HR": "hr"}, required=True).groups_of("INBOX")
    assert GroupMapping({"reports/": "finance"}, required=True).groups_of("/reports/q1.pdf") == ["finance"]
