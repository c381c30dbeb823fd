"""A SaaS tool's own permissions (a place, restrictions, members) mapped to document groups, failing closed."""

import pytest

from agentsearch.pipeline.sources.kinds.access import Access, PrincipalMapping
from agentsearch.pipeline.sources.kinds.permissions import Unmapped

MAPPING = PrincipalMapping({"space:HR": "hr", "group:hr-team": ["hr", "board"], "group:finance": "finance",
                            "user:U1": "hr"})


def test_a_mapped_place_restricts_and_an_unmapped_one_does_not_unless_required():
    assert MAPPING.groups_of(Access(place={"space:HR"})) == ["hr"]
    assert MAPPING.groups_of(Access(place={"space:ENG"})) is None
    with pytest.raises(Unmapped, match="page 7: no group mapping holds space:ENG, and the source requires one"):
        PrincipalMapping(MAPPING.groups, required=True).groups_of(Access(place={"space:ENG"}), "page 7")


def test_every_restriction_must_be_met_and_one_no_mapping_names_is_not_indexed():
    # Any principal of one restriction may read (their union); each restriction must hold (their intersection).
    both = Access(place={"space:HR"}, restrictions=[{"group:hr-team", "user:U9"}, {"user:U1"}])
    assert MAPPING.groups_of(both) == ["hr"]
    assert MAPPING.groups_of(Access(restrictions=[{"group:hr-team", "group:finance"}])) == ["board", "finance", "hr"]
    with pytest.raises(Unmapped, match="restricted in the source to user:U9, which no group mapping names"):
        MAPPING.groups_of(Access(place={"space:ENG"}, restrictions=[{"user:U9"}]))
    with pytest.raises(Unmapped, match="have none in common"):
        MAPPING.groups_of(Access(place={"space:HR"}, restrictions=[{"group:finance"}]))


def test_permissions_that_could_not_be_read_are_not_indexed_whatever_the_mapping():
    with pytest.raises(Unmapped, match=r"could not be read \(HTTP 403\): not indexed"):
        MAPPING.groups_of(Access(place={"space:HR"}, unreadable="HTTP 403"))
