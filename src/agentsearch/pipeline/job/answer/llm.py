"""The LLM's draft of an answer: one chat completion over the numbered sources, read as sentences, each with the
source numbers the model gave it. The draft is not the answer: ``agentsearch.pipeline.job.answer.grounding`` judges
every sentence and decides what is delivered.

The model is asked in the form it can follow best:

- **structured** (``ANSWER_SCHEMA``, sent as ``response_format`` ``json_schema`` where the endpoint honours it):
  ``{"sentences": [{"text": "...", "sources": [1]}]}``, so a citation is a field, not a mark the model must place;
- **plain text** with ``[n]`` marks otherwise (an endpoint that refuses ``response_format``, or
  ``AGENTSEARCH_LLM_STRUCTURED_OUTPUT=false``).

Whatever comes back is read leniently (``read_reply``): the schema's JSON, an ``{"answer": "..."}`` object, a reply
cut short at ``max_tokens`` (its complete sentences kept), or prose with ``[n]`` marks. Citations of sources that do
not exist are dropped and counted. With ``on_sentence`` the reply is streamed and each sentence is handed over as
soon as it is complete (``SentenceReader``).

Usage::

    draft = draft_answer(llm, query, documents, with_cot=False, timeout_s=60)
    draft.sentences   # [LLMSentence(text="The Broncos won.", cited=[1]), ...]
    draft.info        # {"model": ..., "format": "json", "finish_reason": "stop", "dropped_citations": []}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.answer.citations import citation_numbers, cited_sentences
from agentsearch.pipeline.job.answer.grounding import LLMSentence
from agentsearch.pipeline.job.answer.result import ANSWER_LLM_TIMEOUT_S

SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources you are given.\n"
    "- Answer in one to three short sentences. Do not use outside knowledge.\n"
    "- Copy names, numbers and dates exactly as the sources write them.\n"
    "- Give each sentence the numbers of the sources that say it.\n"
    "- If the sources do not contain the answer, give no sentence.\n"
)
FORMAT_STRUCTURED = 'Reply with a JSON object: {"sentences": [{"text": "<a sentence>", "sources": [<source number>]}]}'
FORMAT_STRUCTURED_COT = (
    'Reply with a JSON object: {"steps": ["<a short reasoning step>", ...], "sentences": [{"text": "<a sentence>", '
    '"sources": [<source number>]}]} where "steps" lead from the sources to the answer.'
)
FORMAT_TEXT = ("Reply in plain text. End each sentence with the numbers of its sources in square brackets: [1] or "
               "[1][3].")
# The answer's length is bounded twice: by the schema (sentences, their length) and by the reply's tokens.
MAX_SENTENCES = 3
MAX_SENTENCE_CHARS = 300
MAX_STEPS = 4
# Three sentences of 300 characters and the JSON around them; the reasoning steps get room of their own. A small
# model fills whatever room it is given, and every token costs the user time.
ANSWER_MAX_TOKENS = 320
STEPS_MAX_TOKENS = 256

_SENTENCE_ITEM = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": MAX_SENTENCE_CHARS},
                   "sources": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
    "required": ["text", "sources"],
}
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sentences": {"type": "array", "items": _SENTENCE_ITEM, "maxItems": MAX_SENTENCES}},
    "required": ["sentences"],
}
ANSWER_SCHEMA_COT: dict[str, Any] = {
    "type": "object",
    "properties": {"steps": {"type": "array", "items": {"type": "string", "maxLength": MAX_SENTENCE_CHARS},
                             "maxItems": MAX_STEPS},
                   "sentences": ANSWER_SCHEMA["properties"]["sentences"]},
    "required": ["steps", "sentences"],
}

_CITATION = re.compile(r"\s?\[(\s*\d+\s*(?:(?:,|;|-|–)\s*\d+\s*)*)\]")
# One complete item of the schema's "sentences" array, as it stands in the raw reply (the schema fixes the order
# of its keys): what a reply cut short, or still streaming, already holds.
_ITEM = re.compile(r'\{\s*"text"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"sources"\s*:\s*\[([^\]]*)\]\s*\}')
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*("(?:[^"\\]|\\.)*)', re.DOTALL)


@dataclass
class Draft:
    """The model's answer as sentences, its reasoning steps (with ``with_cot``), and what happened."""

    sentences: list[LLMSentence]
    steps: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def reply_tokens(with_cot: bool) -> int:
    return ANSWER_MAX_TOKENS + (STEPS_MAX_TOKENS if with_cot else 0)


def build_messages(query: str, documents: list[Document], with_cot: bool, structured: bool,
                   llm=None) -> tuple[list[dict[str, str]], str | None]:
    """The prompt, and a note when the sources had to be cut to fit the model's context. With ``llm`` the sources
    are fitted in tokens (``agentsearch.pipeline.platform.prompt_budget``): the best-ranked keep the most."""
    from agentsearch.pipeline.platform.llm import LLMError
    from agentsearch.pipeline.platform.prompt_budget import fit_texts

    form = (FORMAT_STRUCTURED_COT if with_cot else FORMAT_STRUCTURED) if structured else FORMAT_TEXT
    system = {"role": "system", "content": SYSTEM_PROMPT + form}
    blocks = [f"[{n}]{f' {doc.title}' if doc.title else ''}\n{' '.join(doc.text.split())}"
              for n, doc in enumerate(documents, start=1)]
    question = f"\n\nQuestion: {query}"
    note = None
    if llm is not None:
        fitted = fit_texts(llm, [system, {"role": "user", "content": "Sources:\n\n" + question}], blocks,
                           reply_tokens=reply_tokens(with_cot))
        if not fitted.fits:
            raise LLMError("the question and the reply alone do not fit the model's context")
        blocks, note = list(fitted.texts), fitted.note()
    user = "Sources:\n\n" + "\n\n".join(blocks) + question
    return [system, {"role": "user", "content": user}], note


def _numbers(raw: Any) -> list[int]:
    """Source numbers as a model may write them: ``[1, 2]``, ``["1", "[2]"]``, ``1``, ``"1, 2"``."""
    items = raw if isinstance(raw, list) else [raw]
    out: list[int] = []
    for item in items:
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            out.append(item)
        elif isinstance(item, str):
            out.extend(citation_numbers(item.strip().strip("[]")) if re.fullmatch(r"[\s\[\]\d,;–-]+", item) else [])
    return out


def _sentence(text: str, numbers: list[int], n_sources: int, dropped: list[int]) -> LLMSentence | None:
    """One sentence: marks written inside its text moved to its numbers, numbers of no source dropped."""
    for m in _CITATION.finditer(text):
        numbers = [*numbers, *citation_numbers(m.group(1))]
    text = re.sub(r"\s+([.,;:!?])", r"\1", _CITATION.sub("", text)).strip()
    if not re.search(r"\w", text):
        return None
    dropped.extend(n for n in numbers if not 1 <= n <= n_sources)
    return LLMSentence(text, list(dict.fromkeys(n for n in numbers if 1 <= n <= n_sources)))


def _prose(text: str, n_sources: int, dropped: list[int]) -> list[LLMSentence]:
    out = []
    for claim in cited_sentences(text, n_sources=10**6, keep_uncited=True):
        s = _sentence(claim.sentence, [], n_sources, dropped)
        if s is not None:
            out.append(s)
    return out


def read_reply(reply: str, n_sources: int) -> tuple[list[LLMSentence], list[str], str, list[int]]:
    """(sentences, steps, format, dropped citation numbers) from the model's whole reply. Format: ``json`` (the
    schema), ``json_answer`` (``{"answer": ...}``), ``json_salvaged`` (cut short; its complete sentences),
    ``text`` (prose), ``json_broken`` (JSON with nothing usable)."""
    from agentsearch.pipeline.platform.llm import LLMError, parse_json_reply

    dropped: list[int] = []
    stripped = reply.strip()
    try:
        data = parse_json_reply(stripped) if stripped else None
    except LLMError:
        data = None
    if isinstance(data, dict) and not ({"sentences", "answer"} & data.keys()) and _ITEM.search(stripped):
        data = None  # a reply cut short: the value found is one of its items, read below with the others
    if isinstance(data, dict):
        steps = [s.strip() for s in data.get("steps") or [] if isinstance(s, str) and s.strip()]
        if isinstance(data.get("sentences"), list):
            out = []
            for item in data["sentences"]:
                text = item.get("text") if isinstance(item, dict) else item
                numbers = _numbers(item.get("sources", [])) if isinstance(item, dict) else []
                if isinstance(text, str) and (s := _sentence(text, numbers, n_sources, dropped)):
                    out.append(s)
            return out, steps, "json", dropped
        if isinstance(data.get("answer"), str):
            return _prose(data["answer"], n_sources, dropped), steps, "json_answer", dropped
        return [], steps, "json_broken", dropped
    if re.match(r"(?:```(?:json)?\s*)?[{\[]", stripped):
        items = list(_ITEM.finditer(stripped))
        if items:
            out = [s for m in items
                   if (s := _sentence(json.loads(m.group(1)), _numbers(m.group(2).split(",")), n_sources, dropped))]
            return out, [], "json_salvaged", dropped
        if found := _ANSWER_FIELD.search(stripped):
            raw = found.group(1)
            try:
                text = json.loads(raw if raw.endswith('"') and len(raw) > 1 else raw + '"')
            except json.JSONDecodeError:
                text = raw.strip('"')
            return _prose(text, n_sources, dropped), [], "json_salvaged", dropped
        return [], [], "json_broken", dropped
    return _prose(stripped, n_sources, dropped), [], "text", dropped


class SentenceReader:
    """Fed a reply's pieces as they stream in, gives back each sentence once it is complete: a closed item of the
    schema's array, or in prose a sentence once the next one has begun (``close`` gives the last)."""

    def __init__(self, n_sources: int) -> None:
        self.n_sources = n_sources
        self.raw = ""
        self.given = 0
        self.dropped: list[int] = []

    def feed(self, piece: str) -> list[LLMSentence]:
        self.raw += piece
        return self._ready(final=False)

    def close(self) -> list[LLMSentence]:
        return self._ready(final=True)

    def _ready(self, final: bool) -> list[LLMSentence]:
        lead = self.raw.lstrip()
        if not lead:
            return []
        if lead[0] in "{[`":
            found: list[LLMSentence] = []
            for m in _ITEM.finditer(self.raw):
                try:
                    text = json.loads(m.group(1))
                except json.JSONDecodeError:
                    continue
                if s := _sentence(text, _numbers(m.group(2).split(",")), self.n_sources, []):
                    found.append(s)
        else:
            found = _prose(self.raw, self.n_sources, [])
            if not final:
                found = found[:-1]  # the last may still grow
        new, self.given = found[self.given:], max(self.given, len(found))
        return new


def split_runs(sentences: list[LLMSentence]) -> list[LLMSentence]:
    """Each item of the reply that holds several sentences (a model that pastes a passage) as its sentences, each with
    the item's citations, so each is judged on its own; a last piece cut off by the schema's length (no end mark, the
    item at ``MAX_SENTENCE_CHARS``) is dropped, as a reply cut short keeps only its complete sentences."""
    from agentsearch.pipeline.text.spans import sentence_spans

    out: list[LLMSentence] = []
    for sentence in sentences:
        pieces = [p.text for p in sentence_spans(sentence.text)]
        if len(pieces) < 2:
            out.append(sentence)
            continue
        if len(sentence.text) >= MAX_SENTENCE_CHARS - 2 and pieces[-1].rstrip()[-1:] not in ".!?。":
            pieces = pieces[:-1]
        out.extend(LLMSentence(p, list(sentence.cited)) for p in pieces)
    return out


def draft_answer(llm, query: str, documents: list[Document], with_cot: bool = False,
                 timeout_s: float = ANSWER_LLM_TIMEOUT_S,
                 on_sentence: Callable[[LLMSentence], None] | None = None) -> Draft:
    """Ask the LLM over numbered sources; its reply read as sentences (see the module docstring). Raises
    ``LLMError`` when the endpoint gives no reply; an empty draft (no sentence) is the caller's to judge."""
    structured = bool(getattr(llm, "structured_output", False))
    schema = (ANSWER_SCHEMA_COT if with_cot else ANSWER_SCHEMA) if structured else None
    messages, fitted = build_messages(query, documents, with_cot, structured=structured, llm=llm)
    max_tokens = reply_tokens(with_cot)
    finish_reason = None
    if on_sentence is None:
        got = llm.reply(messages, timeout_s=timeout_s, temperature=0.0, max_tokens=max_tokens, json_schema=schema)
        reply, finish_reason = got.text, got.finish_reason
    else:
        reader = SentenceReader(len(documents))
        pieces: list[str] = []
        for piece in llm.stream(messages, timeout_s=timeout_s, temperature=0.0, max_tokens=max_tokens,
                                json_schema=schema):
            pieces.append(piece)
            for sentence in reader.feed(piece):
                on_sentence(sentence)
        for sentence in reader.close():
            on_sentence(sentence)
        reply = "".join(pieces)
    sentences, steps, fmt, dropped = read_reply(reply, len(documents))
    sentences = split_runs(sentences)
    info: dict[str, Any] = {"model": getattr(llm, "model", None), "format": fmt,
                            "structured": schema is not None, "dropped_citations": dropped}
    if finish_reason:
        info["finish_reason"] = finish_reason
    if fitted:
        info["sources_fitted"] = fitted
    if not sentences:
        info["empty_reply"] = reply[:200]
    return Draft(sentences, steps, info)
