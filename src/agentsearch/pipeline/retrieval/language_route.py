"""The language route of a search: which languages a collection holds, how a query met them, and the fusion of a
query's results with its translations' results.

A question may be in another language than the documents. The translator agent (with an LLM) hands the search the
query in the collection's main languages; each is searched beside the original and the lists fused by document. With
no translation the route is said plainly in the job's metadata, so a monolingual result is not mistaken for a
cross-lingual one.

Usage::

    languages = CollectionLanguages(store)            # one per process: read once per collection epoch and minute
    languages.of("c_ab12", epoch=3)                   # {"en": 812, "de": 40}: chunks per language
    language_route({"query": "de"}, {"en": 812}, None)["route"]            # "monolingual"
    documents, metrics = fuse_translations([first, translated], [(None, "Wo wächst Tee?"), ("en", "Where ...")], 5)
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.retrieval.filters import Filter
from agentsearch.pipeline.retrieval.fusion import weighted_fuse
from agentsearch.pipeline.retrieval.result import RetrievalResult

LANGUAGES_TTL_S = 60


def language_route(query_languages: dict, collection: dict[str, int], translations: dict[str, str] | None) -> dict:
    """How the query met the collection's languages: ``same`` (the query's language is among them), ``translated``
    (translations were searched beside it) or ``monolingual`` (it was not, and nothing translated it: keywords then
    match only names and numbers, and the embedding model is English-only), said plainly in the job's metadata."""
    own = query_languages.get("query")
    if translations:
        return {"route": "translated", "query_language": own, "searched_in": [own, *translations]}
    if not collection or own in (None, "und") or own in collection:
        return {"route": "same", "query_language": own}
    return {"route": "monolingual", "query_language": own, "collection_languages": list(collection),
            "reason": f"the query is in {own!r} and the collection in {', '.join(collection)}; no translation ran "
                      "(translation needs an LLM endpoint), so only names, numbers and shared words can match"}


class CollectionLanguages:
    """Chunks per language of each collection (``VectorStore.languages``), read once per collection epoch, filter
    and minute: a query's analysis and translation depend on them, and they change only with ingestion."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._known: dict[tuple[str, int, str], tuple[float, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def of(self, collection: str, epoch: int = 0, filter_expr: Filter = "") -> dict[str, int]:
        shown = filter_expr if isinstance(filter_expr, str) else json.dumps(filter_expr.as_json(), sort_keys=True)
        key = (collection, epoch, shown)
        now = time.monotonic()
        with self._lock:
            known = self._known.get(key)
        if known is not None and now - known[0] < LANGUAGES_TTL_S:
            return known[1]
        reader = getattr(self._store, "languages", None)
        try:
            # Asked with the filter only when there is one: a store's reader without it is called as before.
            filtered = {"filter_expr": filter_expr} if filter_expr else {}
            counts = reader(collection, **filtered) if reader is not None else {}
        except Exception:  # noqa: BLE001 - without them the query is analysed as its own language alone
            return {}  # not kept: the next search asks again rather than go a minute without them
        with self._lock:
            self._known[key] = (now, counts)
        return counts


def fuse_translations(results: list[RetrievalResult], queries: list[tuple[str | None, str]],
                      top_k: int) -> tuple[list[Document], dict[str, Any]]:
    """The results of the query and of each translation (``queries``: ``(language, text)`` in the same order, the
    original first with language None), fused by document: equal weights over min-max-normalised scores, as the
    two retrievers of one search are; a document's text is its best-scoring chunk's. Returns the top ``top_k``
    and the metrics of the fused search (the first result's, with each query's share in ``fused_queries``)."""
    lists = [{d.id: d.score for d in r.documents} for r in results]
    fused = weighted_fuse(lists, [1.0] * len(lists))
    best: dict[str, Document] = {}
    for r in results:
        for d in r.documents:
            if d.id not in best or d.score > best[d.id].score:
                best[d.id] = d
    ranked = sorted(fused.items(), key=lambda kv: kv[1], reverse=True)[:top_k]
    documents = [best[d].model_copy(update={"score": round(score, 6)}) for d, score in ranked]
    metrics = {
        **results[0].metrics,
        "returned": len(documents),
        "sources_found": len(fused),
        "average_relevance": round(sum(d.score for d in documents) / len(documents), 6) if documents else 0.0,
        "fused_queries": [
            {"query": text, "language": language, "returned": len(r.documents),
             **({"languages": r.metrics["languages"]} if "languages" in r.metrics else {}),
             **({"errors": r.metrics["errors"]} if r.metrics.get("errors") else {})}
            for (language, text), r in zip(queries, results, strict=True)
        ],
    }
    errors = [e for r in results for e in r.metrics.get("errors", [])]
    if errors:
        metrics["errors"] = errors
    return documents, metrics
