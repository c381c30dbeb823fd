"""An e-mail's attachments on the real stack, held to what an upload of each as a file would be held to.

An editor outside a team's group ``hr`` sends an e-mail whose attachment would replace a document restricted to
``hr``: the attachment is refused with the upload routes' 409, named in the e-mail's notes, and the restricted
document keeps its text and groups (a viewer outside ``hr`` still gets 404, an ``hr`` member the original). A tree
of e-mails 20 wide and 2 deep (421 documents if every attachment were taken) becomes no more documents than the
sender's quota, nor than one upload may become (``AGENTSEARCH_MAX_DOCUMENTS_PER_UPLOAD``), with the reason in the
notes of the e-mails whose attachments were refused.
"""

from __future__ import annotations

import time
import uuid
from email.message import EmailMessage

import httpx
import pytest

from agentsearch.pipeline.platform.settings import Settings
from tests.integration.test_rate_limits import _user

pytestmark = pytest.mark.integration

SALARIES = "Salaries of the board for 2026: the chair is paid 412,000 and each member 188,000."
WIDE = 20  # attachments of each e-mail of the tree (an e-mail keeps at most 20: ParseLimits.max_attachments)


def _mail(subject: str, body: str, attachments: list[tuple[str, bytes]]) -> bytes:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "ops@example.org", "team@example.org", subject
    mail.set_content(body)
    for name, data in attachments:
        mail.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return mail.as_bytes()


def _tree() -> bytes:
    """An e-mail of WIDE e-mails of WIDE short notes each: 1 + 20 + 400 documents, were every one taken."""
    inner = [(f"round-{i}.eml", _mail(f"Round {i}", f"Round {i} of the harbour survey.",
                                      [(f"note-{j}.txt", f"Buoy {i}-{j} was checked.".encode()) for j in range(WIDE)]))
             for i in range(WIDE)]
    return _mail("Harbour survey", "Every round of the survey is attached.", inner)


def _settled(http: httpx.Client, collection_id: str, most: int, timeout_s: float = 300) -> list[dict]:
    """The collection's documents once none is pending; fails as soon as there are more than ``most``."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = http.get(f"/v1/collections/{collection_id}/documents", params={"limit": 1000}).json()
        assert listed["total"] <= most, f"{listed['total']} documents, more than {most}"
        if listed["items"] and not any(d["status"] == "pending" for d in listed["items"]):
            return listed["items"]
        assert time.monotonic() < deadline, [d for d in listed["items"] if d["status"] == "pending"][:5]
        time.sleep(0.5)


def _tree_sent(stack, key: str, most: int) -> list[dict]:
    """The tree sent by the key's user to a new collection of its own: its documents once read, never more than
    ``most``."""
    with stack.http(key) as http:
        created = http.post("/v1/collections", json={"name": "survey"})
        assert created.status_code == 201, created.text
        c = created.json()["id"]
        sent = http.post(f"/v1/collections/{c}/files", files=[("files", ("survey.eml", _tree()))])
        assert sent.status_code == 202, sent.text
        return _settled(http, c, most=most)


@pytest.fixture(scope="module")
def team(stack) -> dict:
    """A team of an admin in the group ``hr``, an editor and a viewer outside it, and a collection holding the
    document ``hr/salaries`` restricted to ``hr``."""
    tag = uuid.uuid4().hex[:6]
    names = {who: f"{who}-{tag}" for who in ("admin", "editor", "viewer")}
    keys = {who: stack.create_user(name) for who, name in names.items()}
    with stack.http(keys["admin"]) as admin:
        made = admin.post("/v1/teams", json={"name": f"payroll-{tag}"})
        assert made.status_code == 201, made.text
        team_id = made.json()["id"]
        for who in ("editor", "viewer"):
            added = admin.put(f"/v1/teams/{team_id}/members/{names[who]}", json={"role": who})
            assert added.status_code == 200, added.text
        assert admin.put(f"/v1/teams/{team_id}/groups/hr/members/{names['admin']}").status_code == 200
        created = admin.post("/v1/collections", json={"name": "people", "team_id": team_id})
        assert created.status_code == 201, created.text
        collection_id = created.json()["id"]
        sent = admin.post(f"/v1/collections/{collection_id}/documents", json={"documents": [
            {"id": "hr/salaries", "title": "Board salaries", "text": SALARIES, "access": {"groups": ["hr"]}}]})
        assert sent.status_code == 202, sent.text
        _settled(admin, collection_id, most=1)
    return {"keys": keys, "collection": collection_id}


def test_an_attachment_never_replaces_a_document_its_sender_does_not_find(stack, team):
    c, keys = team["collection"], team["keys"]
    mail = _mail("Payroll", "The new salary sheet is attached.", [("salaries.pdf", b"%PDF-1.7\nnot a real pdf")])
    with stack.http(keys["editor"]) as editor:
        sent = editor.post(f"/v1/collections/{c}/files", data={"document_ids": ["hr"]},
                           files=[("files", ("hr.eml", mail, "message/rfc822"))])
        assert sent.status_code == 202 and sent.json()["documents"][0]["format"] == "eml", sent.text
    with stack.http(keys["admin"]) as admin:
        by_id = {d["id"]: d for d in _settled(admin, c, most=2)}
        kept = admin.get(f"/v1/collections/{c}/documents/hr/salaries").json()
    notes = by_id["hr"]["notes"]
    assert any(n.startswith("attachment salaries.pdf: refused: 409 ") and "restricted to groups you are not in" in n
               for n in notes), notes
    # The restricted document as it was: its text, its groups, indexed.
    assert kept["text"] == SALARIES and kept["access"] == {"groups": ["hr"]} and kept["status"] == "indexed", kept
    with stack.http(keys["viewer"]) as viewer:
        read = viewer.get(f"/v1/collections/{c}/documents/hr/salaries")
        assert read.status_code == 404 and SALARIES not in read.text, read.text
        assert "hr/salaries" not in {d["id"] for d in viewer.get(f"/v1/collections/{c}/documents").json()["items"]}


def test_an_email_tree_becomes_no_more_documents_than_the_senders_quota(stack):
    quota = 50
    _, key, _ = _user(stack, "fanout", "--max-documents", str(quota))
    documents = _tree_sent(stack, key, most=quota)
    with stack.http(key) as http:
        assert http.get("/v1/me").json()["usage"]["documents"] == quota
    # The quota is filled, not passed; every attachment not taken is named with the reason (the quota's 413, or
    # the round's share of the upload's limit used up first).
    assert len(documents) == quota and all(d["status"] == "indexed" for d in documents), documents[:3]
    refused = [n for d in documents for n in d["notes"] if ": refused: " in n]
    assert len(refused) == 1 + WIDE + WIDE * WIDE - quota, refused[:3]
    assert any(": refused: 413 " in n and f"quota of {quota}" in n for n in refused), refused[:3]


def test_an_email_tree_becomes_no_more_documents_than_one_upload_may(stack):
    most = Settings.model_fields["max_documents_per_upload"].default
    assert "AGENTSEARCH_MAX_DOCUMENTS_PER_UPLOAD" not in stack.env  # the default is what this stack runs with
    _, key, _ = _user(stack, "fanout")
    documents = _tree_sent(stack, key, most=most)
    assert len(documents) == most and all(d["status"] == "indexed" for d in documents), documents[:3]
    by_id = {d["id"]: d for d in documents}
    # Every round of the survey is taken; each round's share of the rest decides how many of its notes are.
    assert all(f"survey/round-{i}" in by_id for i in range(WIDE))
    refused = [n for d in documents for n in d["notes"] if "AGENTSEARCH_MAX_DOCUMENTS_PER_UPLOAD" in n]
    assert len(refused) == 1 + WIDE + WIDE * WIDE - most, refused[:3]
    assert all(n.startswith("attachment note-") and f"at most {most} documents" in n for n in refused), refused[:3]
