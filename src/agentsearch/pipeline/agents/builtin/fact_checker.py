"""Post-search: check the documents' claims against a trusted collection and mark each document.

For each document (up to ``max_documents``) the agent picks up to ``max_claims`` claim sentences: sentences that
state numbers or named facts (capitalised names past the first word) first, the longest other sentences when a
document has none. For each claim it retrieves ``evidence_top_k`` documents from ``trusted_collection_id`` with
``ctx.tools.search`` and compares the claim with every evidence sentence by embedding cosine (``ctx.tools.embed``).

Numbers are checked too. Each number is normalised (``$1.2 billion`` = ``1,200 million``; percentages apart; years
are context, not values) and carries the stemmed words around it. A claim number found among the evidence numbers
agrees; a claim number absent from the evidence, while an evidence sentence about the same thing (cosine at least
``context_threshold``) has a number of the same kind next to a shared word, contradicts. A contradicted claim
counts against its document (its support is 0), whatever its wording similarity.

A claim is ``supported`` (best cosine at least ``support_threshold``, no contradiction), ``contradicted`` or
``unsupported`` (no close evidence). The document's ``metadata["fact_check"]`` is
``{"status": "supported" | "unsupported" | "mixed", "support": mean claim support, "claims": [...]}``: supported
when every claim is, unsupported when none is, mixed otherwise. ``drop_unsupported`` removes the unsupported ones.

LLM entailment (``mode: "llm"``, or ``"auto"`` with an endpoint): per document, the claims and their best evidence
sentences go to the LLM, which answers ``{"verdicts": [{"claim": 1, "verdict": "supported" | "contradicted" |
"not_enough_info"}]}`` (asked by JSON schema; a bare list is read too). Verdicts replace the offline ones claim by
claim (support 1 / 0 / 0); a malformed reply or an LLM error keeps the offline verdicts for that document and says so
in ``fact_check["llm_error"]``. Claims past the model's context are not sent (``fact_check["llm_budget"]``) and keep
theirs.

The trusted collection must be one of the config owner's own: another user's (or a missing) collection is refused
when the config is saved (422, in the words used for a collection that does not exist) and again when the agent
runs, as this agent's ``error``, before any search; the toolbox (``agentsearch.pipeline.agents.toolbox.AgentTools``)
also refuses to search a collection the job's user does not own.

Without ``trusted_collection_id`` or without the agent toolbox the agent reports ``skipped``.

Usage::

    agent = FactChecker({"trusted_collection_id": "0b6f...", "drop_unsupported": True})
    out = agent.run(PostSearchInput(documents=docs, query="Northwind Q4 2024 revenue"), ctx)
    out.documents[0].metadata["fact_check"]   # {"status": "supported", "support": 0.83, "claims": [...]}
    out.metadata["fact_check"]                # {"checked": 5, "supported": 3, "mixed": 1, "unsupported": 1, ...}
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    Document,
    PostSearchAgent,
    PostSearchInput,
    PostSearchOutput,
)
from agentsearch.pipeline.agents.references import CollectionReference, resolve_references
from agentsearch.pipeline.platform.llm import LLMError
from agentsearch.pipeline.platform.prompt_budget import fit_texts
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import split_sentences, words

_NUMBER = re.compile(
    r"(?<![\w.])(?P<cur>[$€£])?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b)|\s?(?P<scale>thousand|million|billion|trillion|bn|mn|k|m)\b)?",
    re.IGNORECASE,
)
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "trillion": 1e12}
_NAMED = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")

LLM_SYSTEM = (
    "You check claims against trusted evidence. For each numbered claim decide whether the evidence supports it, "
    "contradicts it, or does not say. Reply with only JSON like "
    '{"verdicts": [{"claim": 1, "verdict": "supported"}, {"claim": 2, "verdict": "contradicted"}]} using the '
    'verdicts "supported", "contradicted" or "not_enough_info".'
)
VERDICT_SCHEMA = {"type": "object", "required": ["claim", "verdict"],
                  "properties": {"claim": {"type": "integer"},
                                 "verdict": {"enum": ["supported", "contradicted", "not_enough_info"]}}}
TOKENS_PER_VERDICT = 24
_VERDICTS = {"supported": "supported", "entailed": "supported", "entailment": "supported", "true": "supported",
             "contradicted": "contradicted", "contradiction": "contradicted", "refuted": "contradicted",
             "false": "contradicted", "not_enough_info": "unsupported", "not enough info": "unsupported",
             "unknown": "unsupported", "neutral": "unsupported", "unsupported": "unsupported"}


@dataclass(frozen=True)
class Quantity:
    value: float
    kind: str  # "percent" | "amount" | "year"
    context: frozenset[str]  # stemmed content words around it
    text: str


def quantities(sentence: str, analyzer: KeywordAnalyzer, span: int = 4) -> list[Quantity]:
    """The numbers in a sentence, normalised, with the stemmed words around each (years are kept as context)."""
    found = []
    for m in _NUMBER.finditer(sentence):
        raw = m.group("num").replace(",", "")
        value = float(raw)
        if m.group("pct"):
            kind = "percent"
        elif not m.group("cur") and not m.group("scale") and "." not in raw and 1900 <= value <= 2100:
            kind = "year"
        else:
            kind = "amount"
            if m.group("scale"):
                scale = m.group("scale").lower()
                # A bare "m" / "k" after a number is a unit only with a currency sign (else "180 m" may be metres).
                if scale not in ("m", "k") or m.group("cur"):
                    value *= _SCALES[scale]
        before = words(sentence[: m.start()])[-span:]
        after = words(sentence[m.end() :])[:span]
        context = frozenset(analyzer.terms(" ".join(before + after)))
        found.append(Quantity(value, kind, context, m.group(0).strip()))
    return found


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 0.005 * max(abs(a), abs(b), 1e-9)


def _years(q: Quantity) -> set[str]:
    return {w for w in q.context if len(w) == 4 and w.isdigit() and 1900 <= int(w) <= 2100}


def _compatible(a: Quantity, b: Quantity) -> bool:
    """Same kind, and not tied to different years ("$412 million in Q4 2025" says nothing about Q4 2024)."""
    if a.kind != b.kind:
        return False
    ya, yb = _years(a), _years(b)
    return not (ya and yb and ya.isdisjoint(yb))


def compare_numbers(claim: list[Quantity], evidence: list[list[Quantity]]) -> tuple[list[str], list[str]]:
    """(agreeing, contradicting) claim numbers given the numbers of the evidence sentences about the same thing.

    A claim number agrees when a compatible evidence number has its value; it contradicts when none does but a
    compatible evidence number shares a context word with it (the same quantity, another value).
    """
    agree, contradict = [], []
    pool = [q for qs in evidence for q in qs]
    for q in claim:
        if q.kind == "year":
            continue
        if any(_compatible(q, e) and _same(e.value, q.value) for e in pool):
            agree.append(q.text)
        elif any(_compatible(q, e) and e.context & q.context for e in pool):
            contradict.append(q.text)
    return agree, contradict


def shared_numbers(claim: list[Quantity], sentence: list[Quantity]) -> int:
    """How many of the claim's numbers (years aside) the sentence states too."""
    return sum(1 for q in claim
               if q.kind != "year" and any(_compatible(q, e) and _same(e.value, q.value) for e in sentence))


def claim_sentences(text: str, max_claims: int, min_words: int = 5) -> list[str]:
    sentences = [s for s in split_sentences(text) if len(s.split()) >= min_words]
    factual = [s for s in sentences if re.search(r"\d", s) or _NAMED.search(s)]
    if factual:
        # Numbers first (the most checkable), then named facts, each in text order.
        numeric = [s for s in factual if re.search(r"\d", s)]
        named = [s for s in factual if s not in numeric]
        return (numeric + named)[:max_claims]
    return sorted(sentences, key=len, reverse=True)[:max_claims]


class FactChecker(PostSearchAgent):
    agent_id = "fact_checker"
    version = "1"
    description = ("Checks the documents' claims against a trusted collection (retrieval, embedding similarity and "
                   "number agreement) and marks each supported / unsupported / mixed; LLM entailment variant.")
    default_timeout_s = 60.0
    cache_ttl_s = 3600
    references: ClassVar[dict[str, Any]] = {"trusted_collection_id": CollectionReference()}

    class Config(AgentConfig):
        trusted_collection_id: str | None = Field(None, description="The collection whose documents are trusted.")
        mode: Literal["offline", "llm", "auto"] = "offline"
        max_claims: int = Field(5, ge=1, le=20, description="Claim sentences checked per document.")
        max_documents: int = Field(20, ge=1, le=100)
        evidence_top_k: int = Field(3, ge=1, le=20)
        strategy: Literal["semantic", "keyword", "hybrid", "adaptive"] = "hybrid"
        support_threshold: float = Field(0.6, ge=0.0, le=1.0, description="Cosine from which a claim is supported.")
        context_threshold: float = Field(
            0.45, ge=0.0, le=1.0, description="Cosine from which an evidence sentence is about the same thing."
        )
        drop_unsupported: bool = False
        language: str = "english"
        llm_timeout_s: float = Field(20.0, gt=0.0, le=120.0)

        @field_validator("trusted_collection_id")
        @classmethod
        def _collection_id(cls, value: str | None) -> str | None:
            if value is None:
                return None
            try:
                return str(uuid.UUID(value.strip()))
            except ValueError:
                raise ValueError("trusted_collection_id must be a collection id (a UUID)") from None

        @model_validator(mode="after")
        def _thresholds(self) -> FactChecker.Config:
            if self.context_threshold > self.support_threshold:
                raise ValueError("context_threshold must not be above support_threshold")
            return self

    config: Config

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        cfg = self.config
        if not cfg.trusted_collection_id:
            raise AgentSkipped("no trusted_collection_id configured")
        tools = ctx.tools
        if tools is None or not hasattr(tools, "search") or not hasattr(tools, "embed"):
            raise AgentSkipped("fact checking needs the agent toolbox (search and embeddings)")
        # The owner's own collection, checked again now: a config row may name one that is not (any more).
        resolve_references(self, tools)
        analyzer = KeywordAnalyzer(cfg.language)
        llm = ctx.llm if cfg.mode in ("llm", "auto") else None
        evidence_cache: dict[str, list[tuple[str, str]]] = {}
        vectors: dict[str, np.ndarray] = {}  # text -> unit vector, shared by the documents of this run

        out_docs: list[Document] = []
        counts = {"supported": 0, "mixed": 0, "unsupported": 0}
        dropped = []
        for index, doc in enumerate(inp.documents):
            if index >= cfg.max_documents:
                out_docs.append(doc)
                continue
            report = self._check(doc, tools, analyzer, evidence_cache, vectors)
            if cfg.mode == "llm" and llm is None:
                report["llm_error"] = "no LLM endpoint configured; offline verdicts kept"
            elif llm is not None and report["claims"]:
                self._entail(llm, report)
            self._summarise(report)
            counts[report["status"]] += 1
            if cfg.drop_unsupported and report["status"] == "unsupported":
                dropped.append(doc.id)
                continue
            out_docs.append(doc.model_copy(update={"metadata": {**doc.metadata, "fact_check": report}}))
        summary: dict[str, Any] = {"checked": sum(counts.values()), **counts,
                                   "trusted_collection_id": cfg.trusted_collection_id}
        if cfg.drop_unsupported:
            summary["dropped"] = dropped
        return PostSearchOutput(documents=out_docs, metadata={"fact_check": summary})

    # --- offline ----------------------------------------------------------------------------------------------

    def _evidence(self, tools, claim: str, cache: dict) -> list[tuple[str, str]]:
        """(document id, sentence) pairs from the trusted collection for one claim."""
        if claim not in cache:
            found = tools.search(self.config.trusted_collection_id, claim, top_k=self.config.evidence_top_k,
                                 strategy=self.config.strategy)
            cache[claim] = [(d.id, s) for d in found for s in split_sentences(d.text) if s.strip()]
        return cache[claim]

    def _check(self, doc: Document, tools, analyzer: KeywordAnalyzer, cache: dict, vectors: dict) -> dict:
        cfg = self.config
        claims = claim_sentences(doc.text, cfg.max_claims)
        if not claims:
            return {"claims": [], "method": "offline"}
        evidence = [self._evidence(tools, c, cache) for c in claims]
        todo = list(dict.fromkeys(t for t in [*claims, *(s for ev in evidence for _, s in ev)] if t not in vectors))
        if todo:
            fresh = np.asarray(tools.embed(todo), dtype=np.float32)
            norms = np.linalg.norm(fresh, axis=1, keepdims=True)
            vectors.update(zip(todo, fresh / np.where(norms == 0, 1.0, norms)))
        results = []
        for ci, claim in enumerate(claims):
            entry: dict[str, Any] = {"claim": claim}
            if not evidence[ci]:
                entry.update(status="unsupported", support=0.0, similarity=0.0)
                results.append(entry)
                continue
            claim_vec = vectors[claim]
            ranked = sorted(
                ((float(vectors[s] @ claim_vec), doc_id, s) for doc_id, s in evidence[ci]),
                reverse=True,
            )
            best_sim = max(0.0, ranked[0][0])
            context = [r for r in ranked if r[0] >= cfg.context_threshold][:5]
            claim_numbers = quantities(claim, analyzer)
            context_numbers = [quantities(s, analyzer) for _, _, s in context]
            agree, contradict = compare_numbers(claim_numbers, context_numbers)
            # The evidence shown: the sentence about the same thing sharing most numbers with the claim, else the
            # closest one.
            shared = [shared_numbers(claim_numbers, qs) for qs in context_numbers]
            pick = max(range(len(context)), key=lambda k: (shared[k], context[k][0])) if context else None
            _, best_doc, best_sentence = context[pick] if pick is not None else ranked[0]
            entry.update(similarity=round(best_sim, 4),
                         evidence={"document_id": best_doc, "sentence": best_sentence})
            if agree or contradict:
                entry["numbers"] = {"agree": agree, "contradict": contradict}
            if contradict:
                entry.update(status="contradicted", support=0.0)
            elif best_sim >= cfg.support_threshold:
                entry.update(status="supported", support=round(best_sim, 4))
            else:
                entry.update(status="unsupported", support=round(best_sim, 4))
            entry["_context"] = [s for _, _, s in context] or [best_sentence]
            results.append(entry)
        return {"claims": results, "method": "offline"}

    @staticmethod
    def _summarise(report: dict) -> None:
        claims = report["claims"]
        for c in claims:
            c.pop("_context", None)
        if not claims:
            report.update(status="unsupported", support=0.0, reason="no checkable claims")
            return
        supported = sum(1 for c in claims if c["status"] == "supported")
        report["support"] = round(sum(c["support"] for c in claims) / len(claims), 4)
        report["status"] = "supported" if supported == len(claims) else "unsupported" if supported == 0 else "mixed"
        # Fixed key order: status first, as documented.
        for key in ("status", "support", "claims", "method",
                    *(k for k in ("llm_error", "llm_missing", "llm_budget") if k in report)):
            report[key] = report.pop(key)

    # --- LLM entailment ---------------------------------------------------------------------------------------

    def _entail(self, llm, report: dict) -> None:
        claims = report["claims"]
        blocks = []
        for n, c in enumerate(claims, start=1):
            evidence = c.get("_context") or []
            lines = "\n".join(f"  - {s}" for s in evidence[:3]) or "  - (no evidence found)"
            blocks.append(f"Claim {n}: {c['claim']}\nEvidence:\n{lines}")
        reply_tokens = TOKENS_PER_VERDICT * (len(claims) + 1)
        # Claims past the context are left out: they keep their offline verdicts (counted in llm_missing).
        fitted = fit_texts(llm, [{"role": "system", "content": LLM_SYSTEM}], blocks, reply_tokens)
        if not fitted.texts:
            report["llm_error"] = f"{fitted.note()}; offline verdicts kept"
            return
        messages = [{"role": "system", "content": LLM_SYSTEM},
                    {"role": "user", "content": "\n\n".join(fitted.texts)}]
        try:
            # At most one verdict a claim: a small model goes on numbering claims that were never asked about.
            schema = {"type": "object", "required": ["verdicts"], "properties": {"verdicts": {
                "type": "array", "maxItems": len(fitted.texts), "items": VERDICT_SCHEMA}}}
            reply = llm.complete_json(messages, timeout_s=self.config.llm_timeout_s, max_tokens=reply_tokens,
                                      json_schema=schema)
            verdicts = parse_verdicts(reply, len(fitted.texts))
        except (LLMError, ValueError) as exc:
            report["llm_error"] = f"{exc}; offline verdicts kept"
            return
        if fitted.changed:
            report["llm_budget"] = fitted.note()
        report["method"] = "llm"
        for i, verdict in verdicts.items():
            claims[i]["offline_status"] = claims[i]["status"]
            claims[i]["status"] = verdict
            claims[i]["support"] = 1.0 if verdict == "supported" else 0.0
        if len(verdicts) < len(claims):
            report["llm_missing"] = len(claims) - len(verdicts)


def parse_verdicts(reply: Any, n: int) -> dict[int, str]:
    """{0-based claim index: status} from a reply meant to be a list of {"claim", "verdict"}; ValueError if unusable."""
    if isinstance(reply, dict):
        for key in ("verdicts", "results", "claims"):
            if isinstance(reply.get(key), list):
                reply = reply[key]
                break
        else:  # {"1": "supported", ...}
            reply = [{"claim": k, "verdict": v} for k, v in reply.items()]
    if not isinstance(reply, list):
        raise ValueError(f"expected a JSON list of verdicts, got {type(reply).__name__}")
    verdicts: dict[int, str] = {}
    for position, item in enumerate(reply):
        number: Any
        verdict: Any
        if isinstance(item, str):  # a bare list of verdicts in claim order
            number, verdict = position + 1, item
        elif isinstance(item, dict):
            number, verdict = item.get("claim", item.get("id", position + 1)), item.get("verdict", item.get("label"))
        else:
            continue
        try:
            index = int(str(number).strip().lstrip("[").rstrip("]")) - 1
        except ValueError:
            continue
        status = _VERDICTS.get(str(verdict).strip().lower()) if verdict is not None else None
        if status is not None and 0 <= index < n and index not in verdicts:
            verdicts[index] = status
    if not verdicts:
        raise ValueError("the reply holds no usable verdict")
    return verdicts
