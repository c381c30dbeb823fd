"""GET /v1/source-kinds: every kind with its config's JSON schema, what the console's form for a new source is made
from; a credential is marked write-only so the form asks for it as a password and never shows it."""

from __future__ import annotations


def test_each_kind_gives_its_schema_and_marks_its_credentials_write_only(client):
    answer = client.get("/v1/source-kinds")
    assert answer.status_code == 200, answer.text
    kinds = {k["kind"]: k for k in answer.json()["items"]}
    assert {"web", "feed", "git", "mail", "drive", "objects"} <= set(kinds)
    feed = kinds["feed"]["schema"]
    assert feed["required"] == ["url"] and feed["properties"]["max_entries"]["default"] == 200
    assert kinds["feed"]["credentials"] == []
    assert kinds["objects"]["credentials"] == ["secret_key"] and kinds["web"]["credentials"] == ["password"]
    secret = next(p for p in kinds["web"]["schema"]["properties"]["password"]["anyOf"] if p.get("type") == "string")
    assert secret["format"] == "password" and secret["writeOnly"] is True


def test_the_kinds_need_a_key(client):
    from fastapi.testclient import TestClient

    # Not entered: the app is the running one, its lifespan already begun.
    assert TestClient(client.app).get("/v1/source-kinds").status_code == 401
