"""Which name a number is said of: the check that a claim keeps the source's pairing of its names and numbers.

A claim can hold every word of a source sentence and still say something the source does not, by pairing them
anew: "Jared Allen had 5 sacks in 9 starts." for "... defensive end Jared Allen, ..., along with defensive end
Kony Ealy, who had 5 sacks in just 9 starts." The terms, the numbers and their neighbouring words all agree; what
differs is *whom* the number is said of. This module reads that from the sentence's clause structure, by a
stated rule and without a parser:

1. **Clauses.** A sentence is cut at ``, ; : ( )``, a spaced dash, a sentence's end, and the words that open a
   clause (``and``, ``but``, ``while``, ``whereas``, ``who``, ``which``, ``whose``, ``although``, ``though``). A
   piece made only of names and function words ("Davis" of "Davis and Kuechly had ...") joins the piece after it:
   a list of subjects.
2. **Names.** A word written with a capital that is no function word ("The" is none), or one mixing letters and
   digits ("49ers", "Q4"). A name followed by ``'s`` qualifies a noun ("the NFL's leader") and is said of nothing.
3. **Whose number.** A number is said of the names standing in its clause before it; a clause with none there
   ("who had 5 sacks", "a 5-time pro bowler") takes every name of the nearest clause before it that has one, and
   so does, beside its own, a clause opening with a content word in lower case, a verb going on about the subject
   before ("..., while also leading the NFL in interceptions with 24"). A number right after a name is part of it
   ("Super Bowl 50", "Week 5") and is said of nothing. Which name is the subject and which the object of one clause
   ("The 49ers beat the Broncos 20-18") is not told apart: that takes a parser.

``misattributed(claim, source)`` gives the first number the claim says of names the source says it of others,
provided the source names the claim's subject too (else this is no recombination, and the other checks judge):
``("5", "Jared Allen", "Kony Ealy")``. A number said of nothing on either side is never judged, so a passive
("5 sacks were recorded by Ealy") or a sentence opening with its figure passes.

Usage::

    misattributed("Jared Allen had 5 sacks.", "Y had 3 sacks, and Jared Allen had 5 sacks.")            # None
    misattributed("Jared Allen had five sacks.", "Kony Ealy had 5 sacks and Jared Allen had 2.")
    # ("5", "Jared Allen", "Kony Ealy")
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentsearch.pipeline.text import STOPWORDS

NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "twenty": "20", "hundred": "100",
    "thousand": "1000", "million": "1000000",
}
_CLAUSE_WORDS = frozenset("and but while whereas who which whose although though".split())
_PIECE = re.compile(
    r"(?P<number>\d+(?:[.,]\d+)*)(?![^\W_])"         # 5, 5.5, 1,000 (not the "49" of "49ers")
    r"|(?P<word>[^\W_]+)(?P<possessive>'s\b)?"      # a word, with the possessive that makes it a qualifier
    r"|(?P<cut>[,;:()\[\]]|\s-\s|[.!?](?=\s|$))"
)


def normal_number(raw: str) -> str:
    """One spelling per number: "1,000,000" and "1.000.000" are thousands, "3.5" and "3,5" a decimal."""
    if re.fullmatch(r"\d{1,3}(?:[.,]\d{3})+", raw):
        raw = re.sub(r"[.,]", "", raw)
    return raw.replace(",", ".").rstrip(".").lstrip("0") or "0"


@dataclass
class _Token:
    kind: str  # number | name | word (lower case or a function word)
    text: str  # the normalised number, or the word casefolded
    written: str
    content: bool = False  # a lower-case word that is no function word
    group: str = ""  # a name's words standing together, as written: "Jared Allen"


def _tokens(text: str) -> list[list[_Token]]:
    """The sentence as clauses of tokens (rule 1)."""
    clauses: list[list[_Token]] = [[]]
    for m in _PIECE.finditer(text):
        if m.group("cut") is not None:
            clauses.append([])
            continue
        if m.group("number") is not None:
            clauses[-1].append(_Token("number", normal_number(m.group("number")), m.group("number")))
            continue
        word = m.group("word")
        lowered = word.casefold()
        if lowered in _CLAUSE_WORDS:
            clauses.append([])
        elif lowered in NUMBER_WORDS:
            clauses[-1].append(_Token("number", NUMBER_WORDS[lowered], word))
        elif m.group("possessive"):
            clauses[-1].append(_Token("word", lowered, word))
        elif (word[0].isupper() and lowered not in STOPWORDS) or (
                any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
            clauses[-1].append(_Token("name", lowered, word))
        else:
            clauses[-1].append(_Token("word", lowered, word, content=lowered not in STOPWORDS and word.islower()))
    for clause in clauses:
        run: list[_Token] = []
        for token in [*clause, _Token("word", "", "")]:
            if token.kind == "name":
                run.append(token)
                continue
            for name in run:
                name.group = " ".join(t.written for t in run)
            run = []
    merged: list[list[_Token]] = []
    for clause in (c for c in clauses if c):
        if merged and all(t.kind == "name" or not t.content for t in merged[-1]) and not any(
                t.kind == "number" for t in merged[-1]):
            merged[-1] = merged[-1] + clause  # a list of subjects: "Davis" and "Kuechly had ..."
        else:
            merged.append(clause)
    return merged


@dataclass
class Place:
    """A number where a sentence states it: the names it is said of (casefolded; empty when none), those names as
    written, and the words beside it (casefolded, "" at a clause's edge)."""

    number: str
    holders: frozenset[str]
    written: str
    beside: tuple[str, str]


def said_of(text: str) -> list[Place]:
    """Each number of ``text`` with the names it is said of (rule 3)."""
    found: list[Place] = []
    last_names: list[_Token] = []  # every name of the nearest clause before that has one
    for clause in _tokens(text):
        first_name = next((k for k, t in enumerate(clause) if t.kind == "name"), len(clause))
        # A clause opening with its verb ("ranking sixth", "while also leading the NFL in ...") goes on about the
        # subject before it: its names are objects, said of beside that subject.
        goes_on = any(t.content for t in clause[:first_name])
        for k, token in enumerate(clause):
            if token.kind != "number" or (k and clause[k - 1].kind == "name"):
                continue  # "Week 5", "Super Bowl 50": a number right after a name is part of it
            own = [t for t in clause[:k] if t.kind == "name"]
            holders = [*last_names, *own] if goes_on or not own else own
            beside = (clause[k - 1].text if k else "", clause[k + 1].text if k + 1 < len(clause) else "")
            found.append(Place(token.text, frozenset(t.text for t in holders),
                               holders[-1].group if holders else "", beside))
        names = [t for t in clause if t.kind == "name"]
        if names:
            last_names = names
    return found


def names_of(text: str) -> frozenset[str]:
    """Every name of ``text``, casefolded (rule 2)."""
    return frozenset(t.text for clause in _tokens(text) for t in clause if t.kind == "name")


def misattributed(claim: str, source: str) -> tuple[str, str, str] | None:
    """The first number ``claim`` says of names that ``source`` (which names them too) says it of others only:
    ``(number, the claim's names, the source's names)`` as written; None when the pairing is kept or unknown.
    Both texts are read as they are given (fold their typography first)."""
    there = said_of(source)
    source_names = names_of(source)
    for said in said_of(claim):
        if not said.holders or not said.holders & source_names:
            continue
        places = [p for p in there if p.number == said.number]
        # Where the source states it more than once, the place with a word beside it in common is the one meant
        # ("5 sacks", not "a 5-time pro bowler").
        beside = [p for p in places if set(p.beside) & set(said.beside) - {""}]
        places = beside or places
        if places and all(p.holders and not p.holders & said.holders for p in places):
            return said.number, said.written, places[0].written
    return None
