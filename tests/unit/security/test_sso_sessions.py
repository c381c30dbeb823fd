"""Console sessions and single sign-on identities on SQLite: sessions kept as digests, ended at once or by their
end; an identity is one user by issuer and subject, named from its claims."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.tables.users import ConsoleSessionRow, UserRow
from agentsearch.pipeline.security.identities import IdentityStore, groups_in, user_name
from agentsearch.pipeline.security.sessions import SessionStore, csrf_matches
from agentsearch.pipeline.security.users import digest
from tests.support.databases import migrated_sqlite


@pytest.fixture
def db(tmp_path) -> Database:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    migrated_sqlite(url)
    return Database(url)


def test_a_session_is_stored_as_its_digest_and_ends_at_once(db):
    issuer_user = IdentityStore(db).sign_in("https://id.example", {"sub": "1", "preferred_username": "ada"})
    sessions = SessionStore(db)
    token = sessions.open(issuer_user, ttl_s=600)
    assert sessions.user_of(token) == issuer_user
    with db.session() as s:
        assert s.scalars(select(ConsoleSessionRow.digest)).all() == [digest(token)]
    assert sessions.user_of(token + "x") is None
    assert sessions.end(token) and sessions.user_of(token) is None
    assert not sessions.end(token)


def test_a_session_past_its_end_opens_nothing_and_is_dropped_when_another_opens(db):
    user_id = IdentityStore(db).sign_in("https://id.example", {"sub": "2"})
    sessions = SessionStore(db)
    old = sessions.open(user_id, ttl_s=600)
    with db.session() as s:
        s.execute(update(ConsoleSessionRow).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert sessions.user_of(old) is None
    sessions.open(user_id, ttl_s=600)
    with db.session() as s:
        assert digest(old) not in s.scalars(select(ConsoleSessionRow.digest)).all()


def test_the_csrf_token_is_bound_to_its_session():
    token, other = "a" * 43, "b" * 43
    assert csrf_matches(token, SessionStore.csrf_token(token))
    assert not csrf_matches(token, SessionStore.csrf_token(other))
    assert not csrf_matches(token, None) and not csrf_matches(token, "")
    assert SessionStore.csrf_token(token) != digest(token)  # not derivable from what the table holds


def test_an_identity_is_one_user_by_issuer_and_subject_whatever_its_name_becomes(db):
    identities = IdentityStore(db)
    first = identities.sign_in("https://id.example", {"sub": "7", "preferred_username": "bob", "groups": ["hr"]},
                               groups_claim="groups")
    again = identities.sign_in("https://id.example", {"sub": "7", "preferred_username": "robert", "groups": []},
                               groups_claim="groups")
    assert again == first and identities.groups_of(first) == []
    # The same subject at another issuer is another person; the name taken gets a suffix.
    elsewhere = identities.sign_in("https://other.example", {"sub": "7", "preferred_username": "bob"})
    assert elsewhere != first
    with db.session() as s:
        names = dict(s.execute(select(UserRow.id, UserRow.name)).all())
    assert names[first] == "bob" and names[elsewhere].startswith("bob-")


def test_names_and_groups_are_read_from_the_claims():
    assert user_name({"sub": "x", "preferred_username": "Ada Lovelace"}) == "Ada-Lovelace"
    assert user_name({"sub": "x", "email": "ada@example.org"}) == "ada@example.org"
    assert user_name({"sub": "../"}) == "sso-user"
    assert groups_in({"groups": ["b", "a", "a", {"x": 1}]}, "groups") == ["a", "b"]
    assert groups_in({"groups": "staff"}, "groups") == ["staff"]
    assert groups_in({"groups": ["a"]}, None) is None
