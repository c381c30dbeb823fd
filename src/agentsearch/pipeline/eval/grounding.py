"""What the delivery rule of LLM answers did, question by question (``agentsearch.pipeline.job.answer.delivery``): the
delivered answer against the offline one on the same documents, the verdicts of the model's sentences, delivered
sentences without their mark, the model's gold-holding sentences delivered, the delivered answer's length against
the model's draft (and what the rule before, quotes always appended, made of the same verdicts), and how soon a
reader saw the first words after the search.

Usage::

    tally = GroundingTally()
    first, offline_first = FirstDelta(), FirstDelta()
    answered = answer_step(state, llm=llm, stream=first)
    offline = answer_step(state, stream=offline_first)
    record = tally.add(answered, offline, gold_spans, hit, first, offline_first)
    tally.report(questions)["offline_gold_span_rate"]
"""

from __future__ import annotations

import time

from agentsearch.pipeline.eval.retrieval import percentile
from agentsearch.pipeline.job.answer.citations import cited_sentences
from agentsearch.pipeline.job.answer.grounding import PARTIAL_MARK
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.text import without_citation_marks

STATUSES = ("supported", "partial", "unsupported")


class FirstDelta:
    """An answer sink that only notes when the step started, when it wrote its first text and when it ended."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_ms: float | None = None
        self.quick_ms: float | None = None
        self.ms: float | None = None

    @property
    def words_ms(self) -> float | None:
        """When the reader saw the first words: the quick answer or the first delta, whichever came first."""
        seen = [t for t in (self.quick_ms, self.first_ms) if t is not None]
        return min(seen) if seen else None

    def start(self) -> None:
        self.started = time.perf_counter()

    def quick(self, text: str) -> None:
        if text and self.quick_ms is None:
            self.quick_ms = (time.perf_counter() - self.started) * 1000

    def write(self, piece: str) -> None:
        if piece and self.first_ms is None:
            self.first_ms = (time.perf_counter() - self.started) * 1000

    def reset(self, reason: str) -> None:
        pass

    def finish(self, text: str, method: str, fallback_reason: str | None = None) -> None:
        self.ms = (time.perf_counter() - self.started) * 1000
        if self.first_ms is None:
            self.first_ms = self.ms


def _holds(text: str, spans: list[str]) -> bool:
    folded = without_citation_marks(text).casefold()
    return any(span.casefold() in folded for span in spans)


def appended(sentences: list[dict], offline_answer: str) -> str:
    """The answer the rule before this one delivered from the same verdicts: the model's kept sentences, then every
    offline quote they do not hold word for word (citation marks aside). The figures' "before" column."""
    kept = [s["text"] for s in sentences if s.get("status") != "unsupported"]
    if not any(s.get("status") == "supported" for s in sentences):
        return without_citation_marks(offline_answer)
    quotes = [without_citation_marks(q.text) for q in cited_sentences(offline_answer, 100)]
    added = [q for q in quotes if not any(q.rstrip(".!?").casefold() in k.casefold() for k in kept)]
    return " ".join(kept + added)


class GroundingTally:
    def __init__(self) -> None:
        self.offline_hits = self.model_hits = self.used = self.lost = self.gained = 0
        self.unmarked = self.marked = 0
        self.sentences = dict.fromkeys(STATUSES, 0)
        self.first_ms: list[float] = []
        self.offline_first_ms: list[float] = []
        self.answer_ms: list[float] = []
        self.offline_ms: list[float] = []
        self.words_ms: list[float] = []
        # The model's draft sentences holding a gold span, and those of them delivered; the delivered answer's
        # length against the draft's, by this rule and by the rule before (``appended``).
        self.gold_sentences = self.gold_delivered = 0
        self.lengths: list[tuple[int, int, int]] = []  # (draft, delivered, delivered by the rule before)
        self.before_hits = 0

    def add(self, answered: JobState, offline: JobState, spans: list[str], hit: bool, first: FirstDelta,
            offline_first: FirstDelta) -> dict:
        meta = answered.metadata.get("answer", {})
        verdicts = meta.get("sentences") or []
        offline_hit = _holds(offline.answer or "", spans)
        used = meta.get("method") == "llm"
        delivered = [v["text"] for v in verdicts if v.get("delivered")]
        model_hit = used and _holds(" ".join(delivered), spans)
        for v in verdicts:
            self.sentences[v["status"]] = self.sentences.get(v["status"], 0) + 1
        # A delivered sentence the check did not find supported must carry its mark; an unsupported one must not
        # be delivered at all.
        unmarked = [c.sentence for c in answered.citations
                    if c.status == "unsupported" or (c.status == "partial" and PARTIAL_MARK not in c.sentence)]
        marked = [c.sentence for c in answered.citations if c.status == "partial" and PARTIAL_MARK in c.sentence]
        self.offline_hits += offline_hit
        self.model_hits += model_hit
        self.used += used
        self.lost += offline_hit and not hit
        self.gained += hit and not offline_hit
        self.unmarked += len(set(unmarked))
        self.marked += len(set(marked))
        for store, sink in ((self.first_ms, first.first_ms), (self.offline_first_ms, offline_first.first_ms),
                            (self.answer_ms, first.ms), (self.offline_ms, offline_first.ms),
                            (self.words_ms, first.words_ms)):
            if sink is not None:
                store.append(sink)
        gold = [v for v in verdicts if _holds(v["text"], spans)]
        self.gold_sentences += len(gold)
        self.gold_delivered += sum(bool(v.get("delivered")) for v in gold)
        before = appended(verdicts, offline.answer or "")
        self.before_hits += _holds(before, spans)
        draft = " ".join(v["text"] for v in verdicts)
        if used and draft:
            self.lengths.append((len(draft), len(without_citation_marks(answered.answer or "")), len(before)))
        return {"offline_hit": offline_hit, "offline_answer": offline.answer, "model_sentences_hit": model_hit,
                "before_rule_answer": before, "gold_sentences": len(gold),
                "gold_sentences_delivered": sum(bool(v.get("delivered")) for v in gold),
                "first_words_ms": first.words_ms,
                "method": meta.get("method"), "fallback_reason": meta.get("fallback_reason"),
                "sentences": verdicts, "unmarked": sorted(set(unmarked)), "marked": sorted(set(marked)),
                "first_delta_ms": first.first_ms, "answer_ms": first.ms}

    def report(self, questions: int) -> dict:
        def spread(values: list[float]) -> dict:
            return {"p50": round(percentile(values, 0.5), 1), "p95": round(percentile(values, 0.95), 1)} \
                if values else {}

        return {
            "offline_gold_span_rate": round(self.offline_hits / questions, 4),
            # How often the model's own delivered sentences held a gold span (the quotes aside).
            "model_sentences_gold_span_rate": round(self.model_hits / questions, 4),
            "llm_sentences_delivered_rate": round(self.used / questions, 4),
            "lost_against_offline": self.lost,
            "gained_against_offline": self.gained,
            "sentences": self.sentences,
            "delivered_without_mark": self.unmarked,
            "delivered_marked_partial": self.marked,
            "answer_step_ms": {"llm": spread(self.answer_ms), "offline": spread(self.offline_ms)},
            "first_delta_ms": {"llm": spread(self.first_ms), "offline": spread(self.offline_first_ms)},
            # The first words a reader saw after the search: the quick answer, or the first delta without one.
            "first_words_ms": spread(self.words_ms),
            "model_gold_sentences": self.gold_sentences,
            "model_gold_sentences_delivered_rate": round(self.gold_delivered / self.gold_sentences, 4)
            if self.gold_sentences else None,
            "before_rule_gold_span_rate": round(self.before_hits / questions, 4),
            "length_chars": _lengths(self.lengths),
        }


def _lengths(rows: list[tuple[int, int, int]]) -> dict:
    """Medians of the draft's and the delivered answer's lengths (characters, citation marks aside) over the answers
    that delivered the model's sentences, and the median of each answer's ratio to its draft."""
    if not rows:
        return {}
    return {"answers": len(rows), "draft_p50": percentile([r[0] for r in rows], 0.5),
            "delivered_p50": percentile([r[1] for r in rows], 0.5),
            "before_rule_p50": percentile([r[2] for r in rows], 0.5),
            "ratio_p50": round(percentile([r[1] / r[0] for r in rows], 0.5), 2),
            "before_rule_ratio_p50": round(percentile([r[2] / r[0] for r in rows], 0.5), 2)}
