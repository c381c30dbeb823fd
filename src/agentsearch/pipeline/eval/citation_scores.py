"""Citation figures of an answer evaluation: how many answers every cited sentence of which its sources support,
how often the gold span lies inside a verified span, what the check costs, and whether it notices a wrong citation.

The extractive answer quotes its sources, so its citations are supported by construction; the probes say whether
the check would notice otherwise. Each answer's cited sentences are checked again twice, altered: cited to another
retrieved source that does not hold the sentence (``recited``), and with one of its numbers changed (``number``).
A probe is caught when the altered citation is not called supported.

Usage::

    tally = CitationTally()
    tally.add(state, gold_spans, embed=embed, language="english")   # after each answer_step
    tally.report()   # {"fully_supported_rate": ..., "gold_in_verified_span_rate": ..., "probes": {...}, ...}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentsearch.pipeline.documents import Citation, Document
from agentsearch.pipeline.eval.retrieval import percentile
from agentsearch.pipeline.job.answer.citations import STATUSES, cited_sentences, verify_citations

_NUMBER = re.compile(r"(?<![\w.])\d+")


def gold_in_verified_span(citations: list[Citation], documents: list[Document], spans: list[str]) -> bool:
    """Does a supported citation's span hold one of the gold spans (case aside)?"""
    for c in citations:
        if c.status == "supported" and c.span is not None:
            quoted = documents[c.source - 1].text[c.span[0]:c.span[1]].casefold()
            if any(s.casefold() in quoted for s in spans if s.strip()):
                return True
    return False


def probe_texts(answer: str, documents: list[Document]) -> dict[str, str]:
    """The answer's cited sentences altered: each cited to another source not holding it, and each with its first
    number changed (only sentences that have one). Empty strings when no sentence can be altered so."""
    claims = cited_sentences(answer, len(documents))
    recited, renumbered = [], []
    for claim in claims:
        source = claim.sources[0]
        others = [n for n in range(1, len(documents) + 1)
                  if n not in claim.sources and claim.text.rstrip(".!?").casefold()
                  not in " ".join(documents[n - 1].text.split()).casefold()]
        if others:
            recited.append(f"{claim.text[:-1] if claim.text[-1] in '.!?' else claim.text} [{others[0]}].")
        number = _NUMBER.search(claim.text)
        if number:
            changed = str(int(number.group(0)) + 1)
            text = claim.text[:number.start()] + changed + claim.text[number.end():]
            renumbered.append(f"{text[:-1] if text[-1] in '.!?' else text} [{source}].")
    return {"recited": " ".join(recited), "number": " ".join(renumbered)}


@dataclass
class CitationTally:
    answers: int = 0
    with_citations: int = 0
    fully_supported: int = 0
    with_gold: int = 0
    gold_in_span: int = 0
    hits: int = 0
    hits_in_span: int = 0
    sentences: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    check_ms: list[float] = field(default_factory=list)
    methods: dict[str, int] = field(default_factory=dict)
    probes: dict[str, list[int]] = field(default_factory=lambda: {"recited": [0, 0], "number": [0, 0]})
    probe_ms: list[float] = field(default_factory=list)

    def add(self, state, gold: list[str] | None, hit: bool = False, embed=None, language: str = "english",
            probe: bool = True) -> dict:
        """One answered question (a ``JobState`` after ``answer_step``). Returns its record for the details."""
        info = state.metadata.get("citations") or {}
        citations = state.citations
        self.answers += 1
        self.with_citations += bool(citations)
        self.fully_supported += bool(info.get("all_supported"))
        for c in citations:
            self.sentences[c.status] += 1
        if "ms" in info:
            self.check_ms.append(info["ms"])
        method = info.get("method", "?")
        self.methods[method] = self.methods.get(method, 0) + 1
        record = {"all_supported": bool(info.get("all_supported")),
                  "citations": [c.model_dump(mode="json") for c in citations]}
        if gold:
            inside = gold_in_verified_span(citations, state.documents, gold)
            self.with_gold += 1
            self.gold_in_span += inside
            self.hits += hit
            self.hits_in_span += hit and inside
            record["gold_in_verified_span"] = inside
        if probe and state.answer:
            for kind, text in probe_texts(state.answer, state.documents).items():
                if not text:
                    continue
                check = verify_citations(text, state.documents, embed=embed, language=language)
                self.probe_ms.append(check.info.get("ms", 0.0))
                self.probes[kind][0] += sum(c.status != "supported" for c in check.citations)
                self.probes[kind][1] += len(check.citations)
        return record

    def report(self) -> dict:
        def rate(a: int, b: int) -> float | None:
            return round(a / b, 4) if b else None

        out = {
            "fully_supported_rate": rate(self.fully_supported, self.answers),
            "answers": self.answers,
            "answers_with_citations": self.with_citations,
            "sentences": self.sentences,
            "methods": self.methods,
            "check_ms": {"p50": round(percentile(self.check_ms, 0.5), 2),
                         "p95": round(percentile(self.check_ms, 0.95), 2)} if self.check_ms else None,
            "probes": {kind: {"caught_rate": rate(caught, total), "citations": total}
                       for kind, (caught, total) in self.probes.items()},
            "probe_check_ms_p50": round(percentile(self.probe_ms, 0.5), 2) if self.probe_ms else None,
        }
        if self.with_gold:
            out["gold_in_verified_span_rate"] = rate(self.gold_in_span, self.with_gold)
            out["gold_in_verified_span_of_hits"] = rate(self.hits_in_span, self.hits)
        return out
