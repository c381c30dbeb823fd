"""Answers a person wants to read: a heading, a slide title, a list number or a table's header is never a sentence of
the answer nor glued to one, in every format and script; and the offline answer stops when the next sentence holds
none of the question's terms, or comes from a document the search put far below without a strong score.

The last tests make a Word file, a deck, a PDF, a web page and a Markdown file with numbered headings, upload them to
the embedded app (the real parsers in their child process, the real chunking and embedding model, the job's own
search and answer) and ask the two questions of a new user."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.ingestion.chunking import chunk_parts, chunk_text
from agentsearch.pipeline.job.answer import extractive_answer
from agentsearch.pipeline.job.answer.extractive import STRONG, ScoredSentence, choose_sentences
from agentsearch.pipeline.text import whole_sentences
from agentsearch.pipeline.text.spans import sentence_spans
from agentsearch.pipeline.text.titles import is_title, title_line_ends, without_list_marker, word_count

EXPENSES = "Expense reports above 2,000 euros need the finance director's signature within ten days."
HIRING = "We will hire 40 engineers for the turbine team."
REVENUE = "Revenue grew 12 percent to 4.2 million euros."
ASK_SIGN = "Who must sign expense reports above 2,000 euros?"
ASK_HIRE = "How many engineers will be hired for the turbine team?"
_CITED = re.compile(r"\s*(.+?)\s\[(\d+)\][.!?]")


def delivered(answer: str) -> list[str]:
    return [body for body, _ in _CITED.findall(answer)]


def assert_no_fragment(answer: str) -> None:
    for sentence in delivered(answer):
        assert word_count(sentence) >= 3, (sentence, answer)
        assert not re.match(r"^\(?\d+(?:\.\d+)*[.)]?(\s|$)", sentence), (sentence, answer)


# --- the text layer: titles in every script ------------------------------------------------------------------------

@pytest.mark.parametrize("piece", ["3. Approvals", "1. Booking travel", "Q3 results", "Q4 plan", "3", "3.",
                                   "Approvals.", "Region | Revenue | Growth", "IV. Outlook", "الموافقات",
                                   "٣. الموافقات", "第三季度业绩", "ผลประกอบการไตรมาส 3", "Notes:"])
def test_a_heading_title_number_or_header_is_no_sentence(piece):
    assert is_title(piece)


@pytest.mark.parametrize("piece", [EXPENSES, HIRING, "Revenue rose sharply.", "North | 412 | 12 percent",
                                   "تحتاج تقارير النفقات إلى توقيع المدير.", "收入增长了百分之十二。",
                                   "บริษัทจะจ้างวิศวกร 40 คนสำหรับทีมกังหัน", "Hire forty engineers for the turbine team"])
def test_a_sentence_is_one_in_any_script_with_or_without_an_end_mark(piece):
    assert not is_title(piece)


def test_a_title_line_of_a_pdf_ends_there_but_a_wrapped_line_goes_on():
    page = f"Travel policy\n1. Booking travel\nBook trips through the portal.\n3. Approvals\n{EXPENSES}"
    assert whole_sentences(page) == ["Travel policy", "1. Booking travel", "Book trips through the portal.",
                                     "3. Approvals", EXPENSES]
    assert [s.text for s in sentence_spans(page)] == whole_sentences(page)
    wrapped = "Expense reports above 2,000 euros need the\nFinance director's signature within ten days."
    assert title_line_ends(wrapped) == [] and len(whole_sentences(wrapped)) == 1
    goes_on = "The board met in Hamburg and\nBerlin. It decided."
    assert whole_sentences(goes_on) == ["The board met in Hamburg and\nBerlin.", "It decided."]


def test_a_list_number_opening_a_sentence_is_not_quoted():
    assert without_list_marker("3. Approvals need two signatures.") == "Approvals need two signatures."
    assert without_list_marker("2,000 euros need a signature.") == "2,000 euros need a signature."
    assert without_list_marker("3.") == "3."
    assert without_list_marker("50 engineers joined in May.") == "50 engineers joined in May."


def test_chunks_keep_a_heading_on_its_own_line_and_its_number_with_it():
    parts = [{"start": 0, "end": 0, "location": {"section": "3. Approvals"}}]
    text = f"3. Approvals\n\n{EXPENSES} Smaller reports are signed by the line manager."
    parts[0]["end"] = len(text)
    [(chunk, location)] = chunk_parts(text, parts)
    assert chunk.startswith(f"3. Approvals\n\n{EXPENSES}") and location == {"section": "3. Approvals"}
    # Cut small, the number never leaves its heading, and the heading's break survives the overlap.
    small = chunk_text(f"Intro sentence one here.\n\n3. Approvals\n\n{EXPENSES}", max_chars=70, overlap_chars=40)
    assert all(not c.endswith("3.") for c in small) and any(c.startswith("3. Approvals\n\n") for c in small), small


# --- the extractive answer -----------------------------------------------------------------------------------------

def _docs(*texts: str, scores: tuple[float, ...] | None = None) -> list[Document]:
    scores = scores or tuple(1.0 - 0.05 * i for i in range(len(texts)))
    return [Document(id=f"d{i}", title="", text=t, score=s) for i, (t, s) in enumerate(zip(texts, scores))]


def test_the_new_users_answer_has_no_heading_number_and_no_other_documents_sentence():
    # The text as the readers give it: a blank line after each heading and slide title.
    policy = chunk_text(f"1. Booking travel\n\nBook trips through the travel portal.\n\n3. Approvals\n\n{EXPENSES}")
    deck = chunk_text(f"Q3 results\n\n{REVENUE}\n\nQ4 plan\n\n{HIRING}\n\nThe Hamburg office opens in November.")
    docs = _docs(*policy, *deck)
    answer = extractive_answer(ASK_SIGN, docs).text
    assert answer == EXPENSES.replace("days.", "days [1].")
    hired = extractive_answer(ASK_HIRE, _docs(*deck, *policy)).text
    assert hired.startswith(HIRING.replace("team.", "team [1].")) and "Hamburg" not in hired
    assert_no_fragment(answer)
    assert_no_fragment(hired)


@pytest.mark.parametrize("heading, body, question", [
    ("٣. الموافقات", "تحتاج تقارير النفقات التي تزيد على ألفي يورو إلى توقيع المدير المالي.",
     "من يوقع تقارير النفقات؟"),
    ("ผลประกอบการไตรมาส 3", "บริษัทจะจ้างวิศวกร 40 คนสำหรับทีมกังหันในไตรมาสที่สี่", "บริษัทจะจ้างวิศวกรกี่คน"),
    ("第三节 审批", "超过两千欧元的费用报告需要财务总监签字。", "谁签署费用报告？"),
    ("3. Genehmigungen", "Spesenabrechnungen über 2.000 Euro braucht die Unterschrift der Finanzdirektorin.",
     "Wer unterschreibt Spesenabrechnungen?"),
])
def test_a_heading_in_any_language_is_no_sentence_of_the_answer(heading, body, question):
    docs = _docs(*chunk_text(f"{heading}\n\n{body}"))
    answer = extractive_answer(question, docs, language="auto").text
    assert heading not in answer and answer.startswith(body.rstrip("。.")), answer


def _scored(doc_index: int, score: float, retrieval: float, *terms: str) -> ScoredSentence:
    return ScoredSentence(doc_index, 0, f"s{doc_index}", score=score, lexical=0.2 * len(terms), retrieval=retrieval,
                          terms=frozenset(terms))


def test_a_next_sentence_joins_only_when_it_adds_a_question_term_and_from_far_below_only_when_strong():
    first = _scored(0, 0.8, 1.0, "sign", "expense", "euros")
    no_term = _scored(1, 0.79, 1.0)
    same_terms = _scored(2, 0.5, 1.0, "euros")
    new_term = _scored(3, 0.3, 0.9, "reports")
    assert choose_sentences([first, no_term, same_terms, new_term], 4) == [first, new_term]
    # The first sentence's own document: any question term will do.
    same_document = ScoredSentence(0, 4, "next", score=0.3, lexical=0.1, retrieval=1.0, terms=frozenset({"euros"}))
    assert choose_sentences([first, same_document], 3) == [first, same_document]
    # The sentence right after the first goes on about what it named, with or without the question's words.
    follows = ScoredSentence(0, 1, "it", score=0.3, lexical=0.0, retrieval=1.0)
    elsewhere = ScoredSentence(0, 5, "far", score=0.3, lexical=0.0, retrieval=1.0)
    assert choose_sentences([first, follows, elsewhere], 3) == [first, follows]
    # As good as the first (four fifths of its score), a sentence of the same terms is a second answer.
    as_good = _scored(4, STRONG * 0.8, 1.0, "euros")
    assert choose_sentences([first, as_good], 3) == [first, as_good]
    # From a document the search put under half the first's score, only a strong sentence joins.
    far_weak = _scored(5, STRONG * 0.8 - 0.01, 0.3, "reports")
    far_strong = _scored(6, STRONG * 0.8 + 0.01, 0.3, "director")
    assert choose_sentences([first, far_weak, far_strong], 3) == [first, far_strong]
    # Never more than the best max_sentences, never one from beyond them; the first always.
    assert choose_sentences([first, new_term, far_strong, _scored(7, 0.7, 1.0, "ten")], 2) == [first, new_term]
    assert choose_sentences([no_term], 3) == [no_term] and choose_sentences([], 3) == []


# --- through the embedded app: the real parsers, chunking, model, search and answer ---------------------------------

def _policy_lines() -> list[tuple[str, str]]:
    return [("1. Booking travel", "Employees book flights and hotels through the travel portal two weeks ahead."),
            ("2. Per diems", "Meals abroad are paid at the daily rate of the destination country."),
            ("3. Approvals", EXPENSES)]


def write_policy(folder: Path, kind: str) -> Path:
    """The travel policy as a Word file, a PDF, a web page or a Markdown file, with its numbered headings."""
    lines = _policy_lines()
    path = folder / f"travel-policy.{kind}"
    if kind == "docx":
        from docx import Document as WordDocument

        word = WordDocument()
        word.add_heading("Travel policy", level=0)
        for heading, body in lines:
            word.add_heading(heading, level=1)
            word.add_paragraph(body)
        word.save(str(path))
    elif kind == "pdf":
        from reportlab.lib.pagesizes import A4
        from reportlab.pdfgen import canvas

        sheet = canvas.Canvas(str(path), pagesize=A4)
        y = 780
        sheet.setFont("Helvetica-Bold", 16)
        sheet.drawString(72, y, "Travel policy")
        for heading, body in lines:
            y -= 32
            sheet.setFont("Helvetica-Bold", 13)
            sheet.drawString(72, y, heading)
            y -= 18
            sheet.setFont("Helvetica", 10)
            sheet.drawString(72, y, body)
        sheet.save()
    elif kind == "html":
        sections = "".join(f"<h2>{h}</h2><p>{b}</p>" for h, b in lines)
        path.write_text(f"<html><head><title>Travel policy</title></head><body><main><h1>Travel policy</h1>"
                        f"{sections}</main></body></html>", encoding="utf-8")
    else:
        path.write_text("# Travel policy\n\n" + "".join(f"## {h}\n{b}\n\n" for h, b in lines), encoding="utf-8")
    return path


def write_deck(folder: Path) -> Path:
    from pptx import Presentation

    path = folder / "quarterly-deck.pptx"
    deck = Presentation()
    for title, bullets in (("Q3 results", [REVENUE, "Orders from Denmark doubled."]),
                           ("Q4 plan", [HIRING, "The Hamburg office opens in November."])):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = "\n".join(bullets)
    deck.save(str(path))
    return path


def _wait(client, path: str, done, timeout_s: float = 180) -> dict:
    deadline = time.monotonic() + timeout_s
    while not done(body := client.get(path).json()):
        assert time.monotonic() < deadline, body
        time.sleep(0.2)
    return body


def ask(client, collection_id: str, question: str) -> dict:
    sent = client.post("/v1/search", json={"collection_id": collection_id, "query": question, "use_cache": False})
    assert sent.status_code == 202, sent.text
    job = _wait(client, f"/v1/jobs/{sent.json()['job_id']}", lambda j: j["status"] in ("succeeded", "failed",
                                                                                        "cancelled"))
    assert job["status"] == "succeeded", job.get("error")
    return job


@pytest.mark.parametrize("kind", ["docx", "pdf", "html", "md"])
def test_the_two_questions_are_answered_without_a_fragment_or_an_unrelated_sentence(client, tmp_path, kind):
    collection_id = client.post("/v1/collections", json={"name": f"policy-{kind}"}).json()["id"]
    files = [write_policy(tmp_path, kind), write_deck(tmp_path)]
    sent = client.post(f"/v1/collections/{collection_id}/files",
                       files=[("files", (f.name, f.read_bytes())) for f in files])
    assert sent.status_code == 202, sent.text
    for name in ("travel-policy", "quarterly-deck"):
        document = _wait(client, f"/v1/collections/{collection_id}/documents/{name}",
                         lambda d: d["status"] not in ("pending", "parsing", "indexing"))
        assert document["status"] == "indexed", document

    signed = ask(client, collection_id, ASK_SIGN)["response"]["answer"]
    assert delivered(signed) == [EXPENSES.rstrip(".")], signed
    hired = ask(client, collection_id, ASK_HIRE)["response"]["answer"]
    assert delivered(hired)[0] == HIRING.rstrip("."), hired
    for answer in (signed, hired):
        assert_no_fragment(answer)
        assert not re.search(r"Q[34] (results|plan)|Approvals|Booking travel|Revenue grew|Hamburg", answer), answer
