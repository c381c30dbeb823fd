"""Sentence embeddings from an OpenAI-compatible embeddings server (Infinity, Hugging Face TEI, vLLM).

The same interface as ``agentsearch.pipeline.retrieval.embedder.Embedder`` (``embed``, ``dimension``, ``model_name``),
with no model in this process: no torch, no sentence-transformers, no weights. Large inputs go in batches; every vector
comes back unit length, as the in-process model gives them, because Milvus searches by inner product. A server
that cannot be reached or answers badly raises ``EmbeddingServiceError``, whose message says it was the embeddings
server and why, never the server's address (the message reaches a job's search metadata, which its user reads; the
address goes to the log).

Usage::

    embedder = RemoteEmbedder("http://embeddings:7997/v1", model_name="all-MiniLM-L6-v2")
    vectors = embedder.embed(["solar output", "wind turbines"])   # unit-length float lists
    embedder.embed_queries(["what do panels produce?"])            # the search side (E5: after "query: ")
    embedder.dimension                                              # 384: asked of the server once, on first use
    embedder = RemoteEmbedder.from_settings(settings)               # AGENTSEARCH_EMBEDDING_URL and friends
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

import httpx

from agentsearch.pipeline.platform.settings import Settings

log = logging.getLogger("agentsearch.embeddings")

# 32: what TEI accepts in one request by default (--max-client-batch-size) and Infinity's default batch.
DEFAULT_BATCH_SIZE = 32
# A restarting server refuses connections for a moment; one quick second try rides that out without making a
# search whose server is really down wait (it then falls back to keywords at once).
CONNECT_ATTEMPTS = 2
RETRY_PAUSE_S = 0.2
# Answers worth a second try: the server or a proxy in front of it is overloaded or restarting.
TRANSIENT_STATUS = frozenset({502, 503, 504})


def model_prefixes(model_name: str) -> tuple[str, str]:
    """``(query prefix, passage prefix)`` a model was trained with: E5's "query: " and "passage: ", none otherwise."""
    base = model_name.rsplit("/", 1)[-1].lower()
    if base.startswith(("e5-", "multilingual-e5-")):
        return "query: ", "passage: "
    return "", ""


class EmbeddingServiceError(RuntimeError):
    """The embeddings server could not be reached, or its answer was not the embeddings asked for."""


class RemoteEmbedder:
    def __init__(self, url: str, model_name: str, served_model: str | None = None, api_key: str | None = None,
                 timeout_s: float = 30.0, batch_size: int = DEFAULT_BATCH_SIZE,
                 transport: httpx.BaseTransport | None = None,
                 query_prefix: str | None = None, passage_prefix: str | None = None) -> None:
        url = url.rstrip("/")
        # The base URL, as OPENAI_BASE_URL is given (…/v1); the full endpoint is accepted as well.
        self.endpoint = url if url.endswith("/embeddings") else f"{url}/embeddings"
        # The name the vectors are known by in the service (collections, caches): the model they come from.
        self.model_name = model_name
        self.served_model = served_model or model_name
        self.batch_size = batch_size
        default_query, default_passage = model_prefixes(model_name)
        self.query_prefix = default_query if query_prefix is None else query_prefix
        self.passage_prefix = default_passage if passage_prefix is None else passage_prefix
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)), headers=headers,
                                    transport=transport)
        self._dimension: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RemoteEmbedder:
        if not settings.embedding_url:
            raise ValueError("AGENTSEARCH_EMBEDDING_URL is not set")
        key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
        return cls(settings.embedding_url, settings.embedding_model, served_model=settings.embedding_server_model,
                   api_key=key, timeout_s=settings.embedding_timeout_s,
                   query_prefix=settings.embedding_query_prefix, passage_prefix=settings.embedding_passage_prefix)

    @property
    def dimension(self) -> int:
        """The vectors' length, learnt from the server's first answer (one short request when nothing was asked)."""
        if self._dimension is None:
            self.embed(["dimension"])
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of what is searched (chunks, sentences, titles), each text after the passage prefix."""
        return self._embed_all([f"{self.passage_prefix}{t}" for t in texts] if self.passage_prefix else texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of search queries, each after the query prefix: compared with ``embed``'s."""
        return self._embed_all([f"{self.query_prefix}{t}" for t in texts] if self.query_prefix else texts)

    def _embed_all(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self.batch_size]))
        return vectors

    def close(self) -> None:
        self._client.close()

    # -- one request --------------------------------------------------------------------------------------------

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.served_model, "input": texts, "encoding_format": "float"}
        response = self._post(body)
        try:
            payload = response.json()
        except ValueError:
            self._log_bad_answer(response, "not JSON")
            raise EmbeddingServiceError("embeddings server answered with something other than JSON") from None
        vectors = self._vectors(payload, len(texts))
        with self._lock:
            if self._dimension is None:
                self._dimension = len(vectors[0])
            elif len(vectors[0]) != self._dimension:
                raise EmbeddingServiceError(f"embeddings server changed its vectors' length from {self._dimension} "
                                            f"to {len(vectors[0])}")
        return vectors

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            last = attempt == CONNECT_ATTEMPTS
            try:
                response = self._client.post(self.endpoint, json=body)
            except httpx.TimeoutException as exc:
                # A timeout is not retried: the request may be running still, and the caller has waited enough.
                log.warning("embeddings server %s timed out: %r", self.endpoint, exc)
                raise EmbeddingServiceError(f"embeddings server did not answer in time ({type(exc).__name__})") \
                    from exc
            except httpx.TransportError as exc:
                log.warning("embeddings server %s unreachable (attempt %d): %r", self.endpoint, attempt, exc)
                if last:
                    raise EmbeddingServiceError(
                        f"embeddings server unreachable ({type(exc).__name__}: {exc})") from exc
                time.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code in TRANSIENT_STATUS and not last:
                log.warning("embeddings server %s answered %d (attempt %d)", self.endpoint, response.status_code,
                            attempt)
                time.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code != 200:
                self._log_bad_answer(response, f"HTTP {response.status_code}")
                raise EmbeddingServiceError(f"embeddings server answered HTTP {response.status_code}")
            return response
        raise AssertionError("unreachable")  # the loop returns or raises

    def _vectors(self, payload: Any, count: int) -> list[list[float]]:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != count:
            got = len(data) if isinstance(data, list) else "no"
            raise EmbeddingServiceError(f"embeddings server answered {got} embeddings for {count} texts")
        # The OpenAI format numbers each item; servers may answer out of order.
        ordered: list[list[float] | None] = [None] * count
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < count or ordered[index] is not None:
                raise EmbeddingServiceError("embeddings server answered embeddings with missing or repeated indexes")
            ordered[index] = unit_vector(vector)
        lengths = {len(v) for v in ordered if v is not None}
        if len(lengths) != 1:
            raise EmbeddingServiceError(f"embeddings server answered vectors of different lengths {sorted(lengths)}")
        return [v for v in ordered if v is not None]

    def _log_bad_answer(self, response: httpx.Response, what: str) -> None:
        log.warning("embeddings server %s answered %s: %s", self.endpoint, what, response.text[:500])


def unit_vector(vector: Any) -> list[float]:
    """``vector`` scaled to length 1; EmbeddingServiceError for anything but a non-zero list of finite numbers."""
    if (not isinstance(vector, list) or not vector
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)):
        raise EmbeddingServiceError("embeddings server answered an embedding that is not a list of numbers "
                                    "(a base64 one?)")
    norm = math.sqrt(math.fsum(float(x) * float(x) for x in vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingServiceError("embeddings server answered a zero or non-finite vector")
    return [float(x) / norm for x in vector]
