"""Embeddings as a service: a real embeddings server (Infinity, ``agentsearch.devstack.embedding_server``) serving the
packaged all-MiniLM-L6-v2 weights, and a dev stack whose workers and API use it through ``AGENTSEARCH_EMBEDDING_URL``.

- the server's vectors are the in-process model's (cosine ≥ 0.999, English and other languages, a text past the
  model's 256 tokens);
- a whole search job (ingest, search, answer) runs on the server, and no process of the stack maps torch;
- the server down: the job still succeeds by keyword (BM25) only, degraded, with the embeddings server named in
  its search metadata.

The server's virtual environment is installed on first use (``make embedding-server``; ~30-60 s once, then a
stamp) and the server takes ~10 s to start.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from agentsearch.devstack import DevStack
from agentsearch.devstack.embedding_server import SERVED_MODEL, EmbeddingServer
from agentsearch.pipeline.retrieval.embedder import Embedder
from agentsearch.pipeline.retrieval.remote_embedder import EmbeddingServiceError, RemoteEmbedder
from tests.integration.conftest import SAMPLE_CORPUS, search

pytestmark = pytest.mark.integration

API_KEY = "it-embeddings-key"
TEXTS = [
    "What was Northwind Energy's revenue in the second quarter of 2024?",
    "Die Windkraftanlagen in der Nordsee lieferten im Februar weniger Strom.",
    "Les panneaux solaires produisent davantage d'électricité en été.",
    "¿Cuántos megavatios tiene la nueva planta solar?",
    "Ветряные электростанции работают лучше зимой.",
    "太陽光発電の出力は夏に増加します。",
    "风力发电在冬季更加稳定。",
    # Past the model's 256 tokens: server and model must cut it the same way.
    " ".join(["Quarterly revenue grew while wind output fell and solar output rose."] * 40),
]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def mapped_libraries(pid: int) -> str:
    """The shared objects a live process has mapped: torch's would be there once imported."""
    return Path(f"/proc/{pid}/maps").read_text()


def embedding_requests(server: EmbeddingServer) -> int:
    return server.log.read_text().count('"POST /v1/embeddings HTTP/1.1" 200')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with EmbeddingServer(tmp_path_factory.mktemp("embedding-server"), api_key=API_KEY) as running:
        print(f"\nembedding server started in {running.start_s:.1f} s")
        yield running


@pytest.fixture
def server_up(server):
    if server.proc is None:  # a test before stopped it
        server.start()
    return server


@pytest.fixture(scope="module")
def embedding_stack(server, tmp_path_factory):
    env = {"AGENTSEARCH_EMBEDDING_URL": server.url, "AGENTSEARCH_EMBEDDING_API_KEY": API_KEY,
           "AGENTSEARCH_MILVUS_RETRY_S": "10"}
    with DevStack(tmp_path_factory.mktemp("embedding-stack"), extra_env=env) as running:
        yield running


@pytest.fixture(scope="module")
def server_collection(embedding_stack, server):
    """The sample corpus, embedded by the server as the stack's worker indexed it."""
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    before = embedding_requests(server)
    collection_id = embedding_stack.ingest("embedded-by-server", documents)
    assert embedding_requests(server) > before
    return collection_id


def test_the_servers_vectors_are_the_in_process_models(server_up):
    remote = RemoteEmbedder(server_up.url, SERVED_MODEL, api_key=API_KEY)
    local = Embedder(SERVED_MODEL)
    cosines = [cosine(a, b) for a, b in zip(remote.embed(TEXTS), local.embed(TEXTS), strict=True)]
    print(f"cosine server/in-process: min {min(cosines):.9f}; 1 - cosine:", " ".join(f"{1 - c:.1e}" for c in cosines))
    assert min(cosines) >= 0.999, cosines
    assert remote.dimension == local.dimension == 384
    with pytest.raises(EmbeddingServiceError, match="HTTP 401"):
        RemoteEmbedder(server_up.url, SERVED_MODEL).embed(["no key"])


def test_a_search_job_runs_on_the_server_and_no_process_holds_torch(embedding_stack, server_collection, server_up):
    before = embedding_requests(server_up)
    with embedding_stack.http() as http:
        job = search(http, server_collection, "Which wind farm in the North Sea had low output?", agents=[],
                     search={"strategy": "semantic"}, use_cache=False)
    assert job["status"] == "succeeded", job
    response = job["response"]
    metadata = response["metadata"]["search"]
    assert response["sources"] and not response["degraded"], response
    assert "errors" not in metadata and "fallback" not in metadata, metadata
    assert metadata["strategy_used"] == "semantic" and metadata["returned"] >= 1
    # The query's embedding, at least, came from the server (the answer's sentences may have been stored at ingest).
    assert embedding_requests(server_up) > before

    pids = [embedding_stack.api_proc.pid]
    for index, proc in enumerate(embedding_stack.worker_procs):
        pids += [proc.pid, *embedding_stack.worker_children(index)]
    for pid in pids:
        assert "libtorch" not in mapped_libraries(pid), f"process {pid} of the stack loaded torch"


def test_with_the_server_down_the_job_searches_by_keyword_and_says_why(embedding_stack, server_collection, server):
    server.stop()
    started = time.monotonic()
    with embedding_stack.http() as http:
        job = search(http, server_collection, "Harrow Ridge solar farm commissioning", agents=[], use_cache=False)
    elapsed = time.monotonic() - started
    assert job["status"] == "succeeded", job
    response = job["response"]
    metadata = response["metadata"]["search"]
    assert response["sources"], response
    assert metadata["fallback"] == "keyword_only" and metadata["weights"]["semantic"] == 0.0, metadata
    (error,) = metadata["errors"]
    assert error.startswith("embedding failed: EmbeddingServiceError: embeddings server unreachable"), error
    assert response["degraded"] is True and response["degraded_reasons"] == [error]
    assert elapsed < 30, f"the fallback took {elapsed:.1f} s"
