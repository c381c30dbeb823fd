"""Extractive answers: the sentences of the retrieved documents that best cover the query, each cited ``[n]``.

Used when no LLM endpoint is configured. Source ``n`` is the n-th document in ``sources``.

Usage::

    answer = extractive_answer("When did revenue grow?", documents, max_sentences=3, with_cot=True)
    answer.text      # "Q4 2025 revenue reached $412 million [1]. ..."
    answer.sources   # [Source(document_id=..., title=..., score=...), ...]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.agents.base import CotStep, Document, Source
from pipeline.text import content_terms, split_sentences

NO_RESULTS = "No documents in the collection matched the query."


@dataclass
class Answer:
    text: str
    sources: list[Source]
    cot_steps: list[CotStep] = field(default_factory=list)


def extractive_answer(query: str, documents: list[Document], max_sentences: int = 3, with_cot: bool = False) -> Answer:
    sources = [Source(document_id=d.id, title=d.title or d.id, score=round(d.score, 6)) for d in documents]
    steps: list[CotStep] = []
    if not documents:
        if with_cot:
            steps.append(CotStep(step=1, thought="The search returned no documents, so there is nothing to cite."))
        return Answer(NO_RESULTS, sources, steps)

    query_terms = content_terms(query)
    scored: list[tuple[float, int, int, str]] = []
    for doc_index, doc in enumerate(documents):
        for sent_index, sentence in enumerate(split_sentences(doc.text)):
            overlap = len(query_terms & content_terms(sentence)) / max(1, len(query_terms))
            # Coverage of the query's terms first; the retrieval score breaks ties and favours better documents.
            scored.append((overlap + 0.25 * doc.score, doc_index, sent_index, sentence))
    best = sorted(scored, key=lambda s: s[0], reverse=True)[:max_sentences]
    # Read in document rank order, then sentence order, so the answer flows like the sources.
    chosen = sorted(best, key=lambda s: (s[1], s[2]))
    parts = []
    for _, doc_index, _, sentence in chosen:
        body = sentence.rstrip()
        end = body[-1] if body[-1] in ".!?" else "."
        body = body[:-1] if body[-1] in ".!?" else body
        parts.append(f"{body} [{doc_index + 1}]{end}")
    if with_cot:
        steps = [
            CotStep(
                step=1,
                thought=f"Retrieved {len(documents)} documents; looked for sentences that cover the query terms "
                f"{', '.join(sorted(query_terms)) or '(none)'}.",
            ),
            CotStep(
                step=2,
                thought=f"Chose the {len(chosen)} best-covering sentences and kept them in source order.",
                evidence=[documents[d].id for _, d, _, _ in chosen],
            ),
        ]
    return Answer(" ".join(parts), sources, steps)
