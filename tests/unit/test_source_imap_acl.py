"""An IMAP folder's access control list (RFC 4314) read as the principals a source's mapping names."""

import imaplib

import pytest

from agentsearch.pipeline.sources.kinds.access import PrincipalMapping
from agentsearch.pipeline.sources.kinds.imap_acl import AclUnreadable, access_of, folder_access, parse_acl
from agentsearch.pipeline.sources.kinds.permissions import Unmapped


def test_an_acl_answer_is_read_with_quoted_names_and_escapes():
    assert parse_acl(b'HR ana lrwstipekxacd $hr lrs "ann \\"the\\" smith" lr -carol r') == (
        "HR", [("ana", "lrwstipekxacd"), ("$hr", "lrs"), ('ann "the" smith', "lr"), ("-carol", "r")])
    assert parse_acl(b'"Team Notes" anyone lr') == ("Team Notes", [("anyone", "lr")])
    with pytest.raises(AclUnreadable, match="without its rights"):
        parse_acl(b"HR ana")
    with pytest.raises(AclUnreadable, match="not an ACL answer"):
        parse_acl(b"HR ana {5}")


def test_the_readers_become_one_restriction_and_only_read_rights_count():
    access = access_of([("ana", "lrwstipekxacd"), ("$hr", "lrs"), ("!$board", "lr"), ("owner", "lr"),
                        ("bob", "l"), ("-carol", "w")], login="dora")
    assert access.restrictions == [{"user:ana", "group:hr", "group:board", "user:dora"}]
    assert access.unreadable is None


def test_anyone_reading_leaves_no_restriction_and_a_negative_read_right_is_not_carried_over():
    assert access_of([("ana", "lr"), ("anyone", "lr")], "ana").restrictions == []
    assert access_of([("ana", "lr"), ("authenticated", "r")], "ana").restrictions == []
    assert access_of([("ana", "lr"), ("anyone", "l")], "ana").restrictions == [{"user:ana"}]
    denied = access_of([("$hr", "lr"), ("-carol", "lr")], "ana")
    assert "negative read right for carol" in (denied.unreadable or "")


def test_mapped_through_the_admin_s_mapping_unmapped_readers_fail_closed():
    mapping = PrincipalMapping({"group:hr": "hr", "user:ana": ["ana", "hr"]})
    assert mapping.groups_of(access_of([("ana", "lr"), ("$hr", "lr"), ("bob", "lr")], "ana")) == ["ana", "hr"]
    with pytest.raises(Unmapped, match="restricted in the source to user:bob, which no group mapping names"):
        mapping.groups_of(access_of([("bob", "lr")], "ana"), "Secret")


class _Server:
    """An IMAP connection's GETACL, answering as told."""

    def __init__(self, answer):
        self.answer = answer

    def getacl(self, folder):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_an_acl_not_offered_refused_or_unexpected_is_unreadable_with_the_server_s_words():
    assert folder_access(_Server(("OK", [b"HR ana lr"])), '"HR"', "ana", offered=True).restrictions == [{"user:ana"}]
    assert "offers no ACL extension" in folder_access(_Server(None), '"HR"', "ana", offered=False).unreadable
    refused = folder_access(_Server(("NO", [b"[NOPERM] Permission denied"])), '"HR"', "ana", offered=True)
    assert refused.unreadable == "GETACL refused: [NOPERM] Permission denied"
    bad = folder_access(_Server(imaplib.IMAP4.error("GETACL command error: BAD [b'Unknown command']")), '"HR"',
                        "ana", offered=True)
    assert bad.unreadable.startswith("GETACL refused: GETACL command error")
    two = folder_access(_Server(("OK", [b"HR ana lr", b"HR bob lr"])), '"HR"', "ana", offered=True)
    assert "2 ACLs" in two.unreadable
