"""The checks a source's config makes of its URLs."""

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.sources.kinds.base import folder_url, http_url
from agentsearch.pipeline.sources.kinds.drive import DriveConfig
from agentsearch.pipeline.sources.kinds.google_drive import GoogleDriveConfig
from agentsearch.pipeline.sources.kinds.slack import SlackConfig


def test_a_folder_url_ends_with_one_slash_so_relative_names_resolve_inside_it():
    assert folder_url("https://cloud.example.org/dav/Handbook") == "https://cloud.example.org/dav/Handbook/"
    assert folder_url("https://cloud.example.org/dav/Handbook/") == "https://cloud.example.org/dav/Handbook/"
    assert http_url("https://cloud.example.org/dav/Handbook") == "https://cloud.example.org/dav/Handbook"
    for bad in ("ftp://cloud.example.org/dav/", "file:///etc/", "https:///no-host/", "cloud.example.org/dav"):
        with pytest.raises(ValueError, match="http:// or https:// URL with a host"):
            folder_url(bad)


def test_the_kinds_reading_a_folder_or_an_api_base_store_it_with_its_slash():
    assert DriveConfig(url="http://dav.test/files/ana").url == "http://dav.test/files/ana/"
    assert SlackConfig(token="xoxb-1", url="http://slack.test/api").url == "http://slack.test/api/"
    assert GoogleDriveConfig(token="t", url="http://google.test/drive/v3").url == "http://google.test/drive/v3/"
    with pytest.raises(ValidationError, match="http:// or https://"):
        DriveConfig(url="ftp://dav.test/files/ana")
