"""Format invariance: the same paragraphs found as well in uploaded files of every format as when each paragraph
is a JSON Lines document of its own.

XQuAD's paragraphs come in articles of five (ids ``a00p0`` .. ``a00p4``, one ``title`` per article). Each article is
rendered into one file of each format, one paragraph per place (``agentsearch.pipeline.eval.article_files``). The files
are uploaded to a real stack, a collection per format, and every development question is asked as a job
(``POST /v1/search``, no agents, top 5).

A question is found in a format when its gold place is among the top-5 sources: the article's file
(``document_id``, the file's name without its extension) at the gold paragraph's page, slide, row or section. A
source is one per document, at its best chunk, so finding the article at another paragraph's place is a miss. The
score of a format is that fraction divided by the baseline's: the fraction of questions whose gold paragraph is
among the top 5 when every paragraph is uploaded as a JSON Lines document of its own, on the same stack.

Usage::

    place_found("xlsx", 3, {"sheet": "Paragraphs", "rows": [4, 5]}) # True: the row of paragraph 3 is row 5
    report = run_on_stack(Path("/tmp/formats"), ["pdf", "docx"], questions=200)   #
    src/agentsearch/bench/format_invariance.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsearch.pipeline.eval.article_files import PARAGRAPH_ID, SCANS, Article, heading, split_paragraph_id

REPO = Path(__file__).resolve().parents[4]
XQUAD = REPO.parent / "shared" / "eval" / "xquad"
TOP_K = 5
GOALS = {"born_digital": 0.95, "scan": 0.90}
# The place of paragraph k (0-based) in each kind of file.
PAGED = {"pdf": "page", "scan": "page", "scan-ru": "page", "pptx": "slide"}
ROWS = ("xlsx", "csv")
SECTIONS = ("docx", "html", "markdown")
UPLOAD_FILES = 20
UPLOAD_BYTES = 60 * 2**20


# -- scoring ----------------------------------------------------------------------------------------------------------

def gold_place(file_format: str, index: int) -> dict[str, Any]:
    """Where paragraph ``index`` (0-based) of an article is in its file of ``file_format``."""
    if file_format in PAGED:
        return {PAGED[file_format]: index + 1}
    if file_format in ROWS:
        return {"row": index + 2}  # under the header row
    if file_format in SECTIONS:
        return {"section": heading(index)}
    raise ValueError(f"unknown format {file_format!r}")


def place_found(file_format: str, index: int, location: dict[str, Any] | None) -> bool:
    """Whether a source's ``location`` is paragraph ``index``'s place: the same page or slide; the same row, or a
    chunk of rows that holds it (the sheet is not compared: every file has one); a section whose last heading is the
    paragraph's (the article's title may stand above it)."""
    location = location or {}
    want = gold_place(file_format, index)
    if "row" in want:
        rows = location.get("rows")
        if isinstance(rows, list | tuple) and len(rows) == 2:
            return rows[0] <= want["row"] <= rows[1]
        return location.get("row") == want["row"]
    if "section" in want:
        return str(location.get("section") or "").split(" > ")[-1].strip() == want["section"]
    key = next(iter(want))
    return location.get(key) == want[key]


@dataclass(frozen=True)
class Asked:
    """One question asked of a collection: its gold paragraph, and the job's top sources as
    ``(document_id, location)``, best first (``None`` when the job failed)."""

    question_id: str
    text: str
    gold: str
    sources: tuple[tuple[str, dict[str, Any] | None], ...] | None


def sources_of(job: dict[str, Any]) -> tuple[tuple[str, dict[str, Any] | None], ...] | None:
    """A finished job's ``(document_id, location)`` pairs, best first; None for a job that did not succeed."""
    if job.get("status") != "succeeded":
        return None
    return tuple((s["document_id"], s.get("location")) for s in (job.get("response") or {}).get("sources") or [])


def best_of_article(question: Asked, k: int = TOP_K) -> str | None:
    """The first paragraph of the gold paragraph's article among a baseline question's top ``k`` (None if none):
    what the baseline's ranking says when, as with files, a document gives one source, its best chunk."""
    article = split_paragraph_id(question.gold)[0]
    return next((d for d, _ in (question.sources or ())[:k]
                 if PARAGRAPH_ID.match(d) and split_paragraph_id(d)[0] == article), None)


def score_baseline(asked: Iterable[Asked], k: int = TOP_K) -> dict[str, Any]:
    """The share of questions whose gold paragraph is among the top ``k`` paragraphs; whose gold article is (a
    paragraph of it); and whose gold paragraph is its article's first paragraph there (``best_of_article``)."""
    found = article = first = failed = total = 0
    for question in asked:
        total += 1
        if question.sources is None:
            failed += 1
            continue
        found += question.gold in [document for document, _ in question.sources[:k]]
        best = best_of_article(question, k)
        article += best is not None
        first += best == question.gold
    return {"questions": total, "found": found, "fraction": _share(found, total),
            "article_fraction": _share(article, total), "best_of_article_fraction": _share(first, total),
            "failed_jobs": failed}


def score_format(file_format: str, asked: Iterable[Asked], names: dict[str, str], k: int = TOP_K,
                 examples: int = 8, baseline: dict[str, Asked] | None = None) -> dict[str, Any]:
    """The share of questions whose gold place (the article's document at the paragraph's place) is among the top
    ``k`` sources; misses told apart: the article found at another place (with the places found), or not found.
    With the ``baseline``'s questions (by id): of the misses at another place, how many the baseline ranks the same
    way (another paragraph of the article before the gold one: lost because a document gives one source), and the
    questions the baseline finds and the format does not, and the other way round."""
    found = wrong_place = failed = total = sibling_first = lost = gained = 0
    places: dict[str, int] = {}
    missed: list[dict[str, Any]] = []
    for question in asked:
        total += 1
        if question.sources is None:
            failed += 1
            continue
        article, index = split_paragraph_id(question.gold)
        document = names[article]
        at_article = [location for d, location in question.sources[:k] if d == document]
        hit = any(place_found(file_format, index, location) for location in at_article)
        base = (baseline or {}).get(question.question_id)
        base_hit = base is not None and question.gold in [d for d, _ in (base.sources or ())[:k]]
        lost += base_hit and not hit
        gained += hit and base is not None and not base_hit
        if hit:
            found += 1
            continue
        if at_article:
            wrong_place += 1
            what = _place_name(at_article[0])
            places[what] = places.get(what, 0) + 1
            sibling_first += base is not None and best_of_article(base, k) not in (None, question.gold)
        if len(missed) < examples:
            missed.append({"question": question.text, "gold": {"document_id": document,
                                                               **gold_place(file_format, index)},
                           "found": [{"document_id": d, "location": location}
                                     for d, location in question.sources[:k]],
                           **({"baseline_top": [d for d, _ in (base.sources or ())[:k]]} if base else {})})
    return {"questions": total, "found": found, "fraction": _share(found, total),
            "article_fraction": _share(found + wrong_place, total),
            "article_at_wrong_place": wrong_place, "wrong_places": dict(sorted(places.items())),
            "wrong_place_as_in_baseline": sibling_first, "lost_against_baseline": lost,
            "gained_against_baseline": gained, "failed_jobs": failed, "missed_examples": missed}


def ratio(format_score: dict[str, Any], baseline_score: dict[str, Any]) -> float | None:
    """A format's fraction over the baseline's (None when the baseline found nothing)."""
    base = baseline_score["fraction"]
    return round(format_score["fraction"] / base, 4) if base else None


def goal_of(file_format: str) -> float:
    return GOALS["scan"] if file_format in SCANS else GOALS["born_digital"]


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _place_name(location: dict[str, Any] | None) -> str:
    """A location as a short key: ``page 2``, ``rows 3-4``, ``section Super Bowl 50``, ``none``."""
    if not location:
        return "none"
    if "rows" in location:
        return f"rows {location['rows'][0]}-{location['rows'][1]}"
    key = next((k for k in ("page", "slide", "row", "section") if k in location), None)
    return f"{key} {location[key]}" if key else json.dumps(location, sort_keys=True)


# -- the run on a stack -----------------------------------------------------------------------------------------------

def language_of(file_format: str) -> str:
    return "ru" if file_format == "scan-ru" else "en"


def baseline_jsonl(articles: list[Article]) -> bytes:
    """Every paragraph as a JSON Lines document of its own, with its article's title."""
    return "".join(json.dumps({"id": pid, "title": a.title, "text": text}, ensure_ascii=False) + "\n"
                   for a in articles for pid, text in a.paragraphs).encode("utf-8")


def upload_batches(files: list[tuple[str, bytes]], most_files: int = UPLOAD_FILES,
                   most_bytes: int = UPLOAD_BYTES) -> list[list[tuple[str, bytes]]]:
    """``files`` in order, as requests of at most ``most_files`` files and ``most_bytes`` each (a larger file alone)."""
    batches: list[list[tuple[str, bytes]]] = []
    for item in files:
        full = bool(batches) and (len(batches[-1]) == most_files
                                  or sum(len(d) for _, d in batches[-1]) + len(item[1]) > most_bytes)
        if not batches or full:
            batches.append([])
        batches[-1].append(item)
    return batches


def upload(http, name: str, files: list[tuple[str, bytes]], timeout_s: float = 7200, poll_s: float = 1.0
           ) -> dict[str, Any]:
    """A new collection with ``files`` uploaded (requests of at most ``UPLOAD_FILES`` files and ``UPLOAD_BYTES``),
    waited for until no document is pending: its id, the documents' counts and the seconds it took."""
    created = http.post("/v1/collections", json={"name": name})
    created.raise_for_status()
    collection_id = created.json()["id"]
    started = time.monotonic()
    for batch in upload_batches(files):
        answer = http.post(f"/v1/collections/{collection_id}/files",
                           files=[("files", (file_name, data)) for file_name, data in batch])
        if answer.status_code != 202:
            raise RuntimeError(f"{name}: upload refused ({answer.status_code}): {answer.text[:500]}")
    deadline = time.monotonic() + timeout_s
    while True:
        counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
        if counts["pending"] == 0:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: indexing stuck: {counts}")
        time.sleep(poll_s)
    failed = []
    if counts.get("failed"):
        listed = http.get(f"/v1/collections/{collection_id}/documents", params={"limit": 200}).json()
        failed = [{"document_id": d.get("id") or d.get("external_id"), "error": d.get("error")}
                  for d in listed.get("items", []) if d.get("status") == "failed"]
    return {"collection_id": collection_id, "documents": counts, "failed": failed,
            "seconds": round(time.monotonic() - started, 1)}


def ask_all(http, collection_id: str, questions: list[tuple[str, str, str]], in_flight: int = 4,
            timeout_s: float = 300, progress: Callable[[int], None] | None = None,
            search: dict[str, Any] | None = None) -> list[Asked]:
    """Every question as a job on the collection (no agents, top ``TOP_K``, the job's retrieval overrides
    ``search`` when given), ``in_flight`` at a time."""
    pending: dict[str, tuple[int, float]] = {}
    results: list[Asked | None] = [None] * len(questions)
    next_question = 0
    while next_question < len(questions) or pending:
        while next_question < len(questions) and len(pending) < in_flight:
            _, text, _ = questions[next_question]
            body = {"collection_id": collection_id, "query": text, "top_k": TOP_K, "agents": [], "use_cache": False}
            answer = http.post("/v1/search", json={**body, **({"search": search} if search else {})})
            if answer.status_code not in (200, 202):
                raise RuntimeError(f"search refused ({answer.status_code}): {answer.text[:300]}")
            pending[answer.json()["job_id"]] = (next_question, time.monotonic())
            next_question += 1
        time.sleep(0.05)
        for job_id, (number, sent) in list(pending.items()):
            job = http.get(f"/v1/jobs/{job_id}").json()
            if job["status"] not in ("succeeded", "failed", "cancelled") and time.monotonic() - sent < timeout_s:
                continue
            question_id, text, gold = questions[number]
            results[number] = Asked(question_id, text, gold, sources_of(job))
            del pending[job_id]
            if progress:
                progress(1)
    return [r for r in results if r is not None]


def runs_of(asked: list[Asked]) -> dict[str, Any]:
    """Each question's top sources as JSON (``[[document_id, location], ...]``, null for a failed job)."""
    return {q.question_id: None if q.sources is None else [list(pair) for pair in q.sources] for q in asked}
