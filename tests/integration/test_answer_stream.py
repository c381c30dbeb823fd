"""The answer streamed as it is written, over the job's server-sent events and in ``agentsearch search --stream``.

The suite's stack has no LLM, so this module adds a thread-pool worker and an API of its own, configured with a
local OpenAI-compatible server that streams its reply (``tests/support/fake_llm.py``, slow enough that the job is
visibly still running while the text arrives). They share the suite's database, Milvus and cache Redis, on a broker
and result backend of their own (other Redis databases), so only this worker runs this API's jobs. The offline
answer and the whole-job cache are checked on the suite's own stack.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from datetime import datetime

import httpx
import pytest

from agentsearch.devstack import BIN, REPO
from agentsearch.pipeline.text.spans import sentence_spans
from tests.integration.conftest import extra_api_and_worker, wait_job
from tests.support.events import read_events
from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.integration

PIECE_INTERVAL_S = 0.1  # a reply of about 100 words: seconds of text, more than a loaded machine's delays
LLM_BROKER_DB, LLM_RESULTS_DB = 7, 8
# The sentences the model streamed, by question: what the answer's deltas must show, one by one.
STREAMED: dict[str, list[str]] = {}


def llm_reply(body: dict) -> str:
    """The first two sentences of sources 1 and 2, word for word and cited: sentences the check supports, so each
    is shown as soon as the model has written it."""
    user = body["messages"][-1]["content"]
    question = user.rsplit("Question:", 1)[-1].strip()
    blocks = re.findall(r"^\[(\d+)\][^\n]*\n(.+)$", user, re.MULTILINE)
    sentences = [(s.text, int(n)) for n, text in blocks[:2] for s in sentence_spans(text)[:2]]
    STREAMED[question] = [text for text, _ in sentences]
    return json.dumps({"sentences": [{"text": text, "sources": [n]} for text, n in sentences]})


def cited(sentence: str, n: int = 1) -> str:
    """A streamed sentence as the answer writes it: its citation before its end mark."""
    return f"{sentence.rstrip('.')} [{n}]."


@pytest.fixture(scope="module")
def llm():
    with FakeLLM(default=llm_reply, stream_interval_s=PIECE_INTERVAL_S) as server:
        yield server


@pytest.fixture(scope="module")
def llm_api(stack, collection, llm, tmp_path_factory):
    """An API and a worker whose answers come from the streaming LLM; the API's URL."""
    workdir = tmp_path_factory.mktemp("answer-stream")
    env = {**stack.env, "AGENTSEARCH_BROKER_URL": f"{stack.redis_base}/{LLM_BROKER_DB}",
           "AGENTSEARCH_RESULT_BACKEND": f"{stack.redis_base}/{LLM_RESULTS_DB}",
           "AGENTSEARCH_OPENAI_BASE_URL": llm.base_url, "AGENTSEARCH_OPENAI_MODEL": "fake-model"}
    with extra_api_and_worker(workdir, env, queues="celery,artifacts", concurrency=4, name="llm"):
        yield env


def client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"})


def submit(http: httpx.Client, collection_id: str, query: str, use_cache: bool = False) -> str:
    response = http.post("/v1/search", json={"collection_id": collection_id, "query": query, "agents": [],
                                             "use_cache": use_cache})
    # 200 for a job answered at once from the whole-job cache, 202 for one that runs.
    assert response.status_code in ((200, 202) if use_cache else (202,)), response.text
    return response.json()["job_id"]


def answer_part(events: list[tuple[float, str, dict]]) -> tuple[list[dict], dict]:
    deltas = [data for _, name, data in events if name == "answer.delta"]
    (answer,) = [data for _, name, data in events if name == "answer"]
    return deltas, answer


def test_deltas_arrive_in_order_before_the_job_ends_and_join_to_the_answer(stack, collection, llm_api):
    question = f"solar output {uuid.uuid4().hex[:6]}"
    with client(llm_api["AGENTSEARCH_API_URL"], stack.api_key) as http:
        job_id = submit(http, collection, question)
        status_at_first_delta = []

        def on_event(events):
            if events[-1][1] == "answer.delta" and not status_at_first_delta:
                status_at_first_delta.append(http.get(f"/v1/jobs/{job_id}").json()["status"])

        events = read_events(http, job_id, on_event)
        job = wait_job(http, job_id)
    deltas, answer = answer_part(events)
    names = [name for _, name, _ in events]
    assert job["status"] == "succeeded" and job["response"]["metadata"]["answer"]["method"] == "llm"
    # The offline answer came first, whole, as the quick answer (seq 0), before any of the model's sentences; the
    # deltas alone still join to the answer, so a client that ignores it sees what it always saw.
    (quick,) = [data for _, name, data in events if name == "answer.quick"]
    assert quick["seq"] == 0 and re.search(r"\[\d\]", quick["text"])
    assert names.index("answer.quick") < names.index("answer.delta")
    seqs = [data["seq"] for _, name, data in events if name.startswith("answer")]
    assert seqs == list(range(len(seqs))) and len(deltas) >= 4
    # The deltas since the last reset join to the answer. A reset comes only once the draft is complete, when the
    # delivery rule put another sentence first or a quote in a restated sentence's place.
    resets = [k for k, name in enumerate(names) if name == "answer.reset"]
    since = [data for k, (_, name, data) in enumerate(events) if name == "answer.delta" and k > max(resets, default=-1)]
    assert "".join(d["text"] for d in since) == answer["text"] == job["response"]["answer"]
    assert all(data["reason"] == "the answer was corrected once complete" for _, name, data in events
               if name == "answer.reset")
    # Each of the model's sentences was one delta, cited, as soon as it was written and checked.
    first, second = STREAMED[question][:2]
    assert [d["text"] for d in deltas[:2]] == [cited(first), " " + cited(second)]
    assert answer["method"] == "llm" and answer["source"] == "stream"
    assert names.index("answer") < names.index("done")
    # The first delta came while the job was still running, well before its end.
    first = next(t for t, name, _ in events if name == "answer.delta")
    done = next(t for t, name, _ in events if name == "done")
    assert status_at_first_delta == ["running"]
    assert done - first > 1.0, (done - first)
    finished = datetime.fromisoformat(job["finished_at"]).timestamp()
    assert time.time() - (time.monotonic() - first) < finished - 1.0


def test_a_late_client_gets_the_text_so_far_first_then_the_rest(stack, collection, llm_api):
    with client(llm_api["AGENTSEARCH_API_URL"], stack.api_key) as http, \
            client(llm_api["AGENTSEARCH_API_URL"], stack.api_key) as late_http:
        job_id = submit(http, collection, f"wind farms {uuid.uuid4().hex[:6]}")
        late: dict[str, list] = {}
        joined_at = []

        def on_event(events):
            # The late client connects once the first one has seen two deltas (two of the four sentences).
            if sum(1 for _, name, _ in events if name == "answer.delta") == 2 and not joined_at:
                joined_at.append(time.monotonic())
                threading.Thread(target=lambda: late.update(events=read_events(late_http, job_id))).start()

        early = read_events(http, job_id, on_event)
        deadline = time.monotonic() + 30
        while "events" not in late and time.monotonic() < deadline:
            time.sleep(0.05)
        after_end = read_events(http, job_id)  # a client that connects after the job ended
    early_deltas, early_answer = answer_part(early)
    late_deltas, late_answer = answer_part(late["events"])
    end_deltas, end_answer = answer_part(after_end)
    for deltas in (late_deltas, end_deltas):
        assert deltas == early_deltas  # replayed from seq 0, then the rest, the same pieces
    assert late_answer == early_answer == end_answer
    # The late client got the first pieces at once (replayed), and more of them came afterwards (live).
    late_times = [t for t, name, _ in late["events"] if name == "answer.delta"]
    assert late_times[1] - joined_at[0] < 2.0  # the other two sentences take seconds more
    assert late_times[-1] - late_times[1] > 0.5


def test_offline_the_answer_is_one_delta_then_the_answer(stack, collection):
    with stack.http() as http:
        job_id = submit(http, collection, f"solar {uuid.uuid4().hex[:6]}")
        events = read_events(http, job_id)
        job = wait_job(http, job_id)
    deltas, answer = answer_part(events)
    assert [d["seq"] for d in deltas] == [0]
    assert deltas[0]["text"] == answer["text"] == job["response"]["answer"]
    assert answer["method"] == "extractive" and answer["source"] == "stream"


def test_a_cache_hit_gives_the_stored_answer_as_one_delta(stack, collection):
    query = f"battery storage {uuid.uuid4().hex[:6]}"
    with stack.http() as http:
        first = submit(http, collection, query, use_cache=True)
        wait_job(http, first)
        again = submit(http, collection, query, use_cache=True)
        assert again != first and http.get(f"/v1/jobs/{again}").json()["cached"] is True
        deltas, answer = answer_part(read_events(http, again))
        stored = http.get(f"/v1/jobs/{first}").json()["response"]["answer"]
    assert [d["text"] for d in deltas] == [stored] and answer["text"] == stored and answer["source"] == "stored"


def test_cli_search_stream_prints_the_text_as_it_arrives(stack, collection, llm_api):
    query = f"solar panels {uuid.uuid4().hex[:6]}"
    env = {**os.environ, **llm_api, "AGENTSEARCH_API_KEY": stack.api_key}
    proc = subprocess.Popen([str(BIN / "agentsearch"), "search", query, "--collection", "it-corpus", "--stream"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, seen = b"", {}
    started = time.monotonic()
    while chunk := os.read(proc.stdout.fileno(), 4096):
        out += chunk
        sentences = STREAMED.get(query) or []
        for key, sentence in (("first", sentences[:1]), ("last", sentences[-1:]), ("sources", ["sources:"])):
            if sentence and sentence[0].rstrip(".").encode() in out and key not in seen:
                seen[key] = time.monotonic()
        assert time.monotonic() - started < 90, out
    assert proc.wait(30) == 0, proc.stderr.read().decode()
    text = out.decode()
    first, last = STREAMED[query][0], STREAMED[query][-1]
    assert text.startswith("answer:\n  " + cited(first))
    assert text.count(last.rstrip(".")) == 1  # printed as it came, not again at the end
    assert "sources:\n  [1] " in text and text.index("sources:") > text.index(last.rstrip("."))
    # The first sentence was printed well before the last.
    assert seen["last"] - seen["first"] > 1.0
