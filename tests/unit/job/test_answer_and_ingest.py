"""Extractive answers with citations; JSON Lines parsing and sentence-aligned chunking."""

from __future__ import annotations

import json
import re
from itertools import pairwise

import pytest

from agentsearch.pipeline.agents.base import Document
from agentsearch.pipeline.ingestion.chunking import chunk_text
from agentsearch.pipeline.ingestion.documents_in import IngestError, parse_jsonl
from agentsearch.pipeline.job.answer import NO_RESULTS, extractive_answer
from agentsearch.pipeline.text import split_sentences

DOCS = [
    Document(
        id="press-q4",
        title="Helios Energy Q4 2025 results",
        score=0.82,
        text=(
            "Helios Energy reported fourth quarter revenue of $412 million. "
            "The board approved a new share buyback. "
            "Employees volunteered at local schools in December."
        ),
    ),
    Document(
        id="analyst-note",
        title="Northbridge analyst note",
        score=0.74,
        text=(
            "Northbridge analysts expect module prices to keep falling in 2026. "
            "Interconnection delays in Texas could slow new solar capacity."
        ),
    ),
    Document(
        id="hr-memo",
        title="",
        score=0.70,
        text="The cafeteria will close early on Fridays. Parking permits must be renewed in January.",
    ),
]

CITED = re.compile(r"(.+?) \[(\d+)\]([.!?])")


def cited_sentences(text: str) -> list[tuple[str, int]]:
    """'Body [n].' pieces of an answer, as (sentence with its end mark, n)."""
    return [(body.strip() + end, int(n)) for body, n, end in CITED.findall(text)]


def test_each_citation_points_to_the_document_the_sentence_came_from():
    answer = extractive_answer("Texas interconnection delays and fourth quarter revenue", DOCS, max_sentences=3)
    pieces = cited_sentences(answer.text)
    assert len(pieces) == 3
    for sentence, n in pieces:
        assert 1 <= n <= len(answer.sources)
        source = answer.sources[n - 1]
        document = next(d for d in DOCS if d.id == source.document_id)
        assert sentence in split_sentences(document.text)
    # Both documents the query is about are cited.
    assert {n for _, n in pieces} >= {1, 2}


def test_sources_follow_the_retrieval_order_and_fall_back_to_the_id_for_a_title():
    answer = extractive_answer("revenue", DOCS)
    assert [s.document_id for s in answer.sources] == ["press-q4", "analyst-note", "hr-memo"]
    assert [s.title for s in answer.sources] == ["Helios Energy Q4 2025 results", "Northbridge analyst note", "hr-memo"]
    assert [s.score for s in answer.sources] == [0.82, 0.74, 0.70]


def test_the_chosen_sentences_are_the_ones_that_cover_the_query():
    answer = extractive_answer("When must parking permits be renewed?", DOCS, max_sentences=1)
    assert answer.text == "Parking permits must be renewed in January [3]."

    answer = extractive_answer("What did Northbridge analysts say about module prices?", DOCS, max_sentences=1)
    assert answer.text == "Northbridge analysts expect module prices to keep falling in 2026 [2]."


def test_coverage_beats_retrieval_score():
    # The best-scored document says nothing about the query; the sentence that covers it wins anyway.
    answer = extractive_answer("cafeteria Fridays", DOCS, max_sentences=1)
    assert cited_sentences(answer.text) == [("The cafeteria will close early on Fridays.", 3)]


def test_sentences_are_read_in_source_order_and_limited_to_max_sentences():
    answer = extractive_answer("revenue Texas cafeteria", DOCS, max_sentences=3)
    numbers = [n for _, n in cited_sentences(answer.text)]
    assert numbers == sorted(numbers) == [1, 2, 3]
    assert len(cited_sentences(extractive_answer("revenue Texas cafeteria", DOCS, max_sentences=2).text)) == 2


def test_a_sentence_ending_in_a_question_mark_keeps_it_after_the_citation():
    doc = Document(id="faq", title="FAQ", score=0.9, text="Why did solar revenue grow so fast?")
    assert extractive_answer("solar revenue", [doc]).text == "Why did solar revenue grow so fast [1]?"


def test_no_documents_gives_the_no_results_answer():
    answer = extractive_answer("What was Q4 revenue?", [])
    assert (answer.text, answer.sources, answer.cot_steps) == (NO_RESULTS, [], [])
    with_cot = extractive_answer("What was Q4 revenue?", [], with_cot=True)
    assert with_cot.text == NO_RESULTS
    assert len(with_cot.cot_steps) == 1 and "no documents" in with_cot.cot_steps[0].thought


def test_cot_steps_only_when_asked_and_they_name_the_evidence():
    assert extractive_answer("fourth quarter revenue", DOCS).cot_steps == []
    answer = extractive_answer("fourth quarter revenue Texas", DOCS, max_sentences=2, with_cot=True)
    assert [s.step for s in answer.cot_steps] == [1, 2]
    assert "revenue" in answer.cot_steps[0].thought and "texas" in answer.cot_steps[0].thought
    cited_ids = [answer.sources[n - 1].document_id for _, n in cited_sentences(answer.text)]
    assert answer.cot_steps[1].evidence == cited_ids


# --- parse_jsonl ----------------------------------------------------------------------------------------------


def jsonl(*rows) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows)


def test_parse_jsonl_reads_documents_and_skips_blank_lines():
    text = jsonl(
        {"id": "press-q4", "title": "Q4 results", "text": "Revenue was $412 million.", "metadata": {"year": 2025}},
        "",
        "   ",
        {"id": 42, "text": "Módulos solares: precios en descenso."},
    )
    docs = parse_jsonl(text + "\n")
    assert [(d.id, d.title, d.text) for d in docs] == [
        ("press-q4", "Q4 results", "Revenue was $412 million."),
        ("42", "", "Módulos solares: precios en descenso."),
    ]
    assert docs[0].metadata == {"year": 2025}


def test_parse_jsonl_names_the_line_of_bad_json():
    text = jsonl({"id": "a", "text": "fine"}, "", '{"id": "b", "text": "unterminated}')
    with pytest.raises(IngestError, match=r"^line 3: not valid JSON"):
        parse_jsonl(text)


def test_parse_jsonl_names_the_line_and_field_of_a_missing_text():
    text = jsonl({"id": "a", "text": "fine"}, {"id": "b", "title": "no body"})
    with pytest.raises(IngestError) as info:
        parse_jsonl(text)
    assert str(info.value).startswith("line 2: text:")


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ({"id": "b", "text": "   "}, "text"),
        ({"text": "no id"}, "id"),
        ({"id": "b", "text": "x", "metadata": "not a dict"}, "metadata"),
        (["b", "a list, not an object"], "document"),
    ],
)
def test_parse_jsonl_names_the_invalid_field(row, where):
    with pytest.raises(IngestError, match=rf"^line 1: {where}:"):
        parse_jsonl(jsonl(row))


def test_parse_jsonl_refuses_an_empty_file():
    with pytest.raises(IngestError, match="no documents"):
        parse_jsonl("\n\n")


def test_parse_jsonl_accepts_windows_line_endings():
    docs = parse_jsonl(jsonl({"id": "a", "text": "one"}, {"id": "b", "text": "two"}).replace("\n", "\r\n"))
    assert [d.text for d in docs] == ["one", "two"]


def test_parse_jsonl_splits_only_on_newlines():
    text = jsonl(
        {"id": "a", "text": "First paragraph.\u2028Second paragraph."},
        {"id": "b", "text": "Pasted from a PDF\u0085with a NEL character."},
    )
    docs = parse_jsonl(text)
    assert [d.id for d in docs] == ["a", "b"]
    assert docs[0].text == "First paragraph.\u2028Second paragraph."


# --- chunk_text -----------------------------------------------------------------------------------------------

REPORT = (
    "Helios Energy reported fourth quarter revenue of $412 million. "
    "Growth came from utility-scale solar installations in Texas and Arizona. "
    "Operating margin improved to 14.2% as component costs fell. "
    "Management expects 2026 revenue between $1.7 and $1.8 billion. "
    "The board approved a share buyback of $150 million. "
    "Headcount grew to 4,300 employees, mostly in installation crews."
)


def sentence_runs(chunks: list[str], sentences: list[str]) -> list[tuple[int, int]]:
    """Each chunk as the (first, last) index of the run of consecutive original sentences it is made of."""
    runs = []
    for chunk in chunks:
        parts = split_sentences(chunk)
        starts = [i for i in range(len(sentences)) if sentences[i : i + len(parts)] == parts]
        assert starts, f"chunk is not a run of whole, consecutive sentences: {chunk!r}"
        # The first match at or after the previous run's start (a repeated sentence could match earlier).
        first = next((i for i in starts if not runs or i >= runs[-1][0]), starts[0])
        runs.append((first, first + len(parts) - 1))
    return runs


@pytest.mark.parametrize("max_chars", [80, 130, 200, 1200])
def test_chunks_hold_whole_sentences_within_max_chars(max_chars):
    sentences = split_sentences(REPORT)
    assert max(len(s) for s in sentences) <= 80  # so every limit tried here can be respected
    chunks = chunk_text(REPORT, max_chars=max_chars)
    assert chunks and all(len(c) <= max_chars for c in chunks)
    runs = sentence_runs(chunks, sentences)
    # In order, no sentence skipped (chunks may repeat a little of the previous one), every chunk moves on.
    assert runs[0][0] == 0 and runs[-1][1] == len(sentences) - 1
    for (start, end), (next_start, next_end) in pairwise(runs):
        assert start <= next_start <= end + 1
        assert next_end > end


def test_a_large_limit_keeps_the_text_in_one_chunk_and_a_small_one_splits_it():
    assert chunk_text(REPORT, max_chars=1200) == [" ".join(split_sentences(REPORT))]
    assert len(chunk_text(REPORT, max_chars=130)) >= 3


def test_a_sentence_longer_than_the_limit_becomes_its_own_chunk():
    long_sentence = "The " + "very " * 40 + "long sentence about revenue."
    text = f"Short opener. {long_sentence} Short closer."
    chunks = chunk_text(text, max_chars=60)
    assert long_sentence in chunks
    assert [c for c in chunks if c != long_sentence] == [c for c in chunks if len(c) <= 60]
    assert chunks[0] == "Short opener." and chunks[-1].endswith("Short closer.")


def test_text_without_sentence_breaks_is_one_chunk():
    assert chunk_text("revenue table 2025 q4 412 million", max_chars=1200) == ["revenue table 2025 q4 412 million"]


# --- what the extractive answer prefers ----------------------------------------------------------------------------


def test_a_sentence_holding_what_the_question_asks_for_wins_a_tie():
    doc = Document(id="season", title="Panthers 2015", score=0.9, text=(
        "The Panthers defense intercepted passes all season long. "
        "The Panthers defense made 24 interceptions in the season."
    ))
    answer = extractive_answer("How many interceptions did the Panthers defense make?", [doc], max_sentences=1)
    assert answer.text == "The Panthers defense made 24 interceptions in the season [1]."
    assert answer.info["question_kind"] == "number"


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How many tackles did Luke Kuechly register?", "number"),
        ("When was the treaty signed?", "time"),
        ("In what year did the war end?", "time"),
        ("Who led the Panthers in sacks?", "name"),
        ("Wie viele Sacks erzielte Jared Allen?", "number"),
        ("¿Quién ganó el Super Bowl XLIX?", "name"),
        ("Why is the second timeline needed?", None),
    ],
)
def test_question_kind(question, kind):
    from agentsearch.pipeline.job.answer import question_kind

    assert question_kind(question) == kind


def test_an_initial_does_not_end_a_sentence():
    doc = Document(id="hymn", title="Hymn", score=0.9, text=(
        "Luther wrote the hymn in 1523. It is known in English by John C. Messenger's translation. It is sung widely."
    ))
    answer = extractive_answer("Who translated the hymn into English?", [doc], max_sentences=1)
    assert answer.text == "It is known in English by John C. Messenger's translation [1]."


def test_embedding_similarity_decides_between_sentences_that_cover_the_query_alike():
    doc = Document(id="parl", title="Parliament", score=0.9,
                   text="The parliament meets in Bern. The parliament meets in spring.")

    def embed(texts):
        # The query and the "spring" sentence point the same way; the "Bern" one does not.
        return [[1.0, 0.0] if ("details" in t or "spring" in t) else [0.0, 1.0] for t in texts]

    query = "parliament meeting details"
    assert extractive_answer(query, [doc], max_sentences=1).text == "The parliament meets in Bern [1]."
    with_embed = extractive_answer(query, [doc], max_sentences=1, embed=embed)
    assert with_embed.text == "The parliament meets in spring [1]."
    assert with_embed.info["scoring"] == "embedding+lexical"


def test_a_failing_embedding_falls_back_to_lexical_scoring_and_says_so():
    def broken(texts):
        raise RuntimeError("model not loaded")

    answer = extractive_answer("When must parking permits be renewed?", DOCS, max_sentences=1, embed=broken)
    assert answer.text == "Parking permits must be renewed in January [3]."
    assert answer.info["scoring"] == "lexical"
    assert "model not loaded" in answer.info["embedding_error"]


def test_a_sentence_found_in_two_documents_is_cited_once_from_the_better_one():
    same = "Parking permits must be renewed in January."
    docs = [Document(id="a", title="A", score=0.9, text=same), Document(id="b", title="B", score=0.8, text=same)]
    answer = extractive_answer("parking permits renewed", docs, max_sentences=3)
    assert answer.text == "Parking permits must be renewed in January [1]."


@pytest.mark.parametrize("text, sentences", [
    # Chinese and Japanese end a sentence at 。！？ with no space after it; a closing quote stays with its sentence.
    ("超级碗50是一场比赛。丹佛野马队赢得了冠军！他们说：「好。」然后离开",
     ["超级碗50是一场比赛。", "丹佛野马队赢得了冠军！", "他们说：「好。」", "然后离开"]),
    ("東京は日本の首都です。人口は多いです。", ["東京は日本の首都です。", "人口は多いです。"]),
    # Scripts without capitals end one at their full stops before their own letters or a digit.
    ("सुपर बाउल 50 एक खेल था। डेनवर ने जीता। 24-10 से।", ["सुपर बाउल 50 एक खेल था।", "डेनवर ने जीता।", "24-10 से।"]),
    ("فاز دنفر برونكو. كانت النتيجة 24-10؟ نعم.", ["فاز دنفر برونكو.", "كانت النتيجة 24-10؟", "نعم."]),
    # Cased scripts before a capital, theirs included; a lower-case word after a stop goes on.
    ("Денвер выиграл. Счёт был 24:10. Ελλάδα. Όχι.", ["Денвер выиграл.", "Счёт был 24:10.", "Ελλάδα.", "Όχι."]),
    ("It sold well, e.g. in spring. Then it stopped.", ["It sold well, e.g. in spring.", "Then it stopped."]),
])
def test_sentences_end_where_each_script_ends_them(text, sentences):
    from agentsearch.pipeline.text.spans import sentence_spans

    assert split_sentences(text) == sentences
    assert [text[s.start:s.end] for s in sentence_spans(text)] == sentences  # offsets into the text itself
