"""Document groups (src/agentsearch/pipeline/security/document_access.py) on SQLite: the tokens a user holds (given by
an admin, or by the identity provider's groups claim), the filter a job searches with and what it lets through, the
listing's narrowing, and a job read only by a holder of its groups while its sources stay visible."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.teams import TeamGroupMemberRow, TeamMemberRow, TeamRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID, UserIdentityRow, UserRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.retrieval.filters import MAX_DEPTH, MetadataFilter
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.document_access import (
    ACCESS_KEY,
    DocumentAccess,
    JobAccess,
    access_filter,
    document_groups,
    groups_for,
    groups_within,
    held_tokens,
    hidden_among,
    job_access,
    job_visible,
    restricted,
    set_document_groups,
    token,
    visible_documents,
)


@pytest.fixture
def team(migrated_db) -> dict:
    """A team with a shared collection, a member in group ``hr`` and one in none; and a personal collection."""
    with migrated_db.session() as s:
        hr, plain = UserRow(name="hr-member"), UserRow(name="plain-member")
        team = TeamRow(name="people", created_by=DEFAULT_USER_ID)
        s.add_all([hr, plain, team])
        s.flush()
        s.add_all([TeamMemberRow(team_id=team.id, user_id=u.id, role="viewer") for u in (hr, plain)])
        s.add(TeamGroupMemberRow(team_id=team.id, name="hr", user_id=hr.id))
        shared = CollectionRow(name="handbook", user_id=DEFAULT_USER_ID, team_id=team.id, embedding_model="m")
        personal = CollectionRow(name="mine", user_id=hr.id, embedding_model="m")
        s.add_all([shared, personal])
        s.flush()
        return {"team": team.id, "hr": hr.id, "plain": plain.id, "shared": shared.id, "personal": personal.id}


def _document(s, collection: CollectionRow, external_id: str, groups: list[str] | None) -> DocumentRow:
    row = DocumentRow(collection_id=collection.id, external_id=external_id, text="t", metadata_={"lang": "en"})
    s.add(row)
    s.flush()
    set_document_groups(s, row, collection, groups)
    return row


def test_a_user_holds_the_groups_an_admin_gave_it_and_those_its_provider_names(migrated_db, team):
    with migrated_db.session() as s:
        assert held_tokens(s, team["hr"]) == {token(team["team"], "hr")}
        assert held_tokens(s, team["plain"]) == frozenset()
        # The provider's groups claim names "hr": the team's group of that name, as the user is a member.
        s.add(UserIdentityRow(issuer="https://idp", subject="p-1", user_id=team["plain"], groups=["hr", "elsewhere"]))
        s.flush()
        assert held_tokens(s, team["plain"]) == {token(team["team"], "hr")}
        # A group no member was put in, named by a restricted document of the team, maps too; an unused name not.
        shared = s.get(CollectionRow, team["shared"])
        _document(s, shared, "minutes", ["board"])
        s.add(UserIdentityRow(issuer="https://idp", subject="p-2", user_id=team["hr"], groups=["board", "unused"]))
        s.flush()
        assert held_tokens(s, team["hr"]) == {token(team["team"], "hr"), token(team["team"], "board")}
        # Out of the team, a group given there counts no more.
        s.delete(s.get(TeamMemberRow, (team["team"], team["hr"])))
        s.flush()
        assert held_tokens(s, team["hr"]) == frozenset()


def test_the_filter_lets_through_unrestricted_chunks_and_those_sharing_a_token():
    hr, legal = "t1:hr", "t1:legal"
    anyone, holder = access_filter(set()), access_filter({hr})
    assert anyone.matches({}) and holder.matches({"lang": "en"})
    assert not anyone.matches({ACCESS_KEY: [hr]})
    assert holder.matches({ACCESS_KEY: [legal, hr]}) and not holder.matches({ACCESS_KEY: [legal]})
    # Milvus reads the same rule: the unrestricted side is a missing key, the other a shared list member.
    assert f'not exists metadata["{ACCESS_KEY}"]' in holder.expression()
    assert f'json_contains_any(metadata["{ACCESS_KEY}"], ["{hr}"])' in holder.expression()


def test_a_job_filter_is_joined_and_the_bounds_it_leaves_are_said():
    own = {"eq": {"key": "region", "value": "emea"}}
    joined = MetadataFilter.model_validate(restricted(own, {"t1:hr"}))
    assert joined.matches({"region": "emea"}) and not joined.matches({"region": "emea", ACCESS_KEY: ["t2:hr"]})
    assert not joined.matches({"region": "apac"})
    deep: dict = {"exists": {"key": "k"}}
    for _ in range(MAX_DEPTH - 1):
        deep = {"not": deep}
    with pytest.raises(Refusal) as refused:
        restricted(deep, {"t1:hr"})
    assert refused.value.errors[0]["loc"] == ("body", "filter") and "document groups" in refused.value.detail


def test_groups_are_for_team_collections_and_are_stored_as_rows_and_as_chunk_tokens(migrated_db, team):
    with migrated_db.session() as s:
        shared, personal = s.get(CollectionRow, team["shared"]), s.get(CollectionRow, team["personal"])
        with pytest.raises(Refusal) as refused:
            groups_for(personal, DocumentAccess(groups=["hr"]), ("body", "documents", 0, "access"))
        assert refused.value.errors[0]["loc"] == ("body", "documents", 0, "access")
        assert groups_for(shared, DocumentAccess(groups=["hr", "hr", "finance"]), ("x",)) == ["finance", "hr"]
        row = _document(s, shared, "salaries", ["hr"])
        assert row.metadata_ == {"lang": "en", ACCESS_KEY: [token(team["team"], "hr")]}
        assert document_groups(s, [row.id]) == {row.id: ["hr"]}
        set_document_groups(s, row, shared, None)  # sent again without access: every member finds it
        assert row.metadata_ == {"lang": "en"} and document_groups(s, [row.id]) == {}


def test_a_listing_holds_what_the_reader_finds_and_a_hidden_id_cannot_be_replaced(migrated_db, team):
    with migrated_db.session() as s:
        shared = s.get(CollectionRow, team["shared"])
        salaries, _ = _document(s, shared, "salaries", ["hr"]), _document(s, shared, "travel", None)

        def listed(user_id: uuid.UUID) -> list[str]:
            query = visible_documents(select(DocumentRow.external_id), shared, held_tokens(s, user_id))
            return sorted(s.scalars(query))

        assert listed(team["hr"]) == ["salaries", "travel"] and listed(team["plain"]) == ["travel"]
        assert hidden_among(s, [salaries], shared, held_tokens(s, team["plain"])) == ["salaries"]
        assert hidden_among(s, [salaries], shared, held_tokens(s, team["hr"])) == []


def test_a_job_is_read_by_holders_of_its_groups_while_its_sources_stay_visible(migrated_db, team):
    with migrated_db.session() as s:
        shared = s.get(CollectionRow, team["shared"])
        travel = _document(s, shared, "travel", None)
        hr = [token(team["team"], "hr")]
        # Nothing restricted yet: no filter to pay for; the groups are still the job's (its agents read as them).
        assert job_access(s, [team["shared"]], team["hr"]) == JobAccess(held=hr, searched=None)
        assert job_access(s, [team["personal"]], team["hr"]) == JobAccess(held=hr, searched=None)
        assert job_access(s, [team["personal"]], DEFAULT_USER_ID) is None  # a user of no team: as before teams
        _document(s, shared, "salaries", ["hr"])
        access = job_access(s, [team["shared"]], team["hr"])
        assert access == JobAccess(held=hr, searched=hr)
        assert access.applied(None) == access_filter(hr).as_json()
        searched = access.held
        job = JobRow(user_id=team["hr"], collection_id=team["shared"], query="q", status="succeeded",
                  access_groups=searched, response={"sources": [{"document_id": "travel"}]})
        plain_job = JobRow(user_id=team["plain"], collection_id=team["shared"], query="q", status="succeeded",
                        access_groups=[], response={"sources": [{"document_id": "travel"}]})
        s.add_all([job, plain_job])
        s.flush()
        assert Access(s, team["hr"]).sees_job(job) and not Access(s, team["plain"]).sees_job(job)
        assert Access(s, team["hr"]).sees_job(plain_job) and Access(s, team["plain"]).sees_job(plain_job)
        # The source moved into a group after the search: the member outside it reads the job no more.
        set_document_groups(s, travel, shared, ["hr"])
        assert not job_visible(s, plain_job, held_tokens(s, team["plain"]))
        assert job_visible(s, plain_job, held_tokens(s, team["hr"]))


def test_access_is_refused_where_it_enters_naming_the_field(client):
    personal = client.post("/v1/collections", json={"name": f"own-{uuid.uuid4().hex[:6]}"}).json()["id"]
    sent = client.post(f"/v1/collections/{personal}/documents",
                       json={"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "y",
                                                                       "access": {"groups": ["hr"]}}]})
    assert sent.status_code == 422 and sent.json()["detail"][0]["loc"] == ["body", "documents", 1, "access"]
    reserved = client.post(f"/v1/collections/{personal}/documents",
                           json={"documents": [{"id": "a", "text": "x", "metadata": {ACCESS_KEY: ["t:hr"]}}]})
    assert reserved.status_code == 422 and ACCESS_KEY in reserved.text
    for form, loc in (('{"groups": ["h r"]}', ["body", "access", "groups", 0]), ("not json", ["body", "access"]),
                      ('{"groups": ["hr"]}', ["body", "access"])):
        upload = client.post(f"/v1/collections/{personal}/files", files=[("files", ("a.txt", b"some text"))],
                             data={"access": form})
        assert upload.status_code == 422 and upload.json()["detail"][0]["loc"] == loc, upload.text
    # Nothing of a refused request is stored.
    assert client.get(f"/v1/collections/{personal}/documents").json()["total"] == 0


def test_the_command_line_names_a_bad_group(tmp_path):
    from click.testing import CliRunner

    from agentsearch.cli import main

    path = tmp_path / "a.txt"
    path.write_text("some text")
    refused = CliRunner().invoke(main, ["ingest", str(path), "--collection", "c", "--groups", "hr,bad name"])
    assert refused.exit_code != 0 and "--groups" in refused.output and "invalid group name 'bad name'" in refused.output


def test_a_job_listing_leaves_out_in_sql_the_jobs_of_groups_the_reader_lacks(migrated_db, team):
    with migrated_db.session() as s:
        for groups in (None, [], ["t:hr"], ["t:hr", "t:legal"]):
            s.add(JobRow(user_id=team["hr"], collection_id=team["personal"], query=str(groups), access_groups=groups))
        s.flush()

        def listed(tokens: set[str]) -> list[str]:
            query = select(JobRow.query).where(groups_within(JobRow.access_groups, tokens, s.bind.dialect.name))
            return sorted(s.scalars(query))

        assert listed(set()) == ["None", "[]"]
        assert listed({"t:hr"}) == ["None", "['t:hr']", "[]"]
        assert listed({"t:hr", "t:legal", "t:x"}) == ["None", "['t:hr', 't:legal']", "['t:hr']", "[]"]


def test_a_bad_document_id_for_an_uploaded_file_is_that_files_refusal(client):
    personal = client.post("/v1/collections", json={"name": f"ids-{uuid.uuid4().hex[:6]}"}).json()["id"]
    upload = client.post(f"/v1/collections/{personal}/files", data={"document_ids": ["  ", "fine"]},
                         files=[("files", ("a.txt", b"some text")), ("files", ("b.txt", b"more text"))])
    assert upload.status_code == 202, upload.text
    assert upload.json()["rejected"] == [{"file": "a.txt", "error": "the document id must be 1 to 400 characters of "
                                                                    "text"}]
    assert [d["id"] for d in upload.json()["documents"]] == ["fine"]
