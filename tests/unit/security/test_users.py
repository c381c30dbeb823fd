"""Users and API keys: keys are stored only as digests, work until revoked, and names are checked."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.tables.users import ApiKeyRow
from agentsearch.pipeline.security.users import SHOWN_CHARS, UserError, UserStore, digest
from tests.support.databases import migrated_sqlite


@pytest.fixture
def store(tmp_path) -> UserStore:
    url = f"sqlite:///{tmp_path / 'users.db'}"
    migrated_sqlite(url)
    return UserStore(Database(url))


def test_a_new_users_key_authenticates_it_and_only_its_digest_is_stored(store):
    user_id, key = store.create("alice")
    assert store.authenticate(key) == user_id
    with store.db.session() as s:
        rows = s.scalars(select(ApiKeyRow)).all()
    assert [r.digest for r in rows] == [digest(key)]
    assert all(key not in (r.digest, r.prefix, r.label) for r in rows)
    assert rows[0].prefix == key[:SHOWN_CHARS]


def test_unknown_malformed_and_revoked_keys_are_refused(store):
    _, key = store.create("bob")
    assert store.authenticate(key + "x") is None
    assert store.authenticate("not-a-key") is None
    assert store.revoke(key[:SHOWN_CHARS]) == 1
    assert store.authenticate(key) is None
    assert store.revoke(key[:SHOWN_CHARS]) == 0  # already revoked


def test_a_second_key_works_beside_the_first_and_outlives_its_revocation(store):
    user_id, first = store.create("carol")
    second = store.issue_key("carol", label="ci")
    assert first != second
    store.revoke(first[:SHOWN_CHARS])
    assert store.authenticate(second) == user_id
    listed = {u.name: u for u in store.list()}
    assert [k.label for k in listed["carol"].keys] == ["initial", "ci"]
    assert [k.revoked_at is None for k in listed["carol"].keys] == [False, True]


@pytest.mark.parametrize("name", ["", " alice", "a/b", "x" * 101, "-dash"])
def test_malformed_names_are_refused_with_the_rule(store, name):
    with pytest.raises(UserError, match="invalid user name"):
        store.create(name)


def test_a_taken_name_is_refused_and_nothing_is_added(store):
    store.create("dave")
    with pytest.raises(UserError, match="already exists"):
        store.create("dave")
    assert [u.name for u in store.list()].count("dave") == 1
    with store.db.session() as s:
        assert len(s.scalars(select(ApiKeyRow)).all()) == 1


def test_revoking_needs_the_shown_prefix_and_keys_are_issued_only_to_existing_users(store):
    with pytest.raises(UserError, match="first 11 characters"):
        store.revoke("as_")
    with pytest.raises(UserError, match="no user named"):
        store.issue_key("nobody")
