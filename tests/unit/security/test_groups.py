"""A team's document groups (src/agentsearch/pipeline/security/groups.py) on SQLite: an admin or the operator puts
members in groups and takes them out, each change in the audit trail; every other caller is refused saying why; a member
taken out of the team leaves its groups, and added back holds none; a provider's groups claim maps to the team's group
of that name; the operator's ``agentsearch teams group-*`` commands."""

from __future__ import annotations

import uuid

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from agentsearch.cli import main
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from agentsearch.pipeline.platform.tables.teams import TeamGroupMemberRow
from agentsearch.pipeline.platform.tables.users import UserIdentityRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.document_access import held_tokens, token
from agentsearch.pipeline.security.groups import groups_of_team, remove_group_member, set_group_member
from agentsearch.pipeline.security.teams import create_team, remove_member, set_role
from agentsearch.pipeline.security.users import UserStore


@pytest.fixture
def team(migrated_db) -> dict:
    """A team of an admin, an editor and a viewer; an outsider; their ids by role, the team's id under ``id``."""
    store = UserStore(migrated_db)
    people = {role: store.create(f"{role}-{uuid.uuid4().hex[:6]}")[0] for role in ("admin", "editor", "viewer",
                                                                                    "outsider")}
    with migrated_db.session() as s:
        team_id = create_team(s, "legal", people["admin"]).id
        set_role(s, team_id, people["admin"], people["editor"], "editor")
        set_role(s, team_id, people["admin"], people["viewer"], "viewer")
    return {"id": team_id, **people}


def _refused(db, call, *args) -> Refusal:
    with pytest.raises(Refusal) as refused, db.session() as s:
        call(s, *args)
    return refused.value


def test_an_admin_puts_members_in_groups_and_takes_them_out_each_change_recorded(migrated_db, team):
    t, admin = team["id"], team["admin"]
    with migrated_db.session() as s:
        put = set_group_member(s, t, admin, "hr", team["viewer"])
        set_group_member(s, t, admin, "hr", team["editor"])
        set_group_member(s, t, None, "board", team["viewer"])  # the operator
        again = set_group_member(s, t, admin, "hr", team["viewer"])  # already in: nothing changes
    assert (put.group, put.user_id) == (again.group, again.user_id) == ("hr", team["viewer"])
    with migrated_db.session() as s:
        groups = groups_of_team(s, t)
        assert [(g.name, sorted(m.user_id for m in g.members)) for g in groups] == [
            ("board", [team["viewer"]]), ("hr", sorted([team["viewer"], team["editor"]]))]
        assert held_tokens(s, team["viewer"]) == {token(t, "hr"), token(t, "board")}
    with migrated_db.session() as s:
        taken = remove_group_member(s, t, admin, "board", team["viewer"])
    assert taken.group == "board"
    with migrated_db.session() as s:
        assert [g.name for g in groups_of_team(s, t)] == ["hr"]  # gone with its last member
        assert held_tokens(s, team["viewer"]) == {token(t, "hr")}
        recorded = [(e.action, e.actor_id, e.target_id, e.details["group"], e.key_prefix) for e in s.scalars(
            select(AuditEventRow).where(AuditEventRow.action.startswith("team.group.")).order_by(AuditEventRow.id))]
    assert recorded == [("team.group.member.set", admin, str(team["viewer"]), "hr", ""),
                        ("team.group.member.set", admin, str(team["editor"]), "hr", ""),
                        ("team.group.member.set", None, str(team["viewer"]), "board", "operator"),
                        ("team.group.member.remove", admin, str(team["viewer"]), "board", "")]


# Who asks, for which group and user, and the answer (status, words): one database for them all, each refusal
# leaving it untouched.
REFUSALS = [
    ("viewer", "hr", "viewer", 403, "needs the role 'admin' in team 'legal'; your role there is 'viewer'"),
    ("editor", "hr", "viewer", 403, "needs the role 'admin' in team 'legal'; your role there is 'editor'"),
    ("outsider", "hr", "outsider", 404, "not found"),
    ("admin", "hr", "outsider", 409, "add it to the team first"),
    ("admin", "hr", "nobody-by-that-name", 404, "user nobody-by-that-name not found"),
    ("admin", "h r", "viewer", 422, "a group name is"),
    ("admin", "-hr", "viewer", 422, "a group name is"),
]


def test_a_change_beyond_the_rules_is_refused_saying_why(migrated_db, team):
    for actor, group, member, status, words in REFUSALS:
        refused = _refused(migrated_db, set_group_member, team["id"], team[actor], group, team.get(member, member))
        assert (refused.status, words in refused.detail) == (status, True), (actor, group, member, refused.detail)
    with migrated_db.session() as s:
        assert s.scalars(select(TeamGroupMemberRow)).all() == []
        assert s.scalars(select(AuditEventRow).where(AuditEventRow.action.startswith("team.group."))).all() == []


def test_taking_out_is_the_admins_too_and_a_user_not_in_the_group_is_404(migrated_db, team):
    t = team["id"]
    with migrated_db.session() as s:
        set_group_member(s, t, team["admin"], "hr", team["viewer"])
    leaving = _refused(migrated_db, remove_group_member, t, team["viewer"], "hr", team["viewer"])
    assert leaving.status == 403 and "needs the role 'admin'" in leaving.detail
    absent = _refused(migrated_db, remove_group_member, t, team["admin"], "hr", team["editor"])
    assert absent.status == 404 and "is not in group 'hr' of team 'legal'" in absent.detail
    unknown = _refused(migrated_db, remove_group_member, uuid.uuid4(), None, "hr", team["viewer"])
    assert unknown.status == 404 and "team" in unknown.detail


def test_a_member_taken_out_of_the_team_leaves_its_groups_and_added_back_holds_none(migrated_db, team):
    t, admin, viewer = team["id"], team["admin"], team["viewer"]
    with migrated_db.session() as s:
        set_group_member(s, t, admin, "hr", viewer)
        set_group_member(s, t, admin, "board", viewer)
        remove_member(s, t, admin, viewer)
    with migrated_db.session() as s:
        removed = s.scalars(select(AuditEventRow).where(AuditEventRow.action == "team.member.remove")).one()
        assert removed.details["groups"] == ["board", "hr"]
        set_role(s, t, admin, viewer, "viewer")
    with migrated_db.session() as s:
        assert held_tokens(s, viewer) == frozenset() and groups_of_team(s, t) == []


def test_a_providers_groups_claim_maps_to_the_teams_group_of_that_name(migrated_db, team):
    t, admin = team["id"], team["admin"]
    with migrated_db.session() as s:
        s.add(UserIdentityRow(issuer="https://idp.example", subject="v", user_id=team["viewer"], groups=["hr", "x"]))
        s.flush()
        assert held_tokens(s, team["viewer"]) == frozenset()  # the team has no group hr yet
        set_group_member(s, t, admin, "hr", team["editor"])
        assert held_tokens(s, team["viewer"]) == {token(t, "hr")}
        # Only a member of the team: the claim gives nothing in a team the user is not in.
        s.add(UserIdentityRow(issuer="https://idp.example", subject="o", user_id=team["outsider"], groups=["hr"]))
        s.flush()
        assert held_tokens(s, team["outsider"]) == frozenset()


def test_the_operators_group_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        for name in ("ann", "ben", "cat"):
            assert runner.invoke(main, ["users", "create", name]).exit_code == 0

        def run(*args: str, code: int = 0) -> str:  # fail() exits 2
            done = runner.invoke(main, ["teams", *args])
            assert done.exit_code == code, done.output
            return done.output

        run("create", "legal", "--admin", "ann")
        run("add-member", "legal", "ben")
        assert "has no document groups" in run("groups", "legal")
        assert "ben is in group hr of team legal" in run("group-add", "legal", "hr", "ben")
        assert "ann is in group hr of team legal" in run("group-add", "legal", "hr", "ann")
        assert "add it to the team first" in run("group-add", "legal", "hr", "cat", code=2)
        assert "a group name is" in run("group-add", "legal", "h r", "ben", code=2)
        assert "no team named 'hr'" in run("group-add", "hr", "hr", "ben", code=2)
        assert run("groups", "legal").split() == ["hr", "ann,", "ben"]
        assert "group hr: ann, ben" in run("show", "legal")
        assert "removed ben from group hr of team legal" in run("group-remove", "legal", "hr", "ben")
        assert "is not in group 'hr'" in run("group-remove", "legal", "hr", "ben", code=2)
        assert run("groups", "legal").split() == ["hr", "ann"]
    finally:
        get_settings.cache_clear()
