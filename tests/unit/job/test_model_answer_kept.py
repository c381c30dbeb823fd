"""A capable model's answer kept whole (src/agentsearch/pipeline/job/answer/delivery.py): its checked sentences with
their citations, the offline quotes only where they leave out what it found, never the same thing twice; the check
reading typographic variants, anchored paraphrases and sentences that join two sources as supported
(src/agentsearch/pipeline/job/answer/citations.py, grounding.py). The sentences are written for the test."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.answer import extractive_answer
from agentsearch.pipeline.job.answer.citations import cited_sentences
from agentsearch.pipeline.job.answer.delivery import covered, deliver, lead_first
from agentsearch.pipeline.job.answer.grounding import LLMSentence, clauses, judge_sentences, lower_by_judge, written
from agentsearch.pipeline.text.spans import find_loose
from agentsearch.pipeline.text.typography import fold_typography

GAME = Document(id="afc", title="AFC Championship", score=0.9, text=(
    "The Broncos defeated the New England Patriots in the AFC Championship Game, winning 20–18. "
    "The kicker made a 5½-yard run on the last drive."))
STADIUM = Document(id="stadium", title="Stadium", score=0.6, text=(
    "The stadium holds 68,500 people, 12% of them “season ticket holders”. It opened in 2014."))
DEFENSE = Document(id="defense", title="Panthers defense", score=0.9, text=(
    "The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading the NFL in "
    "interceptions with 24 and boasting four Pro Bowl selections. Pro Bowl defensive tackle Kawann Short led the "
    "team in sacks with 11, while also forcing three fumbles and recovering two. Fellow lineman Mario Addison added "
    "6½ sacks. The Panthers line also featured veteran defensive end Jared Allen, a 5-time pro bowler who was the "
    "NFL's active career sack leader with 136, along with defensive end Kony Ealy, who had 5 sacks in just 9 "
    "starts."))


def verdict(text: str, documents: list[Document], cited: list[int] | None = None):
    [v], _ = judge_sentences([LLMSentence(text, cited or [1])], documents)
    return v


def test_typography_is_read_in_one_form():
    assert fold_typography("The 5½-mile race ended 20–18 with “68,500” fans (12%).") == \
        'The 5.5-mile race ended 20-18 with "68500" fans (12 percent).'
    assert fold_typography("3,5 and 1,2,3 stay") == "3,5 and 1,2,3 stay"
    text = "It ended 20–18 in a 5½-yard “run”."
    start, end = find_loose(text, 'ended 20-18 in a 5.5-yard "run"')
    assert text[start:end] == "ended 20–18 in a 5½-yard “run”"


@pytest.mark.parametrize("sentence", [
    "The final score of the AFC Championship Game was 20-18.",  # a dash for the en dash, and a paraphrase
    "The Broncos won the AFC Championship Game 20-18 against the New England Patriots.",
    "The kicker made a 5.5-yard run on the last drive.",  # "5.5" for "5½"
])
def test_a_typographic_variant_or_an_anchored_paraphrase_is_supported(sentence):
    v = verdict(sentence, [GAME, STADIUM])
    assert v.status == "supported", v.reason
    assert v.sources == [1]


def test_units_quotes_and_thousands_in_another_form_are_supported():
    v = verdict('The stadium holds 68500 people, 12 percent of them "season ticket holders".', [GAME, STADIUM], [2])
    assert v.status == "supported" and v.sources == [2]


@pytest.mark.parametrize("sentence, missing", [
    ("The final score of the AFC Championship Game was 20-17.", "17"),
    ("The kicker made a 6.5-yard run on the last drive.", "6.5"),
    ("The stadium holds 70,500 people.", "70500"),
])
def test_another_number_in_any_form_is_still_unsupported(sentence, missing):
    v = verdict(sentence, [GAME, STADIUM])
    assert v.status == "unsupported" and missing in v.reason


def test_a_paraphrase_with_a_name_the_span_lacks_is_not_anchored():
    # "NFC" stands nowhere near the score: the paraphrase changed what it is about.
    only_game = Document(id="afc", title="AFC", score=0.9, text=GAME.text.split(". ")[0] + ".")
    other = Document(id="nfc", title="NFC", score=0.5, text="The Panthers won the NFC title at home.")
    v = verdict("The final score of the NFC Championship Game was 20-18.", [only_game, other])
    assert v.status != "supported"


def test_a_sentence_joining_two_sources_is_supported_and_cites_both():
    sentence = "The Broncos beat the New England Patriots 20-18, and the stadium holds 68,500 people."
    assert clauses(sentence) == ["The Broncos beat the New England Patriots 20-18", "the stadium holds 68,500 people"]
    v = verdict(sentence, [GAME, STADIUM])
    assert v.status == "supported" and v.sources == [1, 2]
    assert {c.source for c in v.citations} == {1, 2} and all(c.sentence == sentence for c in v.citations)
    wrong = verdict("The Broncos beat the New England Patriots 20-18, and the stadium holds 60,500 people.",
                    [GAME, STADIUM])
    assert wrong.status == "unsupported"
    assert clauses("Lewis and Clark went west.") == ["Lewis and Clark went west."]  # no clause on either side


def test_the_same_sentence_is_not_delivered_twice():
    question = "How many points did the Panthers defense give up?"
    model = verdict("The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading "
                    "the NFL in interceptions with 24.", [DEFENSE])
    assert model.status == "supported"
    offline = extractive_answer(question, [DEFENSE])
    assert "boasting four Pro Bowl selections" in offline.text
    answer = deliver([model], offline, [DEFENSE], query=question)
    assert answer.text.count("308 points") == 1
    assert answer.text.startswith("The Panthers defense gave up just 308 points")
    # The other quotes of the offline answer (Short's sacks, Allen's record) answer nothing the model left out.
    assert answer.info["quotes_added"] == 0 and answer.info["quotes_covered"] >= 1
    assert answer.text == written(model)


def test_a_supported_sentence_that_does_not_address_the_question_is_not_first():
    question = "Who had five sacks in nine games?"
    other = verdict("Kawann Short led the team in sacks with 11, while also forcing three fumbles.", [DEFENSE])
    answer_sentence = verdict("Kony Ealy had 5 sacks in just 9 starts.", [DEFENSE])
    assert other.status == answer_sentence.status == "supported"
    assert lead_first([other, answer_sentence], question) == [answer_sentence, other]
    delivered = deliver([other, answer_sentence], extractive_answer(question, [DEFENSE]), [DEFENSE], query=question)
    assert delivered.text.startswith("Kony Ealy had 5 sacks in just 9 starts [1].")
    assert delivered.info["lead_moved"] is True
    # The model's order stands when its first sentence answers best.
    assert lead_first([answer_sentence, other], question) == [answer_sentence, other]


def test_a_quote_with_what_the_model_left_out_joins_after_its_sentences():
    question = "When did the stadium open and how many people does it hold?"
    model = verdict("The stadium opened in 2014.", [STADIUM])
    offline = extractive_answer(question, [STADIUM])
    answer = deliver([model], offline, [STADIUM], query=question)
    assert answer.text.startswith("The stadium opened in 2014 [1].")
    assert "68,500" in answer.text and answer.text.count("2014") == 1
    [quote] = [q for q in answer.text.split("] ") if "68,500" in q]
    assert quote


def test_a_partly_supported_sentence_does_not_cover_a_quote():
    question = "How many people does the stadium hold?"
    offline = extractive_answer(question, [STADIUM])
    [quote, *_] = cited_sentences(offline.text, 1)
    model = verdict("The stadium holds 68,500 people.", [STADIUM])
    assert covered(quote, [model], [STADIUM], question) is not None
    # The same sentence once the LLM judge lowered it to partly supported: the quote that says it fully joins.
    lower_by_judge([model], {0: ("partial", None)})
    assert model.status == "partial" and covered(quote, [model], [STADIUM], question) is None
    answer = deliver([model, verdict("It opened in 2014.", [STADIUM])], offline, [STADIUM], query=question)
    assert answer.info["quotes_added"] == 1 and "season ticket holders" in answer.text


def test_a_sentence_that_restates_part_of_a_quote_gives_way_to_the_quote_that_answers():
    # The model said the first half of the sentence; the question is about its second half.
    question = "How many interceptions did the Panthers defense make?"
    model = verdict("The Panthers defense gave up just 308 points, ranking sixth in the league.", [DEFENSE])
    assert model.status == "supported"
    offline = extractive_answer(question, [DEFENSE])
    answer = deliver([model], offline, [DEFENSE], query=question)
    assert "interceptions with 24" in answer.text
    assert answer.text.count("308 points") == 1  # the quote took the sentence's place, not a place after it
    assert answer.info["replaced_by_quote"] == 1
    assert answer.info["sentences"][0]["delivered"] is False and answer.info["sentences"][0]["replaced_by_quote"]


def test_the_offline_answer_joins_when_the_model_names_someone_else():
    question = "Who did the Broncos defeat in the AFC Championship Game?"
    wrong = verdict("The Broncos won the AFC Championship Game 20-18.", [GAME])
    assert wrong.status == "supported"  # true, but it names no one the question asks for
    offline = extractive_answer(question, [GAME])
    answer = deliver([wrong], offline, [GAME], query=question)
    # The quote names them; it says all the model's sentence says, so it stands in its place.
    assert answer.text == ("The Broncos defeated the New England Patriots in the AFC Championship Game, winning "
                           "20–18 [1].")
    assert answer.info["replaced_by_quote"] == 1


def test_a_pasted_passage_is_judged_sentence_by_sentence_and_its_cut_tail_dropped():
    from agentsearch.pipeline.job.answer.llm import MAX_SENTENCE_CHARS, split_runs

    passage = (DEFENSE.text[:MAX_SENTENCE_CHARS - 4] + "linu")[:MAX_SENTENCE_CHARS]
    [whole], _ = judge_sentences([LLMSentence(passage, [1])], [DEFENSE])
    assert whole.status != "supported"  # three sentences and a cut word: no window of the source says it all
    pieces = split_runs([LLMSentence(passage, [1])])
    assert len(pieces) >= 2 and all(p.text.endswith(".") and p.cited == [1] for p in pieces)
    verdicts, _ = judge_sentences(pieces, [DEFENSE])
    assert [v.status for v in verdicts] == ["supported"] * len(pieces)
    one = LLMSentence("John C. Messenger wrote it.", [2])
    assert split_runs([one]) == [one]
