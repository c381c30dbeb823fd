"""Answer evaluation on question-answering data in BEIR layout (XQuAD): how often the answer holds a gold span.

Every question goes through the path a job takes: ``Retriever.search`` with the service's default search config
(the job's ``search_config`` with the default top-k), then ``agentsearch.pipeline.job.workflow`` (the LLM when one is
configured, else the extractive answer, with the service's embedder). A hit is a gold span found in the answer text,
case-insensitive, its citation marks read past. Each answer's citations are checked as a job checks them
(``agentsearch.pipeline.eval.citation_scores``): the share of answers whose every cited sentence is supported, and how
often the gold span lies inside a verified span.

With an LLM, each question is also answered offline on the same documents, so one run gives the delivered
answer's gold-span rate beside the extractive one's (``offline``), how the delivery rule chose (``grounding``:
answers that used the model's sentences, the sentences' verdicts, and delivered sentences the check found
unsupported or partly supported without their mark, which must be 0), the latency of the first
``answer.delta`` a reader would see against the offline answer's (``first_delta_ms``) and of the first words, the
quick answer's (``first_words_ms``, from the end of the search), the share of the model's gold-holding sentences
delivered and the delivered answer's length against the model's draft, beside what the rule before (the offline
quotes always appended) made of the same verdicts (``agentsearch.pipeline.eval.grounding``).

Usage::

    gold = load_gold_answers(Path("xquad/en/answers.jsonl"))        # {question id: ["span", ...]}
    report = run_answer_eval(services, collection, queries, gold)
    report["gold_span_rate"], report["latency_ms"]["p50"]
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agentsearch.pipeline.eval.grounding import FirstDelta, GroundingTally
from agentsearch.pipeline.eval.retrieval import percentile
from agentsearch.pipeline.text import without_citation_marks

if TYPE_CHECKING:  # types only: the services take seconds to load, which `agentsearch --help` would pay
    from agentsearch.pipeline.services import Services


def load_gold_answers(path: Path) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            spans = [str(a) for a in row["answers"] if str(a).strip()]
            gold[str(row["_id"])] = spans
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: line {number}: {exc}") from None
    return gold


def holds_gold_span(answer: str, spans: list[str]) -> bool:
    """Whether the answer quotes one of the gold spans, case-insensitive. Citation marks are read past: a quoted
    sentence ends "... his last writing [1].", and the gold span "his last writing." is in it."""
    text = without_citation_marks(answer).casefold()
    return any(span.casefold() in text for span in spans)


def run_answer_eval(services: Services, collection: str, queries: dict[str, str], gold: dict[str, list[str]] | None,
                    llm=None, progress=None, details: list | None = None) -> dict:
    """Each question with gold spans: search, answer, check. ``details`` (a list) receives one record per question.

    With ``gold`` None every question is answered and only the citation figures are measured (claims with no
    gold answer, as SciFact's)."""
    from agentsearch.pipeline.eval.citation_scores import CitationTally
    from agentsearch.pipeline.job.job_state import JobState
    from agentsearch.pipeline.job.workflow import answer_step, search_config
    from agentsearch.pipeline.retrieval.sentence_vectors import KnownVectors, stored_for

    settings = services.settings
    # Caching off, so latency is real work (as in the retrieval evaluation).
    retriever = services.uncached_retriever()
    asked = [(q, text) for q, text in queries.items() if gold is None or gold.get(q)]
    if not asked:
        raise ValueError("no question has gold answers")
    tally = CitationTally()
    hits = 0
    in_documents = 0
    latencies: list[float] = []
    methods: dict[str, int] = {}
    grounding = GroundingTally() if llm is not None else None
    for question_id, text in asked:
        started = time.perf_counter()
        state = JobState(job_id=f"eval-{question_id}", collection_id=collection, query=text, original_query=text,
                         top_k=settings.default_top_k)
        config = search_config(state, settings.search_defaults())
        result = retriever.search(collection, text, config, model=settings.embedding_model)
        state.documents = result.documents
        searched = state
        # The answer embeds as a job does: the source sentences' vectors stored at ingest are read, not recomputed.
        known = KnownVectors(services.embedder.embed,
                             stored_for(services.vector_store, state.documents, lambda name: name, collection))
        first = FirstDelta()
        state = answer_step(searched, llm=llm, embed=known.embed, language=settings.keyword_language,
                                  embedding_model=settings.embedding_model, stream=first,
                                  timeout_s=settings.answer_llm_timeout_s, judge_timeout_s=settings.judge_llm_timeout_s)
        latencies.append((time.perf_counter() - started) * 1000)
        spans = gold[question_id] if gold is not None else []
        hit = holds_gold_span(state.answer or "", spans)
        found = holds_gold_span(" ".join(d.text for d in state.documents), spans)
        hits += hit
        in_documents += found
        method = state.metadata.get("answer", {}).get("method", "?")
        methods[method] = methods.get(method, 0) + 1
        extra: dict = {}
        if grounding is not None:
            offline_first = FirstDelta()
            offline = answer_step(searched, embed=known.embed, language=settings.keyword_language,
                                        embedding_model=settings.embedding_model, stream=offline_first)
            extra = grounding.add(state, offline, spans, hit, first, offline_first)
        checked = tally.add(state, spans, hit=hit, embed=known.embed, language=settings.keyword_language)
        if details is not None:
            details.append({"_id": question_id, "question": text, "answers": spans, "hit": hit,
                            "in_documents": found, "answer": state.answer,
                            "documents": [d.id for d in state.documents], **checked, **extra})
        if progress:
            progress(1)
    measured = {"grounding": grounding.report(len(asked))} if grounding is not None else {}
    if gold is None:
        return {"questions": len(asked), "citations": tally.report(), "methods": methods, **measured,
                "latency_ms": {"p50": round(percentile(latencies, 0.5), 2),
                               "p95": round(percentile(latencies, 0.95), 2)},
                "top_k": settings.default_top_k, "strategy": settings.search_strategy}
    return {
        "citations": tally.report(),
        "gold_span_rate": round(hits / len(asked), 4),
        "questions": len(asked),
        "latency_ms": {"p50": round(percentile(latencies, 0.5), 2), "p95": round(percentile(latencies, 0.95), 2)},
        # Diagnostics: how often a retrieved document held a gold span at all (the ceiling for any answer), and
        # how the answers were made.
        "gold_span_in_documents_rate": round(in_documents / len(asked), 4),
        "methods": methods,
        "top_k": settings.default_top_k,
        "strategy": settings.search_strategy,
        **measured,
    }
