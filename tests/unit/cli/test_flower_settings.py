"""AGENTSEARCH_FLOWER_BASIC_AUTH: what `agentsearch flower` accepts, and how it refuses before starting anything."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from agentsearch.cli import main
from agentsearch.pipeline.platform.settings import Settings, get_settings

BROKER = "redis://127.0.0.1:1/0"  # never contacted: every case here stops before Flower starts


@pytest.mark.parametrize("value, pairs", [
    ("admin:s3cret", ["admin:s3cret"]),
    ("admin:pa:ss, ops:other", ["admin:pa:ss", "ops:other"]),  # a colon may sit in a password
])
def test_credentials_are_user_password_pairs(value, pairs):
    assert Settings(flower_basic_auth=value).flower_credentials() == pairs


@pytest.mark.parametrize("value", [None, "", "admin", "admin:", ":s3cret", "admin:s3cret,"])
def test_incomplete_credentials_are_refused_without_echoing_them(value):
    with pytest.raises(ValueError) as raised:
        Settings(flower_basic_auth=value).flower_credentials()
    assert "AGENTSEARCH_FLOWER_BASIC_AUTH" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_the_secret_stays_out_of_the_settings_repr():
    assert "s3cret" not in repr(Settings(flower_basic_auth="admin:s3cret"))


@pytest.mark.parametrize("env, message", [
    ({}, "AGENTSEARCH_BROKER_URL"),                                       # embedded: no broker to watch
    ({"AGENTSEARCH_BROKER_URL": BROKER}, "AGENTSEARCH_FLOWER_BASIC_AUTH"),
    ({"AGENTSEARCH_BROKER_URL": BROKER, "AGENTSEARCH_FLOWER_BASIC_AUTH": "admin"}, "not user:password"),
])
def test_flower_command_refuses_to_start(monkeypatch, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(main, ["flower", "--port", "5599"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2
    assert message in result.output
