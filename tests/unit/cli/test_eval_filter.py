"""``agentsearch eval``'s ``--filter``: a filter as the search override, JSON ``null`` as no filter at all."""

from __future__ import annotations

from agentsearch.cli.eval import filter_option


def test_a_filter_is_sent_as_the_searchs_filter():
    assert filter_option('{"eq": {"key": "region", "value": "emea"}}') == {
        "filter": {"eq": {"key": "region", "value": "emea"}}}


def test_json_null_is_no_filter_as_without_the_option():
    assert filter_option("null") == filter_option(None) == {}
