"""The LLM's entailment check of an answer's citations: one chat completion judges every (sentence, cited source)
pair, and its reply is validated before any verdict is used.

The model is shown the cited sources (numbered as in the answer) and the sentences, each with the numbers it
cites, and asked for JSON: per pair a status (supported, partial, unsupported) and the passage of the source
that says it, copied word for word. A verdict is kept only when it names a pair that was asked about and a known
status; its span is where its quote lies in the source (case and spacing aside). A quote that is not in the
source leaves the span to the offline check's, and the pair says so. A pair the reply leaves out keeps its
offline verdict; so does one whose number the offline check found contradicted. A reply with no usable verdict
at all raises ``LLMError``, and the caller keeps the offline verdicts.

Usage::

    citations, info = entailment_verdicts(llm, claims, documents, offline_citations, timeout_s=20)
    info   # {"model": "...", "llm_verdicts": 3, "llm_missing": 0, "quotes_not_found": 0}
"""

from __future__ import annotations

from typing import Any

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.text.spans import find_loose, squeeze

# How the offline check's reason for a contradicted number begins (``citations``): the model's verdict does not
# overrule it.
CONTRADICTED = "the source states"

SYSTEM_PROMPT = (
    "You check citations. Each numbered claim is a sentence of an answer that cites one or more numbered sources. "
    "For every (claim, cited source) pair, decide from that source's text alone:\n"
    '- "supported": the source says everything the claim says (names, numbers and dates exactly).\n'
    '- "partial": the source says part of the claim, or says it less exactly.\n'
    '- "unsupported": the source does not say it, or says something else (another number, the opposite).\n'
    "Reply with only a JSON object: "
    '{"verdicts": [{"claim": <claim number>, "source": <source number>, "status": "supported|partial|unsupported", '
    '"quote": "<the shortest passage of the source that supports the claim, copied exactly; empty when '
    'unsupported>"}]} with one verdict per pair.'
)
VERDICTS_SCHEMA = {
    "type": "object",
    "properties": {"verdicts": {"type": "array", "items": {
        "type": "object",
        "properties": {"claim": {"type": "integer"}, "source": {"type": "integer"},
                       "status": {"enum": ["supported", "partial", "unsupported"]}, "quote": {"type": "string"}},
        "required": ["claim", "source", "status", "quote"]}}},
    "required": ["verdicts"],
}
# Offline and LLM verdicts share one score scale; a model's verdict carries no graded confidence of its own.
STATUS_SCORE = {"supported": 1.0, "partial": 0.5, "unsupported": 0.0}


def reply_tokens(claims) -> int:
    """Room for the reply: a verdict with its short quote per (claim, source) pair."""
    return 64 + 96 * sum(len(c.sources) for c in claims)


def build_messages(claims, documents: list[Document], llm=None) -> list[dict[str, str]]:
    """The prompt; with ``llm`` the cited sources are fitted in tokens to the model's context beside the claims
    and the reply (``agentsearch.pipeline.platform.prompt_budget``)."""
    from agentsearch.pipeline.platform.llm import LLMError
    from agentsearch.pipeline.platform.prompt_budget import fit_texts

    cited = sorted({n for c in claims for n in c.sources})
    blocks = [f"[{n}]\n{squeeze(documents[n - 1].text)}" for n in cited]
    lines = [f"{i}. (cites {', '.join(f'[{n}]' for n in c.sources)}) {c.text}" for i, c in enumerate(claims, 1)]
    system = {"role": "system", "content": SYSTEM_PROMPT}
    tail = "\n\nClaims:\n" + "\n".join(lines)
    if llm is not None:
        fitted = fit_texts(llm, [system, {"role": "user", "content": "Sources:\n\n" + tail}], blocks,
                           reply_tokens=reply_tokens(claims))
        if not fitted.fits or len(fitted.texts) < len(blocks):
            raise LLMError("the claims and their sources do not fit the model's context")
        blocks = list(fitted.texts)
    return [system, {"role": "user", "content": "Sources:\n\n" + "\n\n".join(blocks) + tail}]


def parse_verdicts(reply: Any, claims) -> dict[tuple[int, int], tuple[str, str]]:
    """``{(claim index, source number): (status, quote)}`` for each valid verdict of the reply."""
    from agentsearch.pipeline.platform.llm import LLMError

    items = reply.get("verdicts") if isinstance(reply, dict) else reply if isinstance(reply, list) else None
    if not isinstance(items, list):
        raise LLMError(f"entailment reply has no verdict list: {str(reply)[:200]!r}")
    out: dict[tuple[int, int], tuple[str, str]] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        claim, source, status = item.get("claim"), item.get("source"), item.get("status")
        quote = item.get("quote") if isinstance(item.get("quote"), str) else ""
        if isinstance(claim, str) and claim.strip().isdigit():
            claim = int(claim)
        if isinstance(source, str) and source.strip().strip("[]").isdigit():
            source = int(source.strip().strip("[]"))
        if (not isinstance(claim, int) or isinstance(claim, bool) or not 1 <= claim <= len(claims)
                or not isinstance(source, int) or source not in claims[claim - 1].sources
                or status not in STATUS_SCORE):
            continue
        out.setdefault((claim - 1, source), (str(status), str(quote)))
    if not out:
        raise LLMError(f"entailment reply held no valid verdict: {str(reply)[:200]!r}")
    return out


def entailment_verdicts(llm, claims, documents: list[Document], offline: list[Citation],
                        timeout_s: float) -> tuple[list[Citation], dict[str, Any]]:
    """The model's verdicts over the offline ones (``offline``: one per pair, in claim then source order)."""
    from agentsearch.pipeline.platform.llm import parse_json_reply

    reply = llm.complete(build_messages(claims, documents, llm=llm), timeout_s=timeout_s, temperature=0.0,
                         max_tokens=reply_tokens(claims), json_schema=VERDICTS_SCHEMA)
    verdicts = parse_verdicts(parse_json_reply(reply), claims)
    pairs = [(i, n) for i, c in enumerate(claims) for n in c.sources]
    out: list[Citation] = []
    missing = not_found = kept_contradicted = 0
    for (i, n), before in zip(pairs, offline, strict=True):
        if (i, n) not in verdicts:
            missing += 1
            out.append(before)
            continue
        if before.status == "unsupported" and (before.reason or "").startswith(CONTRADICTED):
            kept_contradicted += 1  # a contradicted number is not the model's to overrule
            out.append(before)
            continue
        status, quote = verdicts[(i, n)]
        span = None
        reason = {"supported": None, "partial": "entailment: the source says part of it",
                  "unsupported": "entailment: the source does not say it"}[status]
        if status != "unsupported":
            span = find_loose(documents[n - 1].text, quote) if quote.strip() else None
            if span is None:
                not_found += 1
                span = before.span
                reason = "entailment; the model's quote is not in the source, the span is the offline check's"
                if span is None:  # nowhere to point at: the claim cannot be shown as supported
                    status, reason = "unsupported", "entailment said so, but no span of the source was found"
        out.append(before.model_copy(update={"status": status, "span": span, "score": STATUS_SCORE[status],
                                             "reason": reason}))
    info = {"model": getattr(llm, "model", None), "llm_verdicts": len(verdicts), "llm_missing": missing,
            "quotes_not_found": not_found, "contradicted_kept": kept_contradicted}
    return out, info


def judge_claims(llm, claims, documents: list[Document], timeout_s: float) -> tuple[dict[int, tuple[str, str]], dict]:
    """The model's verdict per claim (index into ``claims``): the best status it gave over the claim's sources,
    with the reason to show. Raises ``LLMError`` when the reply holds no usable verdict."""
    from agentsearch.pipeline.platform.llm import parse_json_reply

    reply = llm.complete(build_messages(claims, documents, llm=llm), timeout_s=timeout_s, temperature=0.0,
                         max_tokens=reply_tokens(claims), json_schema=VERDICTS_SCHEMA)
    verdicts = parse_verdicts(parse_json_reply(reply), claims)
    rank = {"unsupported": 0, "partial": 1, "supported": 2}
    judged: dict[int, tuple[str, str]] = {}
    for (i, _n), (status, _quote) in verdicts.items():
        if i not in judged or rank[status] > rank[judged[i][0]]:
            judged[i] = (status, f"entailment: the LLM judged it {status}")
    return judged, {"model": getattr(llm, "model", None), "llm_verdicts": len(verdicts),
                    "llm_missing": len(claims) - len(judged)}
