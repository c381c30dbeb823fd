"""The first words at once, whatever the model's speed: with an LLM, the answer step sends the offline answer whole as
the quick answer (``quick`` entry, ``answer.quick`` event) before the model's checked sentences; the deltas still
join to the final ``answer``, which replaces it (src/agentsearch/pipeline/job/answer_stream.py,
src/agentsearch/api/answer_events.py). In-process Redis and a local LLM server that writes slowly."""

from __future__ import annotations

import asyncio
import json
import uuid

import fakeredis

from agentsearch.api.answer_events import AnswerEvents
from agentsearch.pipeline.eval.grounding import FirstDelta
from agentsearch.pipeline.job.answer import extractive_answer
from agentsearch.pipeline.job.answer_stream import AnswerChannel, AnswerStreamReader
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM
from tests.support.super_bowl import DOCS, QUESTION

fake, llm = llm_fixtures.fake, llm_fixtures.llm
PATRIOTS = {"text": "The New England Patriots won Super Bowl XLIX.", "sources": [2]}
AGREES = FakeLLM.entailment(lambda claim, source: ("supported", claim))


def state() -> JobState:
    return JobState(job_id=str(uuid.uuid4()), collection_id="c1", query=QUESTION, original_query=QUESTION,
                    documents=DOCS)


def entries_of(server, job_id: str):
    return asyncio.run(AnswerStreamReader(fakeredis.FakeAsyncRedis(server=server), job_id).read())


def test_the_offline_answer_comes_first_as_the_quick_answer_and_the_final_answer_replaces_it(fake, llm):
    server = fakeredis.FakeServer()
    body = json.dumps({"sentences": [PATRIOTS]})
    # A slow model: its first sentence takes a while; the quick answer does not wait for it.
    fake.script(FakeLLM.streamed([body[i:i + 8] for i in range(0, len(body), 8)], interval_s=0.02), AGREES)
    job = state()
    out = answer_step(job, llm=llm, stream=AnswerChannel(fakeredis.FakeRedis(server=server), job.job_id,
                                                         min_chars=1, max_wait_s=0))
    entries = entries_of(server, job.job_id)
    assert entries[0].kind == "quick" and entries[0].seq == 0
    assert entries[0].text == extractive_answer(QUESTION, DOCS).text
    # The deltas alone, joined, are the final answer: a client reading only them, or only `answer`, sees no change.
    assert "".join(e.text for e in entries if e.kind == "delta") == out.answer
    assert entries[-1].kind == "answer" and entries[-1].text == out.answer
    assert [e.seq for e in entries] == list(range(len(entries)))
    assert out.metadata["answer"]["method"] == "llm"


def test_the_events_route_names_it_answer_quick(fake, llm):
    server = fakeredis.FakeServer()
    channel = AnswerChannel(fakeredis.FakeRedis(server=server), "jq", min_chars=1, max_wait_s=0)
    channel.quick("Offline [1].")
    channel.write("Model [1].")
    channel.finish("Model [1].", method="llm")

    async def run():
        events = AnswerEvents(AnswerStreamReader(fakeredis.FakeAsyncRedis(server=server), "jq"))
        return [e async for e in events.wait(0.2)]

    names = [chunk.split("\n")[0].removeprefix("event: ") for chunk in asyncio.run(run())]
    assert names == ["answer.quick", "answer.delta", "answer"]
    assert json.loads(asyncio.run(run())[0].split("\n")[1].removeprefix("data: ")) == {"seq": 0,
                                                                                        "text": "Offline [1]."}


def test_without_an_llm_there_is_no_quick_answer_and_a_reader_sees_words_at_once(fake, llm):
    server = fakeredis.FakeServer()
    job = state()
    answer_step(job, stream=AnswerChannel(fakeredis.FakeRedis(server=server), job.job_id))
    assert [e.kind for e in entries_of(server, job.job_id)] == ["delta", "answer"]
    # The evaluation's sink: the first words are the quick answer's when the model is slower.
    sink = FirstDelta()
    sink.quick("Offline [1].")
    sink.write("Model [1].")
    assert sink.words_ms is not None and sink.words_ms == sink.quick_ms <= sink.first_ms
