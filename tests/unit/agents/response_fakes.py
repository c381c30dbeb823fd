"""What the rendering response agents' tests share: an answer the extractive step gives over the sample corpus, with
its sources, documents and reasoning (``make_input``), and the response stage's context.

Usage::

    from tests.unit.agents.response_fakes import CTX, make_input

    artifact = PdfReport().run(make_input(), CTX)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentsearch.pipeline.agents.base import AgentContext, CotStep, Document, ResponseAgentInput, Source, Stage

CORPUS = Path(__file__).resolve().parents[3] / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
QUERY = "What was Northwind Energy's revenue in Q4 2025?"
# What the extractive answer gives for QUERY over the sample corpus (sentences from three quarterly reports).
ANSWER = (
    "Northwind Energy reported Q1 2025 revenue of $301 million, up 12% from $268 million in Q1 2024 [1]. "
    "Q4 2025 revenue reached $412 million, up 18% from Q4 2024, the strongest quarter in Northwind Energy's "
    "history [2]. "
    "Northwind Energy posted third-quarter 2025 revenue of $369 million, up 16% from $318 million in Q3 2024 [3]."
)
SENTENCES = re.split(r"(?<=\.) ", ANSWER)


def corpus() -> dict[str, dict]:
    return {d["id"]: d for d in map(json.loads, CORPUS.read_text().splitlines()) if d}


def make_input(answer: str = ANSWER, ids=("nw-2025-q1", "nw-2025-q4", "nw-2025-q3"), **extra) -> ResponseAgentInput:
    docs = corpus()
    scores = [0.780, 0.773, 0.732, 0.707, 0.693]
    documents = [
        Document(id=i, title=docs[i]["title"], text=docs[i]["text"], score=s, metadata=docs[i]["metadata"])
        for i, s in zip(ids, scores)
    ]
    sources = [Source(document_id=d.id, title=d.title, score=d.score) for d in documents]
    fields = dict(
        answer=answer,
        sources=sources,
        query=QUERY,
        documents=documents,
        cot_steps=[
            CotStep(step=1, thought="Retrieved 3 documents; looked for sentences that cover the query terms 2025, "
                                    "energy, northwind, q4, revenue."),
            CotStep(step=2, thought="Chose the 3 best-covering sentences and kept them in source order.",
                    evidence=list(ids)),
        ],
        metadata={"language": "en"},
    )
    fields.update(extra)
    return ResponseAgentInput(**fields)


CTX = AgentContext(pipeline_stage=Stage.RESPONSE, query=QUERY)


def flat(text: str) -> str:
    return " ".join(text.split())
