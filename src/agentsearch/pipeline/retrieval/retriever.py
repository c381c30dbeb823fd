"""Core search: embed, search Milvus (dense, BM25 keyword, hybrid, adaptive), fuse, score, dedupe, top-k.

Fallbacks are part of the result, never exceptions: an embedding failure searches by keyword only; a Milvus error
is retried with exponential backoff and then leaves a partial (or empty) result; a retriever slower than the stage
deadline is left behind with a warning; no results relax the threshold once and suggest other queries. What a
partial or empty result with errors means for the job is decided by ``agentsearch.pipeline.retrieval.outcome``.

Usage::

    retriever = Retriever(embed=embedder.embed, store=store, analyzer=KeywordAnalyzer(), cache=cache)
    result = retriever.search("c_ab12", "solar output 2025", SearchConfig(strategy="hybrid", top_k=5),
                              epoch=3, model="all-MiniLM-L6-v2")
    result.documents, result.metrics
    # Only documents whose metadata passes the filter, in both Milvus searches (agentsearch.pipeline.retrieval.filters):
    retriever.search("c_ab12", "solar output", SearchConfig(filter={"eq": {"key": "region", "value": "emea"}}))
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.cache import ResultCache
from agentsearch.pipeline.platform.kv import canonical_hash
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer, bm25_text
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.filters import PUBLISHED_KEYS, Filter
from agentsearch.pipeline.retrieval.fusion import normalise, rrf_fuse, weighted_fuse, with_sentence_signal
from agentsearch.pipeline.retrieval.language import EMBEDDING_SCRIPTS, detect_language, embedding_learnt
from agentsearch.pipeline.retrieval.language_route import CollectionLanguages, fuse_translations, language_route
from agentsearch.pipeline.retrieval.near_duplicates import NearDuplicates
from agentsearch.pipeline.retrieval.outcome import degraded_reasons
from agentsearch.pipeline.retrieval.parallel_retrievers import ParallelRetrievers
from agentsearch.pipeline.retrieval.result import RetrievalResult
from agentsearch.pipeline.retrieval.sentence_signal import with_best_sentences
from agentsearch.pipeline.retrieval.stored_chunks import Hit
from agentsearch.pipeline.retrieval.translations import Translations
from agentsearch.pipeline.retrieval.vector_store import VectorStore
from agentsearch.pipeline.text import content_terms

SEARCH_CACHE_TTL_S = 300
EMBEDDING_CACHE_TTL_S = 24 * 3600
_IDENTIFIER = re.compile(r"\b(?:[A-Z]{2,}[\w-]*|\w*\d\w*)\b")


def with_retries(fn: Callable[[], Any], attempts: int = 5, base_delay_s: float = 0.2) -> Any:
    """``fn`` again after 0.2, 0.4, 0.8 and 1.6 s. A Milvus server that has just come back accepts connections a
    moment before it serves them, and pymilvus gives a call up at the first failed reconnect: three tries in 0.6 s
    were measured to lose one retriever to that moment (a degraded result) while the other found the documents."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(base_delay_s * 2**attempt)


def choose_strategy(query: str) -> tuple[str, float, float]:
    """Adaptive choice by query shape: (strategy, semantic weight, keyword weight).

    Short queries and ones carrying codes, numbers or acronyms lean on exact terms; longer natural-language
    questions lean on meaning. Both retrievers still run: fusion is robust to either being weak.
    """
    terms = content_terms(query)
    if len(terms) <= 2 or len(_IDENTIFIER.findall(query)) >= max(1, len(terms) // 3):
        return "hybrid", 0.6, 1.4
    if len(terms) >= 8:
        return "hybrid", 1.3, 0.7
    return "hybrid", 1.0, 1.0


def _recency(metadata: dict[str, Any], half_life_days: float, today: date) -> float:
    raw = next((metadata[k] for k in PUBLISHED_KEYS if metadata.get(k)), None)
    if not raw:
        return 0.0
    try:
        published = date.fromisoformat(str(raw)[:10])
    except ValueError:
        return 0.0
    age_days = max(0, (today - published).days)
    return math.pow(0.5, age_days / half_life_days)


class Retriever:
    def __init__(
        self,
        embed: Callable[[list[str]], list[list[float]]],
        store: VectorStore,
        analyzer: KeywordAnalyzer,
        cache: ResultCache | None = None,
    ) -> None:
        self._embed = embed
        self.store = store
        self.analyzer = analyzer
        self.cache = cache
        self._collection_languages = CollectionLanguages(store)

    # -- query embedding, cached: the same question embeds once per model --------------------------------
    def embed_query(self, query: str, model: str) -> tuple[list[float], bool]:
        key = self.cache.key("embedding", model, hashlib.sha256(query.encode()).hexdigest()) if self.cache else None
        if key and self.cache is not None and (cached := self.cache.get(key)) is not None:
            return json.loads(cached), True
        vector = self._embed([query])[0]
        if key and self.cache is not None:
            self.cache.set(key, json.dumps(vector), EMBEDDING_CACHE_TTL_S)
        return vector, False

    def cached_embedding(self, text: str, model: str) -> list[float] | None:
        """The vector ``embed_query`` cached for this text, if any: the job's later steps read the query's."""
        if not self.cache:
            return None
        cached = self.cache.get(self.cache.key("embedding", model, hashlib.sha256(text.encode()).hexdigest()))
        return json.loads(cached) if cached is not None else None

    def collection_languages(self, collection: str, epoch: int = 0, filter_expr: Filter = "") -> dict[str, int]:
        """Chunks per language of the collection (``language_route.CollectionLanguages``), of those ``filter_expr``
        keeps when given (a job's filter: its document groups')."""
        return self._collection_languages.of(collection, epoch, filter_expr)

    def search(self, collection: str, query: str, config: SearchConfig, epoch: int = 0, model: str = "",
               translations: Translations | None = None) -> RetrievalResult:
        """``translations`` (the translator agent's, ``agentsearch.pipeline.retrieval.translations``) are searched
        beside the query and the lists fused: a question meets documents in its own language and in the collection's."""
        started = time.perf_counter()
        beside = translations.searched_beside(query) if translations is not None else {}
        key = None
        if self.cache:
            key = self.cache.key("search", collection, str(epoch), model,
                                 canonical_hash([query, config.cache_view(), *([beside] if beside else [])]))
            if (cached := self.cache.get(key)) is not None:
                payload = json.loads(cached)
                result = RetrievalResult(
                    documents=[Document.model_validate(d) for d in payload["documents"]],
                    metrics={**payload["metrics"], "cache_hit": True,
                             "processing_ms": round((time.perf_counter() - started) * 1000, 3)},
                    warnings=payload["warnings"],
                    suggestions=payload["suggestions"],
                )
                return result
        # Of the chunks the search may find: a language only a restricted document is in is no trace of it here.
        languages = (self.collection_languages(collection, epoch, config.filter or "")
                     if self.analyzer.automatic else {})
        result = self._search_uncached(collection, query, config, model, languages)
        if beside:
            result = self._fuse_translations(collection, query, result, beside, config, model, languages)
        if self.analyzer.automatic:
            read = result.metrics.get("languages") or {"query": self.analyzer.language_of(query)}
            result.metrics["language_route"] = language_route(read, languages, beside)
        result.metrics["processing_ms"] = round((time.perf_counter() - started) * 1000, 3)
        result.metrics["cache_hit"] = False
        # Partial or failed searches are not cached: the next job should try again. A retriever left behind at the
        # stage deadline makes a partial result too.
        if key and self.cache is not None and not degraded_reasons(result.metrics):
            payload = {
                "documents": [d.model_dump(mode="json") for d in result.documents],
                "metrics": result.metrics,
                "warnings": result.warnings,
                "suggestions": result.suggestions,
            }
            self.cache.set(key, json.dumps(payload), SEARCH_CACHE_TTL_S)
        return result

    def _fuse_translations(self, collection: str, query: str, first: RetrievalResult, translations: dict[str, str],
                           config: SearchConfig, model: str, languages: dict[str, int]) -> RetrievalResult:
        """Each translation searched as the query was, and the lists fused (``language_route.fuse_translations``)."""
        results = [first] + [self._search_uncached(collection, text, config, model, languages)
                             for text in translations.values()]
        documents, metrics = fuse_translations(results, [(None, query), *translations.items()], config.top_k)
        return RetrievalResult(documents, metrics, [w for r in results for w in r.warnings],
                               first.suggestions if not documents else [])

    def _search_uncached(self, collection: str, query: str, config: SearchConfig, model: str,
                         languages: dict[str, int] | None = None) -> RetrievalResult:
        strategy: str = config.strategy
        w_sem, w_kw = config.semantic_weight, config.keyword_weight
        if strategy == "adaptive":
            strategy, w_sem, w_kw = choose_strategy(query)
        result = self._run(collection, query, config, strategy, w_sem, w_kw, model, languages)
        result.metrics["strategy"] = config.strategy
        result.metrics["strategy_used"] = strategy
        if config.strategy == "adaptive" and len(result.documents) < min(config.top_k, config.adaptive_min_results):
            # Not enough: expand the query with terms from what was found (pseudo-relevance feedback), search again.
            expanded = self.expand_query(query, result.documents)
            if expanded != query:
                second = self._run(collection, expanded, config, strategy, w_sem, w_kw, model, languages)
                if len(second.documents) > len(result.documents):
                    second.metrics.update(strategy=config.strategy, strategy_used=strategy, expanded_query=expanded)
                    result = second
        if not result.documents and config.min_score is not None:
            relaxed = self._run(collection, query, config.model_copy(update={"min_score": None}), strategy, w_sem,
                                w_kw, model, languages)
            relaxed.metrics.update(strategy=config.strategy, strategy_used=strategy, relaxed_threshold=True)
            relaxed.warnings.append(f"no result reached min_score {config.min_score}; threshold relaxed once")
            result = relaxed
        if not result.documents:
            result.suggestions = self.suggest(query)
        return result

    def expand_query(self, query: str, documents: list[Document], terms: int = 5) -> str:
        have = set(self.analyzer.terms(query))
        counts: dict[str, int] = {}
        for doc in documents[:3]:
            for word in content_terms(f"{doc.title} {doc.text}"):
                stem = self.analyzer.terms(word)
                if stem and stem[0] not in have and not word.isdigit():
                    counts[word] = counts.get(word, 0) + 1
        extra = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]]
        return f"{query} {' '.join(extra)}".strip()

    def suggest(self, query: str) -> list[str]:
        """Shorter variants of the query (each content term dropped once), for a user who found nothing."""
        terms = [w for w in query.split() if content_terms(w)]
        if len(terms) <= 1:
            return []
        return [" ".join(t for j, t in enumerate(terms) if j != i) for i in range(len(terms))][:3]

    def _run(self, collection: str, query: str, config: SearchConfig, strategy: str, w_sem: float, w_kw: float,
             model: str, languages: dict[str, int] | None = None) -> RetrievalResult:
        metrics: dict[str, Any] = {"errors": [], "embedding_ms": 0.0, "search_ms": 0.0}
        warnings: list[str] = []
        use_dense = strategy in ("semantic", "hybrid") and w_sem > 0
        use_keyword = strategy in ("keyword", "hybrid") and w_kw > 0
        pool = max(config.candidates, config.top_k)
        if use_dense and use_keyword and strategy == "hybrid" and self.analyzer.automatic:
            script = detect_language(query).script
            if script and script not in EMBEDDING_SCRIPTS.get(model, {script}):
                # The embedding model cannot read this script (MiniLM's vocabulary is Latin: a Chinese question is
                # unknown pieces to it), so its ranking is noise that fusion would mix in at equal weight: keywords
                # alone rank the query (XQuAD zh, same language: nDCG@10 0.874 fused, docs/evaluation.md).
                use_dense = False
                metrics["semantic_skipped"] = f"the embedding model {model} does not read {script} script"

        # The keyword search needs no query vector: it runs while the query is embedded (on two cores, the
        # embedding and Milvus's BM25 search overlap instead of adding up).
        retrievers = ParallelRetrievers(metrics)
        # Compiled once per search; both retrievers apply it in Milvus, so each pool holds only documents it keeps.
        # Passed to the store only when there is one: a search without a filter calls the store as it always did.
        # The store compiles it for the collection: a group clause on its access_groups field where it has one.
        filter_expr: Filter = config.filter if config.filter is not None else ""
        if config.filter is not None:
            metrics["filter"] = config.filter.as_json()
        analysed = self._analyse_query(query, languages, metrics, warnings) if use_keyword else ""
        if use_keyword:
            retrievers.start("keyword", self._keyword_job(collection, analysed, pool, filter_expr))
        vector = None
        if use_dense:
            t0 = time.perf_counter()
            try:
                vector, metrics["embedding_cache_hit"] = self.embed_query(query, model)
            except Exception as exc:  # noqa: BLE001 - fall back to keywords, and say so
                metrics["errors"].append(f"embedding failed: {type(exc).__name__}: {exc}")
                warnings.append("embedding failed; searched by keyword only")
                metrics["fallback"] = "keyword_only"
                use_dense = False
                if not use_keyword:
                    use_keyword = True
                    analysed = self._analyse_query(query, languages, metrics, warnings)
                    retrievers.start("keyword", self._keyword_job(collection, analysed, pool, filter_expr))
            metrics["embedding_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        if use_dense:
            assert vector is not None  # embedded above, or use_dense was turned off
            filtered = {"filter_expr": filter_expr} if filter_expr else {}
            retrievers.start("semantic", lambda: with_retries(
                lambda: self.store.dense_search(collection, vector, pool, **filtered)))
        # The deadline and search_ms count from here, after the embedding, as when both searches started together.
        t0 = time.perf_counter()
        hits = retrievers.wait(config.timeout_s, warnings)
        metrics["search_ms"] = round((time.perf_counter() - t0) * 1000, 3)

        # Best chunk per document, per retriever; and every chunk found of each document, for the sentence signal.
        # The chunk that stands for a document (its text in the result, what the answer reads) is the semantic
        # side's best where the embedding model learnt the query's language, else the keyword side's: MiniLM's
        # cosine picked the wrong chunk of the right paragraph for 7% of German, Spanish and Romanian questions.
        # With one side there is nothing to choose, and the query's language is not asked for. Where the semantic
        # side leads, a document found in several chunks is then stood for by the chunk that every signal ranks
        # first (``_chunks_by_every_signal``), so a file's source shows the page its document was ranked for.
        lead = None
        if len(hits) > 1:
            lead = "semantic" if embedding_learnt(model or None, self._query_language(query, metrics)) else "keyword"
        per_doc: dict[str, dict[str, float]] = {}
        best_hit: dict[str, Hit] = {}
        chunks_of: dict[str, dict[str, Hit]] = {}
        for name, found in hits.items():
            scores: dict[str, float] = {}
            for hit in found:
                chunks_of.setdefault(hit.document_id, {})[hit.id] = hit
                if hit.score > scores.get(hit.document_id, float("-inf")):
                    scores[hit.document_id] = hit.score
                    if hit.document_id not in best_hit or name == lead:
                        best_hit[hit.document_id] = hit
            per_doc[name] = scores
        lists = [per_doc[n] for n in ("semantic", "keyword") if n in per_doc]
        weights = [w for n, w in (("semantic", w_sem), ("keyword", w_kw)) if n in per_doc]
        if len(lists) == 1:
            fused = normalise(lists[0]) if strategy == "keyword" or "semantic_skipped" in metrics else dict(lists[0])
        elif config.fusion == "rrf":
            fused = normalise(rrf_fuse(lists, weights, config.rrf_k))
        else:
            fused = weighted_fuse(lists, weights)
        sentence_of_chunk: dict[str, float] = {}
        if vector is not None and config.sentence_weight > 0 and fused:
            fused = with_best_sentences(self.store, collection, query, vector, model, fused, chunks_of,
                                        per_doc.get("semantic", {}), config.sentence_weight, metrics,
                                        per_chunk=sentence_of_chunk)
        if lead == "semantic":
            best_hit = _chunks_by_every_signal(hits, weights, config, chunks_of, sentence_of_chunk, best_hit)

        scored = self._adjust(fused, best_hit, config)
        ranked = sorted(scored.items(), key=lambda kv: kv[1], reverse=True)
        if config.min_score is not None:
            ranked = [(d, s) for d, s in ranked if s >= config.min_score]
        documents, removed_exact, removed_near = self._dedupe(collection, ranked, best_hit, config)
        metrics.update(
            sources_found=len(fused),
            returned=len(documents),
            dedup_removed=removed_exact + removed_near,
            dedup_exact=removed_exact,
            dedup_near=removed_near,
            average_relevance=round(sum(d.score for d in documents) / len(documents), 6) if documents else 0.0,
            weights={"semantic": w_sem if use_dense else 0.0, "keyword": w_kw if use_keyword else 0.0},
        )
        if not metrics["errors"]:
            del metrics["errors"]
        return RetrievalResult(documents, metrics, warnings)

    @staticmethod
    def _query_language(query: str, metrics: dict) -> str:
        """The language the query is read as: the first its keyword analysis used (a short English question
        misread as Dutch is read as the collection's English), else the detected one."""
        analysed_as = metrics.get("languages", {}).get("analysed_as")
        return analysed_as[0] if analysed_as else detect_language(query).code

    def _analyse_query(self, query: str, languages: dict[str, int] | None, metrics: dict, warnings: list[str]) -> str:
        """The query's keyword terms. A language-aware analyser reads it as its own language and as the
        collection's languages of the same script (``KeywordAnalyzer.query_terms``); what it did goes in metrics."""
        if not self.analyzer.automatic:
            return self.analyzer.analyze(query)
        terms, used = self.analyzer.query_terms(query, list(languages or {}))
        metrics["languages"] = {"query": self.analyzer.language_of(query), "analysed_as": used,
                                "collection": dict(languages or {})}
        if not terms:
            warnings.append("the query has no words to match by keyword (only symbols or emoji); searched by "
                            "meaning alone")
        return bm25_text(terms)

    def _keyword_job(self, collection: str, analyzed: str, pool: int,
                     filter_expr: Filter = "") -> Callable[[], list[Hit]]:
        filtered = {"filter_expr": filter_expr} if filter_expr else {}
        return lambda: with_retries(lambda: self.store.keyword_search(collection, analyzed, pool, **filtered))

    def _adjust(self, fused: dict[str, float], best_hit: dict[str, Hit], config: SearchConfig) -> dict[str, float]:
        if not (config.recency_weight or config.authority_weight):
            return fused
        today = datetime.now(UTC).date()
        base = 1.0 - config.recency_weight - config.authority_weight
        adjusted = {}
        for doc_id, score in fused.items():
            meta = best_hit[doc_id].metadata
            authority = config.authority.get(str(meta.get("source", "")), 0.5 if config.authority else 0.0)
            adjusted[doc_id] = (
                base * score
                + config.recency_weight * _recency(meta, config.recency_half_life_days, today)
                + config.authority_weight * authority
            )
        return adjusted

    def _dedupe(self, collection: str, ranked: list[tuple[str, float]], best_hit: dict[str, Hit],
                config: SearchConfig) -> tuple[list[Document], int, int]:
        seen_hashes: set[str] = set()
        kept: list[Document] = []
        removed_exact = removed_near = 0
        # Look a little past top_k so duplicates removed do not leave the answer short.
        window = ranked[: config.top_k * 3]
        threshold = config.near_duplicate_threshold
        near = None
        if threshold is not None and len(window) > 1:
            # Vectors of the first top_k and a fifth more are read at once, the rest only if the list gets there.
            near = NearDuplicates(lambda ids: self.store.vectors(collection, ids), [best_hit[d].id for d, _ in window],
                                  threshold, first=config.top_k + max(10, config.top_k // 5))
        for doc_id, score in window:
            hit = best_hit[doc_id]
            digest = hashlib.sha256(" ".join(hit.text.split()).lower().encode()).hexdigest()
            if digest in seen_hashes:
                removed_exact += 1
                continue
            if near is not None and near.of_kept(hit.id):
                removed_near += 1
                continue
            seen_hashes.add(digest)
            if near is not None:
                near.keep(hit.id)
            kept.append(Document(id=doc_id, title=hit.title, text=hit.text, score=round(score, 6),
                                 metadata={**hit.metadata, "chunk_id": hit.id}))
            if len(kept) == config.top_k:
                break
        return kept, removed_exact, removed_near


def _chunks_by_every_signal(hits: dict[str, list[Hit]], weights: list[float], config: SearchConfig,
                            chunks_of: dict[str, dict[str, Hit]], sentence_of_chunk: dict[str, float],
                            best_hit: dict[str, Hit]) -> dict[str, Hit]:
    """The chunk that stands for each document found in several, ranked among them by the signals that rank
    documents (both retrievers fused as the documents are, with the chunk's best sentence beside): the chunk with
    the best cosine alone is another page than the one the document was ranked for in 52 of 603 XQuAD questions
    over PDFs of a page per paragraph (docs/evaluation.md, "Format invariance")."""
    lists = [{hit.id: hit.score for hit in hits[n]} for n in ("semantic", "keyword") if n in hits]
    if config.fusion == "rrf":
        fused = normalise(rrf_fuse(lists, weights, config.rrf_k))
    else:
        fused = weighted_fuse(lists, weights)
    if sentence_of_chunk:
        fused = with_sentence_signal(fused, sentence_of_chunk, config.sentence_weight)
    chosen = dict(best_hit)
    for doc_id, chunks in chunks_of.items():
        if len(chunks) > 1:
            # A tie keeps the leading side's best.
            lead_best = best_hit[doc_id].id
            chosen[doc_id] = chunks[max(chunks, key=lambda c: (fused.get(c, 0.0), c == lead_best))]
    return chosen
