"""The questions made from a collection's documents: the cloze method's question never holds its answer, the span is
where it says, the near shape holds a few of the passage's words (the recall shape none of its rarest), and the
LLM's question is kept only when its answer is in the passage it was shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsearch.pipeline.eval.eval_sets import make_questions
from agentsearch.pipeline.eval.questions import (
    GAP,
    NEAR_TERMS,
    RARE_TERMS,
    Rarity,
    checked_llm_question,
    cloze_question,
    llm_question,
    near_words,
    rarest_terms,
    sentence_spans,
    window_around,
)
from agentsearch.pipeline.text import content_terms, words

SAMPLE = Path(__file__).resolve().parents[3] / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
DOCS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def corpus() -> list[tuple[str, str, str]]:
    return [(d["id"], d.get("title") or "", d["text"]) for d in DOCS]


def test_sentence_spans_point_at_the_sentences() -> None:
    text = "  Leave is 25 days a year. Carry-over ends in March.\n\nPart two starts here."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Leave is 25 days a year.", "Carry-over ends in March.", "Part two starts here."]


@pytest.mark.parametrize("doc", DOCS, ids=[d["id"] for d in DOCS])
def test_a_line_cloze_question_is_not_answerable_from_its_own_words(doc: dict) -> None:
    rarity = Rarity.of([d["text"] for d in DOCS])
    made = cloze_question(doc["id"], doc.get("title") or "", doc["text"], rarity, shape="line")
    if made is None:
        pytest.skip("no sentence of 6-60 words with a span the rest does not hold")
    # The span is where the question says, in the document's own text ...
    assert doc["text"][made.start:made.end] == made.answer
    assert made.document_id == doc["id"] and made.origin == "cloze"
    # ... the question is the words either side of the span, at most six each, with a gap in its place ...
    assert GAP in made.question
    left, right = made.question.split(GAP)
    assert len(left.split()) <= 6 and len(right.split()) <= 6
    assert " ".join(f"{left}{made.answer}{right}".split()) in " ".join(doc["text"].split())
    # ... and neither the span nor any word of it that is rare in the collection is in the question.
    assert made.answer.casefold() not in made.question.casefold()
    rare = [w for w in words(made.answer) if rarity.frequencies.get(w, 0) <= 1]
    assert not [w for w in rare if w in words(made.question)]


@pytest.mark.parametrize("doc", DOCS, ids=[d["id"] for d in DOCS])
def test_a_near_question_holds_a_few_passage_words_and_none_of_the_answer(doc: dict) -> None:
    rarity = Rarity.of([d["text"] for d in DOCS])
    made = cloze_question(doc["id"], doc.get("title") or "", doc["text"], rarity, shape="near")
    if made is None:
        pytest.skip("no sentence of 6-60 words with a span the rest does not hold")
    assert doc["text"][made.start:made.end] == made.answer and made.origin == "cloze"
    assert made.question.count(GAP) == 1
    asked = set(words(made.question.replace(GAP, " ")))
    # Not answerable from its own words: neither the span nor any word of it is in the question ...
    assert made.answer.casefold() not in made.question.casefold() and not asked & set(words(made.answer))
    # ... it holds at most four of the passage's content words, every word it keeps the passage's, in its order.
    assert len([w for w in words(made.question) if content_terms(w)]) <= NEAR_TERMS
    passage, cursor = words(doc["text"]), 0
    for word in words(made.question.replace(GAP, " ")):
        assert word in passage[cursor:]
        cursor = passage.index(word, cursor) + 1


@pytest.mark.parametrize("doc", DOCS, ids=[d["id"] for d in DOCS])
def test_a_recall_question_holds_none_of_the_documents_rarest_terms(doc: dict) -> None:
    rarity = Rarity.of([d["text"] for d in DOCS])
    made = cloze_question(doc["id"], doc.get("title") or "", doc["text"], rarity, shape="recall")
    if made is None:
        pytest.skip("no sentence of 6-60 words with a span the rest does not hold")
    rare = rarest_terms(doc["text"], rarity)
    assert len(rare) == min(RARE_TERMS, len(content_terms(doc["text"])))
    assert not set(words(made.question)) & rare and made.answer.casefold() not in made.question.casefold()


def test_the_near_shape_shares_fewer_words_with_the_passage_than_the_line() -> None:
    rarity = Rarity.of([d["text"] for d in DOCS])
    shared = {}
    for shape in ("line", "near"):
        made = make_questions(corpus(), len(DOCS), rarity, shape=shape)
        shared[shape] = [len(content_terms(q.question)) for q in made]
    assert max(shared["near"]) <= NEAR_TERMS < max(shared["line"])
    assert sum(shared["near"]) < sum(shared["line"]) * 0.8
    with pytest.raises(ValueError, match="unknown question shape"):
        cloze_question(*corpus()[0], rarity, shape="poem")


def test_near_words_walk_out_from_the_gap_past_the_left_out_ones() -> None:
    before, after = "The quarterly audit of Zorblax travel ", " claims found late receipts in March."
    left, right = near_words(before, after, {"zorblax"}, terms=4)
    # Nearest first, left before right at equal distance: travel, claims, (Zorblax passed over), found, of (a stop
    # word, kept, not counted), late: four content terms.
    assert (left, right) == (["of", "travel"], ["claims", "found", "late"])


def test_the_answer_is_the_sentences_rarest_span() -> None:
    docs = [("a", "Policy", "The office opens at nine. Staff may work from Reykjavik on Fridays with approval."),
            ("b", "Other", "Staff may work from home on Fridays. The office opens at nine with approval."),
            ("c", "More", "Staff work on Fridays.")]
    made = cloze_question(*docs[0], Rarity.of([d[2] for d in docs]), shape="line")
    assert made is not None and made.answer == "Reykjavik"
    assert made.question == f"Staff may work from {GAP} on Fridays with approval."


def test_a_span_repeated_in_the_title_is_never_the_answer() -> None:
    text = "The Zanzibar office pays travel costs of 4,200 euros for each Zanzibar visit by staff."
    made = cloze_question("z", "Zanzibar travel", text, Rarity.of([text, "another text about costs"]), shape="line")
    assert made is not None and "zanzibar" not in made.answer.casefold()
    spliced = cloze_question("p", "Parts", "The fastener is catalogued as XR-7468F on shelf 149 of aisle C.",
                             Rarity.of(["The fastener is catalogued as XR-7468F on shelf 149 of aisle C.", "x"]),
                             shape="line")
    assert spliced is not None and spliced.question.count(GAP) == 1 and "  " not in spliced.question


def test_the_line_shape_is_the_default() -> None:
    rarity = Rarity.of([d["text"] for d in DOCS])
    assert make_questions(corpus(), 5, rarity) == make_questions(corpus(), 5, rarity, shape="line")


def test_questions_are_spread_across_documents_before_a_second_from_one() -> None:
    made = make_questions(corpus(), len(DOCS), Rarity.of([d["text"] for d in DOCS]))
    ids = [q.document_id for q in made]
    assert len(set(ids)) == len(ids)
    assert made == make_questions(corpus(), len(DOCS), Rarity.of([d["text"] for d in DOCS]))  # seeded
    more = make_questions(corpus(), len(DOCS) + 3, Rarity.of([d["text"] for d in DOCS]))
    assert len(more) == len(DOCS) + 3 and set(ids) <= {q.document_id for q in more}


TEXT = "Intro line here. The reactor was built in 1957 near Windscale by the authority. It closed later on."


def test_the_llm_question_is_kept_only_with_its_answer_in_the_passage() -> None:
    window = (0, len(TEXT))
    kept = checked_llm_question({"question": "When was the reactor built?", "answer": "1957"}, "d", TEXT, window)
    assert kept is not None and TEXT[kept.start:kept.end] == "1957" and kept.origin == "llm"
    assert checked_llm_question({"question": "When?", "answer": "1958"}, "d", TEXT, window) is None
    assert checked_llm_question({"question": "Was it 1957?", "answer": "1957"}, "d", TEXT, window) is None
    assert checked_llm_question("not an object", "d", TEXT, window) is None
    outside = (0, 16)  # the answer is in the document but not in the passage the model was shown
    assert checked_llm_question({"question": "When was it built?", "answer": "1957"}, "d", TEXT, outside) is None


class FakeLLM:
    def __init__(self, reply) -> None:
        self.reply, self.seen = reply, []

    def complete_json(self, messages, timeout_s=0.0, **kwargs):
        assert kwargs["max_tokens"] and kwargs["json_schema"]["required"] == ["question", "answer"]
        self.seen.append(messages[-1]["content"])
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_a_rejected_or_failed_llm_question_falls_back_to_the_cloze_one() -> None:
    rarity = Rarity.of([TEXT, "Another text entirely."])
    good = llm_question(FakeLLM({"question": "Where was the reactor built?", "answer": "Windscale"}), "d", "Atoms",
                        TEXT, rarity)
    assert good is not None and good.origin == "llm" and good.answer == "Windscale"
    for reply in ({"question": "Where?", "answer": "Chernobyl"}, TimeoutError("slow")):
        fallback = llm_question(FakeLLM(reply), "d", "Atoms", TEXT, rarity)
        assert fallback is not None and fallback.origin == "cloze"
        assert fallback.answer.casefold() not in fallback.question.casefold()


def test_the_llm_is_shown_a_window_around_the_salient_sentence() -> None:
    text = "One short. Two is here. The third one. Four comes next. Five ends it."
    spans = sentence_spans(text)
    start, end = window_around(text, *spans[2])
    assert text[start:end] == "Two is here. The third one. Four comes next."
