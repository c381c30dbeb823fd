"""The LLM's answer: one chat completion over the numbered sources, its reply checked (citations of sources that
do not exist are dropped; what happened is recorded in ``Answer.info``).

Usage::

    answer = llm_answer(LLMClient.from_settings(settings), query, documents, with_cot=True)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pipeline.documents import CotStep, Document
from pipeline.job.answer.reply_text import ReplyTextFilter
from pipeline.job.answer.result import ANSWER_LLM_TIMEOUT_S, MAX_SOURCE_CHARS, Answer, sources_of

SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources you are given.\n"
    "- Support every statement with the numbers of the sources it comes from, in square brackets: [1], or [1][3].\n"
    "- Cite only source numbers from the list. Do not use outside knowledge.\n"
    "- Quote names, numbers and dates exactly as the sources write them. Be concise.\n"
    "- If the sources do not contain the answer, say so.\n"
)
FORMAT_PLAIN = 'Reply with only a JSON object: {"answer": "<the answer, with [n] citations>"}'
FORMAT_COT = (
    'Reply with only a JSON object: {"answer": "<the answer, with [n] citations>", '
    '"steps": ["<reasoning step>", ...]} where "steps" are the short reasoning steps that lead from the sources to '
    "the answer, each citing the sources it uses."
)

_CITATION = re.compile(r"\s?\[(\s*\d+\s*(?:(?:,|;|-|–)\s*\d+\s*)*)\]")
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


def build_messages(query: str, documents: list[Document], with_cot: bool,
                   max_source_chars: int = MAX_SOURCE_CHARS) -> list[dict[str, str]]:
    blocks = []
    for n, doc in enumerate(documents, start=1):
        text = " ".join(doc.text.split())
        if len(text) > max_source_chars:
            text = text[:max_source_chars].rsplit(" ", 1)[0] + " …"
        title = f" {doc.title}" if doc.title else ""
        blocks.append(f"[{n}]{title}\n{text}")
    user = "Sources:\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {query}"
    return [
        {"role": "system", "content": SYSTEM_PROMPT + (FORMAT_COT if with_cot else FORMAT_PLAIN)},
        {"role": "user", "content": user},
    ]


def citation_numbers(inner: str) -> list[int]:
    """The source numbers inside one citation's brackets: ``"1, 3-5"`` -> ``[1, 3, 4, 5]``."""
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inner.strip()):
        bounds = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x.strip()]
        if len(bounds) == 2 and 0 < bounds[1] - bounds[0] <= 50:
            out.extend(range(bounds[0], bounds[1] + 1))
        else:
            out.extend(bounds)
    return out


def clean_citations(text: str, n_sources: int) -> tuple[str, list[int], list[int]]:
    """Drop citations of sources that do not exist. Returns (text, cited numbers kept, numbers dropped)."""
    kept: list[int] = []
    dropped: list[int] = []

    def replace(match: re.Match) -> str:
        lead = match.group(0)[: len(match.group(0)) - len(match.group(0).lstrip())]
        cited = citation_numbers(match.group(1))
        good = [c for c in cited if 1 <= c <= n_sources]
        dropped.extend(c for c in cited if not 1 <= c <= n_sources)
        kept.extend(c for c in good if c not in kept)
        if not good:
            return ""
        if len(good) == len(cited):
            return match.group(0)
        return lead + "".join(f"[{c}]" for c in dict.fromkeys(good))

    cleaned = _CITATION.sub(replace, text)
    cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned) if dropped else cleaned
    return cleaned.strip(), sorted(kept), dropped


def _parse_reply(reply: str) -> tuple[str | None, Any, str]:
    """(answer text, raw steps, format) from the model's reply; answer None when there is none to use."""
    from pipeline.platform.llm import LLMError, parse_json_reply

    stripped = reply.strip()
    try:
        data = parse_json_reply(stripped)
    except LLMError:
        data = None
    if isinstance(data, dict):
        answer = data.get("answer")
        if isinstance(answer, str) and answer.strip():
            return answer.strip(), data.get("steps"), "json"
        return None, None, "json"
    unfenced = re.sub(r"^```\w*\s*", "", stripped)
    if data is not None and unfenced.startswith("["):  # a JSON list: not the shape asked for
        return None, None, "json"
    # (Otherwise a "JSON value" found inside prose is just a citation like "[2]": the reply is prose.)
    # Not JSON. A reply cut short inside the JSON still holds its answer; otherwise the model answered in prose.
    if re.match(r"(?:```(?:json)?\s*)?\{", stripped):
        found = _ANSWER_FIELD.search(stripped)
        if found and found.group(1).strip():
            try:
                text = json.loads(f'"{found.group(1)}"')
            except json.JSONDecodeError:
                text = found.group(1)
            return text.strip(), None, "json_salvaged"
        return None, None, "json_broken"
    return stripped or None, None, "text"


def _steps(raw: Any, documents: list[Document]) -> list[CotStep]:
    if not isinstance(raw, list):
        return []
    steps = []
    for item in raw:
        if isinstance(item, dict):
            thought = item.get("thought") or item.get("text") or item.get("step") or ""
        else:
            thought = item
        if not isinstance(thought, str) or not thought.strip():
            continue
        thought, cited, _ = clean_citations(thought.strip(), len(documents))
        steps.append(CotStep(step=len(steps) + 1, thought=thought, evidence=[documents[c - 1].id for c in cited]))
    return steps


def llm_answer(llm, query: str, documents: list[Document], with_cot: bool = False,
               timeout_s: float = ANSWER_LLM_TIMEOUT_S, on_text: Callable[[str], None] | None = None) -> Answer:
    """Ask the LLM, over numbered sources. Raises ``LLMError`` when there is no usable answer in its reply.

    With ``on_text`` the reply is streamed and the answer's text handed to it piece by piece as it arrives
    (``ReplyTextFilter``); the answer returned is still parsed and checked on the whole reply."""
    from pipeline.platform.llm import LLMError

    messages = build_messages(query, documents, with_cot)
    if on_text is None:
        reply = llm.complete(messages, timeout_s=timeout_s, temperature=0.0)
    else:
        shown = ReplyTextFilter()
        pieces: list[str] = []
        for piece in llm.stream(messages, timeout_s=timeout_s, temperature=0.0):
            pieces.append(piece)
            if text := shown.feed(piece):
                on_text(text)
        reply = "".join(pieces)
    text, raw_steps, fmt = _parse_reply(reply)
    if text is None:
        raise LLMError(f"LLM reply held no answer ({fmt}): {reply[:200]!r}")
    text, cited, dropped = clean_citations(text, len(documents))
    if not text:
        raise LLMError(f"LLM answer was empty once invalid citations were dropped: {reply[:200]!r}")
    steps = _steps(raw_steps, documents) if with_cot else []
    info: dict[str, Any] = {"model": getattr(llm, "model", None), "format": fmt, "citations": cited,
                            "dropped_citations": dropped}
    if with_cot and not steps:
        info["steps_missing"] = True
    return Answer(text, sources_of(documents), steps, method="llm", info=info)
