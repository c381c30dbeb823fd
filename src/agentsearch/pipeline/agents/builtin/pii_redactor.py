"""Post-search: redact personal data from the documents before anything downstream (answer, artifacts) sees it.

Detected, each with a validity check so that look-alikes stay:

- ``email``: addresses;
- ``phone``: international numbers written with ``+`` (8 to 15 digits, E.164) and US numbers such as
  ``(415) 555-2671`` / ``415-555-2671`` / ``+1 415 555 2671`` (NANP area and exchange codes);
- ``card``: 13-19 digit card numbers, **Luhn-valid only** (a Luhn-invalid digit string stays);
- ``iban``: IBANs with or without spaces, **mod-97 checksum-valid only**;
- ``ssn``: US social security numbers ``123-45-6789`` in the issued ranges (area not 000, 666 or 900-999; group
  not 00; serial not 0000);
- ``ip``: IPv4 and IPv6 addresses, validated with :mod:`ipaddress`;
- ``name``: the configured ``names``, whole words, case-insensitive.

Modes: ``mask`` (``[EMAIL]``), ``hash`` (``[EMAIL:3f2a1c]``, a short salted sha256 of the normalised value, stable
across documents and jobs so one person stays recognisable without being readable) and ``remove``. Title, text and
every string inside the metadata (nested too: earlier agents may have quoted the text) are redacted. Counts per type
are reported in the output metadata and in each redacted document's metadata; the values themselves never are.

Usage::

    agent = PiiRedactor({"mode": "hash", "salt": "s3cret", "names": ["Maria Lopez"]})
    out = agent.run(PostSearchInput(documents=docs, query="q"), ctx)
    out.documents[0].text          # "Call Maria Lopez on +44 20 7946 0958" -> "Call [NAME:9b8852] on [PHONE:f48eea]"
    out.metadata["pii_redacted"]   # {"email": 0, "phone": 1, "card": 0, "iban": 0, "ssn": 0, "ip": 0, "name": 1}
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)

PiiType = Literal["email", "phone", "card", "iban", "ssn", "ip", "name"]
ALL_TYPES: tuple[PiiType, ...] = ("email", "phone", "card", "iban", "ssn", "ip", "name")
# When two detections overlap, the earlier type in this order wins (an IBAN's digits are not also a card number).
PRIORITY = {t: i for i, t in enumerate(("email", "iban", "ip", "ssn", "card", "phone", "name"))}

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w-])")
CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
SSN = re.compile(r"(?<![\w-])(\d{3})([- ])(\d{2})\2(\d{4})(?![\w-])")
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
IPV6 = re.compile(
    r"(?<![\w:.])(?:(?:[0-9A-Fa-f]{0,4}:){2,6}\d{1,3}(?:\.\d{1,3}){3}"  # with an embedded IPv4 (::ffff:192.0.2.1)
    r"|(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4})(?![\w:])"
)
PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){2,6}(?![\w-])")
PHONE_US = re.compile(r"(?<![\w+])(?:\+?1[ .-]?)?(?:\((\d{3})\) ?|(\d{3})[ .-])(\d{3})[ .-](\d{4})(?![\w-])")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(compact: str) -> bool:
    if not (15 <= len(compact) <= 34) or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def ssn_valid(area: str, group: str, serial: str) -> bool:
    a = int(area)
    return a != 0 and a != 666 and a < 900 and group != "00" and serial != "0000"


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    type: str
    value: str  # normalised, only ever hashed


def _iban_matches(text: str) -> list[Match]:
    found = []
    for m in IBAN.finditer(text):
        raw = m.group(0)
        # The pattern may run into a following code-like word: try the longest prefix ending at a group boundary.
        ends = [i + 1 for i in range(len(raw)) if i + 1 == len(raw) or raw[i + 1] == " "]
        for end in sorted(ends, reverse=True):
            compact = raw[:end].replace(" ", "")
            if iban_valid(compact):
                found.append(Match(m.start(), m.start() + end, "iban", compact))
                break
    return found


def _phone_matches(text: str) -> list[Match]:
    found = []
    for m in PHONE_US.finditer(text):
        area = m.group(1) or m.group(2)
        if area[0] in "01" or m.group(3)[0] in "01":  # NANP: area code and exchange start with 2-9
            continue
        found.append(Match(m.start(), m.end(), "phone", "1" + area + m.group(3) + m.group(4)))
    for m in PHONE_INTL.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 8 <= len(digits) <= 15:
            found.append(Match(m.start(), m.end(), "phone", digits))
    return found


def _ip_matches(text: str) -> list[Match]:
    found = []
    for m in IPV4.finditer(text):
        try:
            found.append(Match(m.start(), m.end(), "ip", str(ipaddress.IPv4Address(m.group(0)))))
        except ValueError:
            continue
    for m in IPV6.finditer(text):
        try:
            found.append(Match(m.start(), m.end(), "ip", str(ipaddress.IPv6Address(m.group(0)))))
        except ValueError:
            continue
    return found


def find_pii(text: str, types: AbstractSet[str], names: re.Pattern | None = None) -> list[Match]:
    """Validated, non-overlapping detections in ``text``, in text order."""
    candidates: list[Match] = []
    if "email" in types:
        candidates += [Match(m.start(), m.end(), "email", m.group(0).lower()) for m in EMAIL.finditer(text)]
    if "iban" in types:
        candidates += _iban_matches(text)
    if "card" in types:
        for m in CARD.finditer(text):
            digits = re.sub(r"\D", "", m.group(0))
            if 13 <= len(digits) <= 19 and luhn_valid(digits):
                candidates.append(Match(m.start(), m.end(), "card", digits))
    if "ssn" in types:
        candidates += [
            Match(m.start(), m.end(), "ssn", m.group(1) + m.group(3) + m.group(4))
            for m in SSN.finditer(text) if ssn_valid(m.group(1), m.group(3), m.group(4))
        ]
    if "ip" in types:
        candidates += _ip_matches(text)
    if "phone" in types:
        candidates += _phone_matches(text)
    if "name" in types and names is not None:
        candidates += [Match(m.start(), m.end(), "name", " ".join(m.group(0).lower().split()))
                       for m in names.finditer(text)]
    accepted: list[Match] = []
    for c in sorted(candidates, key=lambda c: (PRIORITY[c.type], c.start, -(c.end - c.start))):
        if all(c.end <= a.start or c.start >= a.end for a in accepted):
            accepted.append(c)
    return sorted(accepted, key=lambda c: c.start)


class PiiRedactor(PostSearchAgent):
    agent_id = "pii_redactor"
    version = "1"
    description = ("Redacts emails, phone numbers, Luhn-valid card numbers, checksum-valid IBANs, US SSNs, IP "
                   "addresses and configured names (mask / hash / remove); reports counts per type.")
    default_timeout_s = 10.0
    cache_ttl_s = 3600

    class Config(AgentConfig):
        mode: Literal["mask", "hash", "remove"] = "mask"
        types: list[PiiType] = Field(default_factory=lambda: list(ALL_TYPES), description="Which kinds to redact.")
        names: list[str] = Field(default_factory=list, description="Names redacted as whole words, any case.")
        salt: str = Field("", description="Mixed into the hash in mode 'hash', so hashes cannot be looked up.")
        hash_chars: int = Field(6, ge=4, le=64)
        redact_metadata: bool = True
        skip_metadata_keys: list[str] = Field(
            default_factory=lambda: ["collection_id"], description="Metadata keys left as they are."
        )

        @field_validator("names")
        @classmethod
        def _names_not_blank(cls, names: list[str]) -> list[str]:
            if any(not n.strip() for n in names):
                raise ValueError("names must be non-empty")
            return [n.strip() for n in names]

    config: Config

    def __init__(self, config=None) -> None:
        super().__init__(config)
        names = sorted(set(self.config.names), key=len, reverse=True)
        self._names = (
            re.compile(r"(?<!\w)(?:" + "|".join(r"\s+".join(map(re.escape, n.split())) for n in names) + r")(?!\w)",
                       re.IGNORECASE)
            if names else None
        )
        self._types = set(self.config.types)

    def _replacement(self, match: Match) -> str:
        if self.config.mode == "remove":
            return ""
        label = match.type.upper()
        if self.config.mode == "mask":
            return f"[{label}]"
        digest = hashlib.sha256(f"{self.config.salt}\x00{match.type}\x00{match.value}".encode()).hexdigest()
        return f"[{label}:{digest[: self.config.hash_chars]}]"

    def redact(self, text: str, counts: Counter) -> str:
        matches = find_pii(text, self._types, self._names)
        if not matches:
            return text
        out, pos = [], 0
        for m in matches:
            piece = text[pos : m.start]
            replacement = self._replacement(m)
            if not replacement and piece.endswith(" ") and (m.end == len(text) or not text[m.end].isalnum()):
                piece = piece[:-1]  # "call  today" / "call ." -> keep the spacing tidy when removing
            out += [piece, replacement]
            pos = m.end
            counts[m.type] += 1
        out.append(text[pos:])
        return "".join(out)

    def _redact_value(self, value: Any, counts: Counter) -> Any:
        if isinstance(value, str):
            return self.redact(value, counts)
        if isinstance(value, dict):
            return {k: self._redact_value(v, counts) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redact_value(v, counts) for v in value]
        return value

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        totals: Counter = Counter()
        documents, redacted_documents = [], 0
        skip = set(self.config.skip_metadata_keys)
        for doc in inp.documents:
            counts: Counter = Counter()
            title = self.redact(doc.title, counts)
            text = self.redact(doc.text, counts)
            metadata = dict(doc.metadata)
            if self.config.redact_metadata:
                metadata = {k: v if k in skip else self._redact_value(v, counts) for k, v in metadata.items()}
            if counts:
                redacted_documents += 1
                metadata["pii_redacted"] = {t: counts[t] for t in ALL_TYPES if counts[t]}
                doc = doc.model_copy(update={"title": title, "text": text, "metadata": metadata})
            documents.append(doc)
            totals.update(counts)
        return PostSearchOutput(
            documents=documents,
            metadata={
                "pii_redacted": {t: totals[t] for t in ALL_TYPES if t in self._types},
                "pii_documents_redacted": redacted_documents,
                "pii_mode": self.config.mode,
            },
        )
