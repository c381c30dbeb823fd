"""The embeddings server's client (``agentsearch.pipeline.retrieval.remote_embedder``) against a fake server and bad
answers; the setting that chooses it; and a worker and the API holding no model, not even torch, when it is set.

The real server (Infinity) is exercised by ``tests/integration/test_embedding_service.py``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.embedder import make_embedder
from agentsearch.pipeline.retrieval.remote_embedder import EmbeddingServiceError, RemoteEmbedder
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.stored_chunks import Hit
from agentsearch.pipeline.services import Services
from tests.support.fake_embeddings import FakeEmbeddingsServer, raw_vector

REPO = Path(__file__).resolve().parents[3]


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def answering(handler) -> RemoteEmbedder:
    """A client whose every request ``handler`` answers (an httpx.Request in, an httpx.Response out)."""
    return RemoteEmbedder("http://embeddings.test/v1", "all-MiniLM-L6-v2", transport=httpx.MockTransport(handler))


@pytest.fixture
def server():
    with FakeEmbeddingsServer(dimension=8) as running:
        yield running


def test_vectors_come_back_unit_length_in_the_order_of_the_texts(server):
    embedder = RemoteEmbedder(server.url, "all-MiniLM-L6-v2")
    texts = ["solar output", "Windkraftanlagen", "énergie", "太陽光発電"]
    vectors = embedder.embed(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(unit(raw_vector(text, 8)))
        assert math.fsum(x * x for x in vector) == pytest.approx(1.0)
    assert server.requests == [{"model": "all-MiniLM-L6-v2", "input": texts, "encoding_format": "float"}]
    assert embedder.model_name == "all-MiniLM-L6-v2"
    assert embedder.embed([]) == []
    assert len(server.requests) == 1  # nothing asked for nothing


def test_large_inputs_go_in_batches(server):
    embedder = RemoteEmbedder(server.url, "m", batch_size=32)
    texts = [f"text {i}" for i in range(70)]
    vectors = embedder.embed(texts)
    assert [len(r["input"]) for r in server.requests] == [32, 32, 6]
    assert vectors == [pytest.approx(unit(raw_vector(t, 8))) for t in texts]


def test_the_dimension_is_learnt_from_the_server_once(server):
    embedder = RemoteEmbedder(server.url, "m")
    assert embedder.dimension == 8
    assert embedder.dimension == 8
    assert len(server.requests) == 1
    fresh = RemoteEmbedder(server.url, "m")
    fresh.embed(["a"])
    assert fresh.dimension == 8 and len(server.requests) == 2  # the first answer told it


def test_the_served_model_name_and_the_key_are_sent():
    with FakeEmbeddingsServer(api_key="sekret") as server:
        settings = Settings(embedding_url=server.url + "/", embedding_api_key="sekret",
                            embedding_server_model="minilm")
        embedder = RemoteEmbedder.from_settings(settings)
        embedder.embed(["a"])
        assert server.requests[-1]["model"] == "minilm"
        assert embedder.model_name == "all-MiniLM-L6-v2"  # what collections and caches know the vectors by
        with pytest.raises(EmbeddingServiceError, match=r"^embeddings server answered HTTP 401$"):
            RemoteEmbedder(server.url, "m").embed(["a"])


def test_e5_models_get_their_prefixes_and_an_operator_may_set_others():
    with FakeEmbeddingsServer() as server:
        e5 = RemoteEmbedder.from_settings(Settings(embedding_url=server.url, embedding_model="multilingual-e5-small",
                                                   embedding_server_model="intfloat/multilingual-e5-small"))
        e5.embed(["Tea grows in Zhejiang."])
        e5.embed_queries(["Where does tea grow?"])
        assert [r["input"] for r in server.requests[-2:]] == [["passage: Tea grows in Zhejiang."],
                                                             ["query: Where does tea grow?"]]
        minilm = RemoteEmbedder(server.url, "all-MiniLM-L6-v2")
        minilm.embed_queries(["Where does tea grow?"])
        assert server.requests[-1]["input"] == ["Where does tea grow?"]
        own = RemoteEmbedder.from_settings(Settings(embedding_url=server.url, embedding_model="bge-small-en",
                                                    embedding_query_prefix="Represent this question: ",
                                                    embedding_passage_prefix=""))
        own.embed_queries(["Where?"])
        own.embed(["Here."])
        assert [r["input"] for r in server.requests[-2:]] == [["Represent this question: Where?"], ["Here."]]


def test_a_server_that_is_down_is_named_as_such_without_its_address():
    with FakeEmbeddingsServer() as server:
        url, port = server.url, server.port
    with pytest.raises(EmbeddingServiceError) as raised:
        RemoteEmbedder(url, "m").embed(["a"])
    message = str(raised.value)
    assert message.startswith("embeddings server unreachable (ConnectError")
    assert str(port) not in message and "127.0.0.1" not in message  # users read it; the address is in the log


def test_an_overloaded_server_is_tried_once_more(server):
    server.status = 503
    with pytest.raises(EmbeddingServiceError, match="HTTP 503"):
        RemoteEmbedder(server.url, "m").embed(["a"])
    assert len(server.requests) == 2

    answers = iter([httpx.Response(503), httpx.Response(200, json={"data": [{"index": 0, "embedding": [3, 4]}]})])
    assert answering(lambda request: next(answers)).embed(["a"]) == [[0.6, 0.8]]


def test_a_slow_server_times_out_with_a_clear_error():
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(EmbeddingServiceError, match=r"embeddings server did not answer in time \(ReadTimeout\)"):
        answering(hang).embed(["a"])


@pytest.mark.parametrize("answer, error", [
    (httpx.Response(200, text="<html>proxy error</html>"), "other than JSON"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]}), "1 embeddings for 2 texts"),
    (httpx.Response(200, json={"error": "no data"}), "no embeddings for 2 texts"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
     "missing or repeated indexes"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": "AACAPw=="}, {"index": 1, "embedding": [1.0]}]}),
     "not a list of numbers"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [1, 0]}]}),
     "zero or non-finite"),
    (httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}),
     "vectors of different lengths"),
    (httpx.Response(404, json={"detail": "Not Found"}), "HTTP 404"),
])
def test_bad_answers_raise_a_clear_error(answer, error):
    with pytest.raises(EmbeddingServiceError, match=error):
        answering(lambda request: answer).embed(["a", "b"])


def test_the_full_endpoint_is_accepted_as_well(server):
    RemoteEmbedder(server.url + "/embeddings", "m").embed(["a"])
    assert len(server.requests) == 1


def test_the_setting_chooses_the_embedder(server):
    assert Settings(embedding_url="").embedding_url is None
    assert Settings(embedding_url="  ").embeds_in_process
    assert Settings(embedding_url="http://e:7997/v1/").embedding_url == "http://e:7997/v1"
    with pytest.raises(ValidationError, match="not an http"):
        Settings(embedding_url="embeddings:7997")
    settings = Settings(embedding_url=server.url)
    assert not settings.embeds_in_process
    assert isinstance(make_embedder(settings), RemoteEmbedder)
    services = Services(settings)
    assert isinstance(services.embedder, RemoteEmbedder)
    assert services.embedder is services.embedder
    services.close()


class KeywordOnlyStore:
    """A vector store whose keyword search finds one document; a dense search would be a failure of the test."""

    def keyword_search(self, collection, analyzed, limit):
        return [Hit("d1#0", "d1", "Q4", "Revenue reached $412 million.", 3.2, {})]

    def dense_search(self, collection, vector, limit):
        raise AssertionError("no vector: the embeddings server is down")


def test_a_search_with_the_server_down_falls_back_to_keywords_and_names_the_server():
    with FakeEmbeddingsServer() as server:
        url = server.url
    retriever = Retriever(RemoteEmbedder(url, "m").embed, KeywordOnlyStore(), KeywordAnalyzer())
    result = retriever.search("c", "revenue", SearchConfig(strategy="hybrid"))
    assert [d.id for d in result.documents] == ["d1"]
    assert result.metrics["fallback"] == "keyword_only"
    (error,) = result.metrics["errors"]
    assert error.startswith("embedding failed: EmbeddingServiceError: embeddings server unreachable")


# Run in a process of its own: what a worker's main process does at start (preload) and what a pool process or
# a thread-pool worker does on its first search and ingest, then the API's app; torch must never be imported.
NO_MODEL_SCRIPT = """
import json, sys
import agentsearch.worker.app
import agentsearch.worker.lifecycle as lifecycle
import agentsearch.worker.job_tasks, agentsearch.worker.ingestion
from agentsearch.pipeline.services import get_services

lifecycle._load_model_before_fork()
lifecycle._fresh_clients_after_fork()
services = get_services()
vectors = services.embedder.embed(["solar output"])
dimension = services.embedder.dimension
import agentsearch.api.app
print(json.dumps({
    "preloaded": lifecycle._parent_embedder is not None,
    "embedder": type(services.embedder).__name__,
    "dimension": dimension,
    "modules": sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules),
}))
"""


def test_with_a_server_no_worker_or_api_process_imports_torch(server, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSEARCH_")}
    env.update(PYTHONPATH=str(REPO), AGENTSEARCH_EMBEDDING_URL=server.url, AGENTSEARCH_DATA_DIR=str(tmp_path),
               # A distributed worker: the one that preloads the model when no server is set.
               AGENTSEARCH_BROKER_URL="redis://127.0.0.1:1/0")
    done = subprocess.run([sys.executable, "-c", NO_MODEL_SCRIPT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"preloaded": False, "embedder": "RemoteEmbedder", "dimension": 8, "modules": []}
    assert {r["input"][0] for r in server.requests} >= {"solar output"}
