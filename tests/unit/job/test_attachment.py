"""A sentence that recombines its source's names and numbers is not supported, however many of its words the source
holds (src/agentsearch/pipeline/job/answer/attachment.py, used by citations.py); paraphrases that keep the pairing
stay supported. The sentences are written for the test."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.answer.attachment import misattributed, said_of
from agentsearch.pipeline.job.answer.citations import verify_citations
from agentsearch.pipeline.job.answer.grounding import LLMSentence, judge_sentences

DEFENSE = Document(id="defense", title="Panthers defense", score=0.9, text=(
    "The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading the NFL in "
    "interceptions with 24 and boasting four Pro Bowl selections. Pro Bowl defensive tackle Kawann Short led the "
    "team in sacks with 11, while also forcing three fumbles and recovering two. The Panthers line also featured "
    "veteran defensive end Jared Allen, a 5-time pro bowler who was the NFL's active career sack leader with 136, "
    "along with defensive end Kony Ealy, who had 5 sacks in just 9 starts. Davis compiled 5½ sacks, four forced "
    "fumbles, and four interceptions, while Kuechly led the team in tackles (118) forced two fumbles, and "
    "intercepted four passes of his own."))
PAIR = Document(id="pair", title="Sacks", score=0.8, text="Kony Ealy had five sacks and Jared Allen had two.")
GAME = Document(id="game", title="Game", score=0.7, text="The 49ers beat the Broncos 20–18 in Week 5.")


def status(text: str, documents: list[Document]) -> tuple[str, str | None]:
    [v], _ = judge_sentences([LLMSentence(text, [1])], documents)
    return v.status, v.reason


@pytest.mark.parametrize("sentence, number, claimed, holder", [
    ("Jared Allen had 5 sacks in 9 starts.", "5", "Jared Allen", "Kony Ealy"),
    ("Kony Ealy was the career sack leader with 136.", "136", "Kony Ealy", "Jared Allen"),
    ("Kuechly compiled 5.5 sacks.", "5.5", "Kuechly", "Davis"),
    ("Davis led the team in tackles with 118.", "118", "Davis", "Kuechly"),
])
def test_a_number_said_of_another_name_is_unsupported(sentence, number, claimed, holder):
    got, reason = status(sentence, [DEFENSE])
    assert got == "unsupported"
    assert reason == f"the source states {number} of {holder}, not of {claimed}"


def test_two_players_mixed_in_one_source_sentence_are_caught_in_every_typographic_form():
    for sentence in ("Jared Allen had five sacks.", "Jared Allen had 5 sacks."):
        assert status(sentence, [PAIR])[0] == "unsupported"
    assert status("Kony Ealy had five sacks.", [PAIR])[0] == "supported"
    assert status("Jared Allen had two sacks.", [PAIR])[0] == "supported"
    assert status("The 49ers beat the Broncos 20-18 in Week 5.", [GAME])[0] == "supported"


@pytest.mark.parametrize("sentence", [
    "Kony Ealy had 5 sacks in 9 starts.",
    "Jared Allen was the NFL's active career sack leader with 136.",  # a possessive name is said of nothing
    "Davis had four interceptions.",  # "four" stated three times; the one beside "interceptions" is Davis's
    "Davis compiled 5.5 sacks and four forced fumbles.",
    "The Panthers defense gave up 308 points.",
    "Kawann Short led the team with 11 sacks.",
    "With 11 sacks, Kawann Short led the team.",  # the number before its name: said of nothing, not judged
])
def test_a_paraphrase_that_keeps_the_pairing_stays_supported(sentence):
    got, reason = status(sentence, [DEFENSE])
    assert got == "supported", reason


def test_the_clause_rule_reads_subjects_relative_clauses_and_names_with_numbers():
    places = {(p.number, p.holders) for p in said_of(
        "Davis and Kuechly had 5 sacks each, while Newton threw 3 touchdowns in Week 5.")}
    # "Week 5" is a name, said of nothing
    assert places == {("5", frozenset({"davis", "kuechly"})), ("3", frozenset({"newton"}))}
    assert misattributed("Ealy had 5 sacks.", "Allen, who had 5 sacks, and Ealy, who had 2.") == ("5", "Ealy", "Allen")
    assert misattributed("Smith had 5 sacks.", "Allen had 5 sacks.") is None  # no recombination: Smith is not there


def test_a_cited_answer_sentence_that_recombines_is_unsupported_and_stays_so():
    check = verify_citations("Jared Allen had five sacks [1]. Kony Ealy had five sacks [1].", [PAIR])
    assert [c.status for c in check.citations] == ["unsupported", "supported"]
    assert check.citations[0].reason.startswith("the source states 5 of Kony Ealy")
