"""The PII redactor on real text, with the fake toolbox of ``post_search_fakes`` (real MiniLM embeddings)."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.agents.builtin.pii_redactor import PiiRedactor, iban_valid, luhn_valid
from tests.unit.agents.post_search_fakes import CORPUS, run

VALID_CARD, INVALID_CARD = "4111 1111 1111 1111", "4111 1111 1111 1112"
VALID_IBAN, INVALID_IBAN = "GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 33"

REFUND_NOTE = (
    f"Refund for order 88231 was issued to card {VALID_CARD} on 2025-03-14. The earlier attempt with "
    f"{INVALID_CARD} was declined, and the tracking number 7421 0093 1187 4412 (order 88231) is unchanged."
)
SUPPORT_TICKET = (
    "Customer Maria Lopez (maria.lopez@helios-energy.example) called from (415) 555-2671 and later from "
    "+44 20 7946 0958 about invoice 2025-0042. Her SSN 536-22-8714 was on file by mistake. The login came from "
    "203.0.113.42 and 2001:db8::8a2e:370:7334. Refunds go to IBAN GB82 WEST 1234 5698 7654 32. MARIA LOPEZ "
    "confirmed the request on 12:30:45 via version 1.2.3 of the app."
)
SUPPORT_TICKET_MASKED = (
    "Customer [NAME] ([EMAIL]) called from [PHONE] and later from "
    "[PHONE] about invoice 2025-0042. Her SSN [SSN] was on file by mistake. The login came from "
    "[IP] and [IP]. Refunds go to IBAN [IBAN]. [NAME] "
    "confirmed the request on 12:30:45 via version 1.2.3 of the app."
)
SUPPORT_TICKET_REMOVED = (
    "Customer () called from and later from "
    "about invoice 2025-0042. Her SSN was on file by mistake. The login came from "
    "and. Refunds go to IBAN. "
    "confirmed the request on 12:30:45 via version 1.2.3 of the app."
)
RAW_VALUES = ["Maria Lopez", "maria.lopez@helios-energy.example", "(415) 555-2671", "+44 20 7946 0958",
              "536-22-8714", "203.0.113.42", "2001:db8::8a2e:370:7334", VALID_IBAN, "MARIA LOPEZ"]


def test_checksums_used_by_the_pii_redactor():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert luhn_valid("378282246310005")  # an Amex test number
    assert iban_valid("GB82WEST12345698765432") and iban_valid("DE89370400440532013000")
    assert not iban_valid("GB82WEST12345698765433") and not iban_valid("DE89370400440532013001")


def test_pii_redactor_removes_a_luhn_valid_card_and_keeps_a_luhn_invalid_digit_string():
    doc = Document(id="refund", title="Refund note", text=REFUND_NOTE)
    out = run(PiiRedactor(), [doc])
    text = out.documents[0].text
    assert VALID_CARD not in text and "card [CARD] on 2025-03-14" in text
    assert INVALID_CARD in text  # fails the Luhn check: not a card number
    assert "7421 0093 1187 4412" in text  # a 16-digit tracking number that is not Luhn-valid either
    assert out.documents[0].metadata["pii_redacted"] == {"card": 1}
    assert out.metadata["pii_redacted"]["card"] == 1


def test_pii_redactor_redacts_a_valid_iban_and_keeps_an_invalid_one():
    text = (f"Pay the invoice to {VALID_IBAN} (not {INVALID_IBAN}, which has a typo). "
            "The German account DE89370400440532013000 is also ours; DE89370400440532013001 is not an IBAN.")
    out = run(PiiRedactor(), [Document(id="d", text=text)])
    assert out.documents[0].text == (
        f"Pay the invoice to [IBAN] (not {INVALID_IBAN}, which has a typo). "
        "The German account [IBAN] is also ours; DE89370400440532013001 is not an IBAN."
    )
    assert out.metadata["pii_redacted"]["iban"] == 2


def test_pii_redactor_mask_mode_on_a_support_ticket():
    ticket = Document(id="t", title="Ticket from Maria Lopez", text=SUPPORT_TICKET)
    out = run(PiiRedactor({"names": ["Maria Lopez"]}), [ticket])
    doc = out.documents[0]
    assert doc.text == SUPPORT_TICKET_MASKED
    assert doc.title == "Ticket from [NAME]"
    assert doc.metadata["pii_redacted"] == {"email": 1, "phone": 2, "iban": 1, "ssn": 1, "ip": 2, "name": 3}
    assert out.metadata["pii_redacted"] == {"email": 1, "phone": 2, "card": 0, "iban": 1, "ssn": 1, "ip": 2, "name": 3}
    assert out.metadata["pii_documents_redacted"] == 1


def test_pii_redactor_remove_mode_leaves_no_trace_and_tidy_spacing():
    out = run(PiiRedactor({"mode": "remove", "names": ["Maria Lopez"]}), [Document(id="t", text=SUPPORT_TICKET)])
    assert out.documents[0].text == SUPPORT_TICKET_REMOVED
    assert "  " not in out.documents[0].text


def test_pii_redactor_hash_mode_is_stable_salted_and_never_shows_the_value():
    other = Document(id="t2", text="Follow-up sent to Maria.Lopez@helios-energy.example by the billing team.")
    agent = PiiRedactor({"mode": "hash", "salt": "s3cret", "names": ["Maria Lopez"]})
    out = run(agent, [Document(id="t1", text=SUPPORT_TICKET), other])
    first, second = out.documents[0].text, out.documents[1].text
    email_hashes = re.findall(r"\[EMAIL:([0-9a-f]{6})\]", first) + re.findall(r"\[EMAIL:([0-9a-f]{6})\]", second)
    assert len(email_hashes) == 2 and email_hashes[0] == email_hashes[1]  # one address, one hash, any letter case
    names = re.findall(r"\[NAME:([0-9a-f]{6})\]", first)
    assert len(names) == 2 and names[0] == names[1]  # "Maria Lopez" and "MARIA LOPEZ"
    assert len(set(re.findall(r"\[PHONE:([0-9a-f]{6})\]", first))) == 2  # two different numbers
    # Same input, same salt: same text; another salt: other hashes.
    assert run(agent, [Document(id="t1", text=SUPPORT_TICKET)]).documents[0].text == first
    resalted = run(PiiRedactor({"mode": "hash", "salt": "other", "names": ["Maria Lopez"]}),
                   [Document(id="t1", text=SUPPORT_TICKET)]).documents[0].text
    assert resalted != first and len(resalted.split()) == len(first.split())
    dumped = json.dumps([d.model_dump() for d in out.documents]) + json.dumps(out.metadata)
    for value in RAW_VALUES:
        assert value not in dumped


def test_pii_redactor_counts_per_type_and_redacts_metadata_strings_but_not_the_values():
    docs = [
        Document(id="a", text="Write to ops@northwind.example or hr@northwind.example today.",
                 metadata={"author": "ops@northwind.example", "collection_id": "c-1",
                           "quotes": [{"q": "call 212-555-0199"}], "published": "2024-04-25", "pages": 3}),
        Document(id="b", text="Server 10.20.30.40 answered; 10.20.30.400 is not an address."),
        Document(id="c", text="Nothing personal here: revenue was $349 million, up 14% from $306 million."),
    ]
    out = run(PiiRedactor(), docs)
    a, b, c = out.documents
    assert a.text == "Write to [EMAIL] or [EMAIL] today."
    assert a.metadata["author"] == "[EMAIL]" and a.metadata["quotes"] == [{"q": "call [PHONE]"}]
    assert a.metadata["collection_id"] == "c-1" and a.metadata["published"] == "2024-04-25" and a.metadata["pages"] == 3
    assert a.metadata["pii_redacted"] == {"email": 3, "phone": 1}
    assert b.text == "Server [IP] answered; 10.20.30.400 is not an address."
    assert c == docs[2] and "pii_redacted" not in c.metadata
    assert out.metadata["pii_redacted"] == {"email": 3, "phone": 1, "card": 0, "iban": 0, "ssn": 0, "ip": 1, "name": 0}
    assert out.metadata["pii_documents_redacted"] == 2


def test_pii_redactor_leaves_invalid_look_alikes_and_the_sample_corpus_alone():
    look_alikes = ("SSNs 666-12-3456, 000-12-3456, 912-34-5678 and 123-00-4567 are never issued. Times like 12:30:45, "
                   "dates like 2024-04-25, versions like 1.2.3, 999.10.10.10 and the number 555-123-4567 (exchange "
                   "starting with 1) stay.")
    out = run(PiiRedactor(), [Document(id="x", text=look_alikes), *CORPUS.values()])
    assert out.documents[0].text == look_alikes
    assert out.documents[1:] == list(CORPUS.values())
    assert sum(out.metadata["pii_redacted"].values()) == 0


def test_pii_redactor_only_redacts_the_types_switched_on():
    text = "Mail maria.lopez@helios-energy.example or call (415) 555-2671."
    out = run(PiiRedactor({"types": ["phone"]}), [Document(id="d", text=text)])
    assert out.documents[0].text == "Mail maria.lopez@helios-energy.example or call [PHONE]."
    assert out.metadata["pii_redacted"] == {"phone": 1}


@pytest.mark.parametrize("config", [{"mode": "blur"}, {"types": ["passport"]}, {"names": ["  "]}, {"hash_chars": 2},
                                    {"salt": 1}, {"mask": True}])
def test_pii_redactor_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        PiiRedactor(config)
