"""A mail source's runs on PostgreSQL against a real Dovecot started here (``tests/support/mail_server.py``), mail
delivered, expunged and moved between runs; and its folders mapped to a team collection's document groups."""

from __future__ import annotations

import imaplib
import uuid

import pytest
from sqlalchemy import select

from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentFileRow, DocumentGroupRow
from agentsearch.pipeline.platform.tables.sources import SourceRow
from agentsearch.pipeline.platform.tables.teams import TeamRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.sources.store import update_source
from tests.integration.test_sources_runs import Runner, database, settings  # noqa: F401  (database: a fixture)
from tests.support.mail_server import Dovecot, message

pytestmark = pytest.mark.integration


class TeamRunner(Runner):
    """A runner whose collection is a team's, so that a source may give its documents groups."""

    def __init__(self, db, config) -> None:
        super().__init__(db, config)
        with db.session() as s:
            team = TeamRow(name=f"t-{uuid.uuid4().hex[:8]}", created_by=DEFAULT_USER_ID)
            s.add(team)
            s.flush()
            s.get(CollectionRow, self.collection_id).team_id = team.id

    def group_names(self) -> dict[str, list[str]]:
        """Each document's groups, by its source URL."""
        documents = self.documents()
        by_id = {row.id: url for url, row in documents.items()}
        with self.db.session() as s:
            found: dict[str, list[str]] = {url: [] for url in documents}
            for row in s.scalars(select(DocumentGroupRow).where(DocumentGroupRow.document_id.in_(list(by_id)))):
                found[by_id[row.document_id]].append(row.name)
        return {url: sorted(names) for url, names in found.items()}

    def groups(self) -> dict[str, list[str]]:
        """Each message's groups, by its folder and UID (``HR;UIDVALIDITY=.../;UID=1`` -> ``HR/1``)."""
        return {_place(url): names for url, names in self.group_names().items()}

    def reconfigure(self, **changes) -> None:
        with self.db.session() as s:
            update_source(s, self.settings, s.get(SourceRow, self.source_id), {"config": changes})


def _place(url: str) -> str:
    folder = url.split("/", 3)[3].split(";")[0]
    return f"{folder}/{url.rsplit('UID=', 1)[1]}"


def test_a_mailbox_is_read_by_uid_and_its_folders_give_the_documents_groups(database, tmp_path):  # noqa: F811
    with Dovecot({"ana": "s3cret"}) as imap:
        imap.create("ana", "HR")
        imap.deliver("ana", "INBOX", message("Silo rota", "The silo opens at six.", {"rota.txt": b"Mon: Ana"}))
        second = imap.deliver("ana", "INBOX", message("Harvest", "The harvest was early."))
        imap.deliver("ana", "HR", message("Salaries", "Salaries rise in May."))
        runner = TeamRunner(database, settings())
        runner.add("mail", {"host": "127.0.0.1", "port": imap.port, "username": "ana", "password": "s3cret",
                            "folders": ["INBOX", "HR"], "tls": "none", "groups": {"HR": "hr"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}, first
        assert runner.groups() == {"INBOX/1": [], "INBOX/2": [], "HR/1": ["hr"]}
        documents = runner.documents()
        assert all(url.startswith(f"imap://ana@127.0.0.1:{imap.port}/") for url in documents)
        with database.session() as s:
            # Each message goes to the parsing queue as an uploaded .eml does: its attachments become documents there.
            files = s.scalars(select(DocumentFileRow).where(
                DocumentFileRow.document_id.in_([d.id for d in documents.values()]))).all()
            assert sorted(f.format for f in files) == ["eml", "eml", "eml"]
            assert any(b"Mon: Ana" in f.data or b"TW9uOiBBbmE" in f.data for f in files)
        assert len(runner.sent("parse_document")) == 3

        # Nothing arrived or left: nothing is listed or read, nothing stored or sent.
        second_run = runner.run()
        assert second_run["documents"] == {"new": 0, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}
        assert runner.tasks == []

        # A new message, one expunged, one moved into HR: the new read, the gone removed, the moved one read anew
        # under its new folder's groups.
        imap.deliver("ana", "INBOX", message("Tides", "Tidal power in the estuary."))
        imap.expunge("ana", "INBOX", second)
        imap.move("ana", "INBOX", 1, "HR")
        third = runner.run()
        assert third["documents"] == {"new": 2, "changed": 0, "unchanged": 1, "removed": 2, "failed": 0}, third
        assert runner.groups() == {"INBOX/3": [], "HR/1": ["hr"], "HR/2": ["hr"]}
        (removal,) = runner.sent("delete_documents")
        assert len(removal[1][1]) == 2

        # The admin maps INBOX too: its message takes the group at the next run, its content not read again; an
        # indexed document is indexed again, so its chunks carry the group.
        inbox = runner.documents()[next(u for u in runner.documents() if "/INBOX;" in u)]
        with database.session() as s:
            s.get(type(inbox), inbox.id).status = "indexed"
        runner.reconfigure(groups={"HR": "hr", "INBOX": ["staff", "board"]})
        regrouped = runner.run()
        assert regrouped["documents"] == {"new": 0, "changed": 1, "unchanged": 2, "removed": 0, "failed": 0}
        assert runner.groups()["INBOX/3"] == ["board", "staff"]
        assert runner.sent("parse_document") == [] and len(runner.sent("ingest_documents")) == 1
        assert runner.documents()[inbox.metadata_["source_url"]].metadata_["_access_groups"][0].endswith(":board")

        # Groups required, INBOX no longer mapped: its message cannot be given groups, so it is not indexed (its
        # document removed), with the reason in the run.
        runner.reconfigure(groups={"HR": "hr"}, groups_required=True)
        closed = runner.run()
        assert closed["documents"] == {"new": 0, "changed": 0, "unchanged": 2, "removed": 1, "failed": 1}, closed
        assert "INBOX: no group mapping holds it" in closed["errors"][0]
        assert set(runner.groups()) == {"HR/1", "HR/2"}

        # A message past the size limit is counted failed and never fetched; the rest are read.
        imap.deliver("ana", "HR", message("Scan", "x" * 300_000))
        imap.deliver("ana", "HR", message("Minutes", "The board met on Monday."))
        sized = runner.run()
        assert sized["documents"]["new"] == 1 and sized["documents"]["failed"] == 2, sized
        assert any("over the limit of 200000" in e for e in sized["errors"]), sized["errors"]

        # Wrong credentials: the run fails with the server's words, and nothing is removed.
        runner.reconfigure(password="wrong")
        refused = runner.run()
        assert refused["status"] == "failed" and "imap login refused" in refused["errors"][0], refused
        assert "AUTHENTICATIONFAILED" in refused["errors"][0] and refused["documents"]["removed"] == 0
        assert len(runner.documents()) == 3 and runner.tasks == []
        runner.reconfigure(password="s3cret")

    # The server gone: the run fails, and every document stays.
    gone = runner.run()
    assert gone["status"] == "failed" and gone["errors"][0].startswith("imap 127.0.0.1"), gone
    assert gone["documents"]["removed"] == 0 and len(runner.documents()) == 3


def test_a_folder_s_acl_gives_its_messages_groups_and_an_acl_change_reaches_them_without_reading_them(
        database, monkeypatch):  # noqa: F811
    with Dovecot({"ana": "s3cret"}, acl=True) as imap:
        for folder in ("HR", "Team"):
            imap.create("ana", folder)
        imap.setacl("ana", "HR", "$hr", "lrs")  # the hr group may read HR
        imap.setacl("ana", "Team", "anyone", "lr")  # every account may read Team
        for folder in ("INBOX", "HR", "Team"):
            imap.deliver("ana", folder, message(f"{folder} news", f"News of the {folder} folder."))
        runner = TeamRunner(database, settings())
        runner.add("mail", {"host": "127.0.0.1", "port": imap.port, "username": "ana", "password": "s3cret",
                            "folders": ["INBOX", "HR", "Team"], "tls": "none", "acl": True,
                            "groups": {"group:hr": "hr", "group:board": "board"}})

        # INBOX is ana's alone (its ACL: ana), and no mapping names her: not indexed, with the reason.
        first = runner.run()
        assert first["documents"] == {"new": 2, "changed": 0, "unchanged": 0, "removed": 0, "failed": 1}, first
        assert runner.groups() == {"HR/1": ["hr"], "Team/1": []}
        assert first["errors"] == ["INBOX: restricted in the source to user:ana, which no group mapping names: not "
                                   "indexed"]

        # HR shared with the board instead of hr; a negative read right on Team; ana mapped: each reaches its
        # messages' groups at the next run, no message read again.
        imap.setacl("ana", "HR", "$hr", "")
        imap.setacl("ana", "HR", "$board", "lr")
        imap.setacl("ana", "Team", "-guest", "r")
        runner.reconfigure(groups={"group:hr": "hr", "group:board": "board", "user:ana": "ana"})
        second = runner.run()
        assert second["documents"] == {"new": 1, "changed": 1, "unchanged": 0, "removed": 1, "failed": 1}, second
        assert runner.groups() == {"INBOX/1": ["ana"], "HR/1": ["ana", "board"]}
        assert "Team: its permissions could not be read (a negative read right for guest" in second["errors"][0]
        assert len(runner.sent("parse_document")) == 1  # INBOX's message, read for the first time

        # Unchanged, the ACLs are still asked (a folder's ACL changes without its UIDNEXT): a GETACL a folder, and
        # no message fetched.
        sent: list[str] = []
        original = imaplib.IMAP4._command

        def counted(imap, name, *args):
            sent.append(f"{name} {args[0]}" if name == "UID" else name)
            return original(imap, name, *args)

        monkeypatch.setattr(imaplib.IMAP4, "_command", counted)
        third = runner.run()
        monkeypatch.undo()
        assert third["documents"] == {"new": 0, "changed": 0, "unchanged": 2, "removed": 0, "failed": 1}, third
        assert sent.count("GETACL") == 3 and sent.count("EXAMINE") == 3 and "UID FETCH" not in sent, sent
        assert runner.tasks == []

    # A server without the ACL extension: no folder's readers can be known, so none is indexed.
    with Dovecot({"ana": "s3cret"}) as plain:
        plain.deliver("ana", "INBOX", message("Hello", "Plain."))
        runner.reconfigure(port=plain.port, folders=["INBOX"])
        closed = runner.run()
        assert closed["status"] == "succeeded" and closed["documents"]["failed"] == 1, closed
        assert "the server offers no ACL extension (RFC 4314)" in closed["errors"][0]
        assert closed["documents"]["new"] == 0


def test_a_mail_source_is_refused_an_internal_host_and_groups_on_a_personal_collection(database, tmp_path):  # noqa: F811
    from agentsearch.pipeline.refusal import Refusal

    with Dovecot({"ana": "s3cret"}) as imap:
        guarded = Runner(database, settings(egress_allow=[]))
        guarded.add("mail", {"host": "127.0.0.1", "port": imap.port, "username": "ana", "password": "s3cret",
                             "tls": "none"})
        refused = guarded.run()
        assert refused["status"] == "failed" and "egress refused: 127.0.0.1 is a loopback address" in \
            refused["errors"][0], refused
        personal = Runner(database, settings())
        with pytest.raises(Refusal) as raised:
            personal.add("mail", {"host": "127.0.0.1", "username": "ana", "password": "x", "groups": {"HR": "hr"}})
        assert raised.value.status == 422 and "personal" in str(raised.value.detail)


@pytest.mark.parametrize(("mode", "said"), [("drop", "the connection was lost"),
                                            ("huge", "over the limit of 200000")])
def test_a_server_dropping_the_connection_mid_message_or_announcing_a_huge_one_fails_the_run_and_removes_nothing(
        database, mode, said):  # noqa: F811
    from tests.support.mail_server import HostileImap

    with HostileImap(mode) as imap:
        runner = Runner(database, settings())
        runner.add("mail", {"host": "127.0.0.1", "port": imap.port, "username": "ana", "password": "x",
                            "tls": "none"})
        with database.session() as s:  # what an earlier run had read of the folder
            row = s.get(SourceRow, runner.source_id)
            row.state = {"items": {"INBOX/7/2": {"version": "2", "document_id": "kept", "url": "u"}}, "cursor": {}}
        failed = runner.run()
        assert failed["status"] == "failed" and said in failed["errors"][0], failed
        assert failed["documents"]["removed"] == 0 and runner.tasks == []
        with database.session() as s:
            assert "INBOX/7/2" in s.get(SourceRow, runner.source_id).state["items"]


def test_the_mail_bench_reads_every_message_once_and_an_unchanged_mailbox_with_four_commands():
    from agentsearch.bench import sources_mail
    from agentsearch.devstack.dovecot import installed

    if installed() is None:
        pytest.skip("dovecot is not installed (make services installs dovecot-imapd)")
    figures = sources_mail.measure(20, 1, sqlite=False)
    # A FETCH per message, and CAPABILITY, LOGIN, EXAMINE, UID SEARCH, the sizes, LOGOUT.
    assert figures["first_run_tasks"] == 20 and figures["first_run_imap_commands"] == 20 + 6
    assert figures["unchanged_run_imap_commands_median"] == 4 and figures["unchanged_run_documents_stored"] == 0


def test_a_folder_named_outside_ascii_is_read_by_its_modified_utf7_name(database):  # noqa: F811
    with Dovecot({"ana": "s3cret"}) as imap:
        imap.create("ana", "Entw&APw-rfe")  # "Entwürfe", as IMAP spells it
        imap.deliver("ana", "Entw&APw-rfe", message("Draft", "A draft about the new silo."))
        runner = Runner(database, settings())
        runner.add("mail", {"host": "127.0.0.1", "port": imap.port, "username": "ana", "password": "s3cret",
                            "folders": ["Entwürfe"], "tls": "none"})
        done = runner.run()
        assert done["status"] == "succeeded" and done["documents"]["new"] == 1, done
        (url,) = runner.documents()
        assert url.split("/")[3].startswith("Entw%C3%BCrfe;UIDVALIDITY=")


@pytest.mark.parametrize("tls", ["ssl", "starttls"])
def test_a_mailbox_over_tls_is_read_only_when_the_server_s_certificate_is_trusted(database, tls):  # noqa: F811
    with Dovecot({"ana": "s3cret"}, tls=True) as imap:
        imap.deliver("ana", "INBOX", message("Silo", "The silo opens at six."))
        port = imap.tls_port if tls == "ssl" else imap.port
        config = {"host": "127.0.0.1", "port": port, "username": "ana", "password": "s3cret", "tls": tls}
        # A certificate no authority the system trusts signed: refused before the password is sent.
        untrusted = Runner(database, settings())
        untrusted.add("mail", config)
        refused = untrusted.run()
        assert refused["status"] == "failed" and "CERTIFICATE_VERIFY_FAILED" in refused["errors"][0], refused
        trusted = Runner(database, settings())
        trusted.add("mail", {**config, "ca_cert": imap.ca_pem})
        done = trusted.run()
        assert done["status"] == "succeeded" and done["documents"]["new"] == 1, done
