"""Follow-up evaluation: does a follow-up question find its document, as asked and as contextualised?

A follow-up set is JSONL, one pair of turns a line::

    {"id": "q4-2024-revenue", "first": "What was Northwind's Q4 2025 revenue?", "follow_up": "and in 2024?",
     "standalone": "Northwind Q4 2024 revenue", "relevant": ["nw-2024-q4"]}

Each follow-up is searched three ways through the retrieval path jobs use: **as asked** (what a service without
conversations searches), **contextualised** (``query_contextualizer`` with the first turn as history) and **expected**
(the hand-written standalone query: what a perfect rewrite could reach). The report gives nDCG@10, Recall@1/5/10 and
MRR@10 of the relevant documents for each, and how often the rewrite equals the expected query's words.

``src/agentsearch/examples/followups.jsonl`` is such a set over ``src/agentsearch/examples/sample_corpus.jsonl``. For
SciFact, ``scifact_followups`` derives pairs from the **training** claims at run time by a fixed rule (the held-out
claims are never read): a claim of at least ``min_words`` words with exactly one relevant document is cut after its
first half of words, ``A`` and ``B``; the first turn asks "What is known about A?", the follow-up "What about its B?"
("its" standing for A), and the expected standalone query is the claim itself.

Usage::

    pairs = load_followups(Path("src/agentsearch/examples/followups.jsonl"))
    report = run_followup_eval(services, collection, pairs, config, agent_config={"mode": "offline"})
    report["contextualised"]["ndcg@10"], report["as_asked"]["ndcg@10"]
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentsearch.pipeline.eval.retrieval import load_beir_queries, load_qrels, mrr_at, ndcg_at, recall_at

if TYPE_CHECKING:  # types only: the services take seconds to load
    from agentsearch.pipeline.services import Services


class FollowUp(BaseModel):
    id: str
    first: str = Field(min_length=1)
    follow_up: str = Field(min_length=1)
    standalone: str = Field(min_length=1)
    relevant: list[str] = Field(min_length=1)


def load_followups(path: Path) -> list[FollowUp]:
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                pairs.append(FollowUp.model_validate_json(line))
            except ValueError as exc:
                raise ValueError(f"{path}: line {number}: {exc}") from None
    return pairs


def scifact_followups(queries_path: Path, qrels_path: Path, limit: int | None = None,
                      min_words: int = 8) -> list[FollowUp]:
    """Follow-ups derived from SciFact training claims by the rule in the module's docstring."""
    if "test" in queries_path.name or "test" in qrels_path.name:
        raise ValueError("follow-ups are derived from the training claims only; held-out data is never read")
    claims, qrels = load_beir_queries(queries_path), load_qrels(qrels_path)
    pairs = []
    for claim_id, claim in claims.items():
        relevant = qrels.get(claim_id) or {}
        words = claim.rstrip(". ").split()
        if len(relevant) != 1 or len(words) < min_words:
            continue
        half = len(words) // 2
        first, rest = " ".join(words[:half]), " ".join(words[half:])
        pairs.append(FollowUp(id=f"scifact-{claim_id}", first=f"What is known about {first}?",
                              follow_up=f"What about its {rest}?", standalone=claim, relevant=list(relevant)))
        if limit and len(pairs) >= limit:
            break
    return pairs


def sample_corpus_as_beir(sample_path: Path, data_dir: Path) -> Path:
    """The sample corpus (``id``/``title``/``text`` lines) as a BEIR corpus file for ``ensure_corpus_indexed``,
    rewritten only when its content changes (the eval collection is reused while the file stays the same)."""
    rows = [json.loads(line) for line in sample_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    text = "".join(json.dumps({"_id": r["id"], "title": r.get("title", ""), "text": r["text"]}) + "\n" for r in rows)
    target = data_dir / "eval" / "sample_corpus.beir.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return target


def _scores(runs: dict[str, list[str]], pairs: list[FollowUp]) -> dict[str, float]:
    n = len(pairs) or 1
    relevant = {p.id: dict.fromkeys(p.relevant, 1) for p in pairs}
    out = {"ndcg@10": sum(ndcg_at(runs[p.id], relevant[p.id], 10) for p in pairs) / n}
    for k in (1, 5, 10):
        # Recall@k of "the" relevant document: found when any of its judged documents is in the top k.
        out[f"hit@{k}"] = sum(1.0 for p in pairs if set(runs[p.id][:k]) & set(p.relevant)) / n
        out[f"recall@{k}"] = sum(recall_at(runs[p.id], relevant[p.id], k) for p in pairs) / n
    out["mrr@10"] = sum(mrr_at(runs[p.id], relevant[p.id], 10) for p in pairs) / n
    return {k: round(v, 4) for k, v in out.items()}


def _rank(ranked: list[str], relevant: list[str]) -> int | None:
    """The 1-based rank of the first relevant document, None when it is not in the list."""
    return next((i + 1 for i, d in enumerate(ranked) if d in relevant), None)


def _words(text: str) -> set[str]:
    return {w.lower().removesuffix("'s") for w in re.findall(r"[\w']+", text)}


def run_followup_eval(services: Services, collection: str, pairs: list[FollowUp], config,
                      agent_config: dict[str, Any] | None = None, llm=None, progress=None) -> dict[str, Any]:
    """Each follow-up searched as asked, contextualised and as expected; scores of each, and the rewrites."""
    from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, PreSearchInput, Stage
    from agentsearch.pipeline.agents.builtin.query_contextualizer import QueryContextualizer

    class _Tools:
        def __init__(self, client) -> None:
            self.llm = client

    agent = QueryContextualizer(agent_config or {"mode": "offline"})
    retriever = services.uncached_retriever()
    runs: dict[str, dict[str, list[str]]] = {"as_asked": {}, "contextualised": {}, "expected": {}}
    rewrites: list[dict[str, Any]] = []
    exact = 0
    for pair in pairs:
        ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id=collection, tools=_Tools(llm),
                           conversation_history=[{"role": "user", "content": pair.first}])
        try:
            rewritten = agent.run(PreSearchInput(query=pair.follow_up, collection_id=collection), ctx).query
        except AgentSkipped:
            rewritten = pair.follow_up
        exact += _words(rewritten) >= _words(pair.standalone) - {"what", "how", "do", "does", "the"}
        rewrites.append({"id": pair.id, "follow_up": pair.follow_up, "contextualised": rewritten,
                         "expected": pair.standalone})
        for name, query in (("as_asked", pair.follow_up), ("contextualised", rewritten),
                            ("expected", pair.standalone)):
            runs[name][pair.id] = [d.id for d in retriever.search(collection, query, config).documents]
        rewrites[-1]["rank"] = {name: _rank(run[pair.id], pair.relevant) for name, run in runs.items()}
        if progress:
            progress(1)
    return {"pairs": len(pairs), **{name: _scores(run, pairs) for name, run in runs.items()},
            "rewrite_covers_expected": round(exact / (len(pairs) or 1), 4), "rewrites": rewrites}
