"""The answer as it is written: the delta channel, its batching, the LLM client's stream, the reply's sentences as they
arrive, the answer step writing to the channel and the events route's answer part (in-process Redis, a local LLM
server)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import fakeredis
import httpx
import pytest
import redis
from click.testing import CliRunner
from redis.backoff import NoBackoff
from redis.retry import Retry

from agentsearch.api.answer_events import AnswerEvents
from agentsearch.cli.client import ApiClient
from agentsearch.cli.search import search
from agentsearch.pipeline.job.answer import generate_answer
from agentsearch.pipeline.job.answer.llm import SentenceReader
from agentsearch.pipeline.job.answer_stream import AnswerChannel, AnswerStreamReader, DeltaBatcher, stream_key
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from agentsearch.pipeline.platform.llm import LLMError
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM
from tests.support.super_bowl import DOCS, QUESTION


@pytest.fixture
def server():
    return fakeredis.FakeServer()


@pytest.fixture
def client(server):
    return fakeredis.FakeRedis(server=server)


def read_all(server, job_id: str, reader: AnswerStreamReader | None = None, block_s: float | None = None):
    reader = reader or AnswerStreamReader(fakeredis.FakeAsyncRedis(server=server), job_id)
    return asyncio.run(reader.read(block_s=block_s))


def unbatched(client, job_id: str, **kwargs) -> AnswerChannel:
    return AnswerChannel(client, job_id, min_chars=1, max_wait_s=0, **kwargs)


# --- the channel -------------------------------------------------------------------------------------------------


def test_deltas_are_read_in_order_then_the_end_marker(server, client):
    channel = unbatched(client, "j1")
    channel.start()
    for piece in ["The ", "Patriots ", "won [2]."]:
        channel.write(piece)
    channel.finish("The Patriots won [2].", method="llm")
    entries = read_all(server, "j1")
    assert [(e.kind, e.seq, e.text) for e in entries] == [
        ("delta", 0, "The "), ("delta", 1, "Patriots "), ("delta", 2, "won [2]."),
        ("answer", 3, "The Patriots won [2]."),
    ]
    assert entries[-1].data == {"method": "llm"}
    assert 0 < client.ttl(stream_key("j1")) <= 3600


def test_a_late_reader_gets_the_text_so_far_first_then_the_rest(server, client):
    channel = unbatched(client, "j2")
    channel.start()
    channel.write("one ")
    channel.write("two ")

    async def late_reader():
        reader = AnswerStreamReader(fakeredis.FakeAsyncRedis(server=server), "j2")
        replayed = await reader.read(block_s=0.1)
        # The rest is written while the reader waits.
        loop = asyncio.get_running_loop()
        writer = loop.run_in_executor(None, lambda: (time.sleep(0.1), channel.write("three"),
                                                     channel.finish("one two three", method="llm")))
        live = []
        while not live or live[-1].kind != "answer":
            live += await reader.read(block_s=2)
        await writer
        return replayed, live

    replayed, live = asyncio.run(late_reader())
    assert [e.text for e in replayed] == ["one ", "two "]
    assert [e.seq for e in live] == [2, 3] and live[0].text == "three" and live[-1].kind == "answer"


def test_a_step_that_runs_again_starts_its_stream_from_nothing(server, client):
    unbatched(client, "j3").write("half an answ")
    channel = unbatched(client, "j3")
    channel.start()
    channel.finish("Whole.", method="extractive")
    assert [(e.kind, e.text) for e in read_all(server, "j3")] == [("delta", "Whole."), ("answer", "Whole.")]


def test_the_stream_is_bounded_by_dropping_the_oldest_entries(server, client):
    channel = unbatched(client, "j4", max_entries=10)
    for i in range(25):
        channel.write(f"p{i} ")
    entries = read_all(server, "j4")
    assert len(entries) == 10 and entries[0].seq == 15 and entries[-1].seq == 24


def test_finish_sends_what_the_validated_answer_differs_by(server, client):
    channel = unbatched(client, "j5")
    channel.write("Paris [1]")
    channel.finish("Paris [1] is big.", method="llm")  # a tail the stream did not carry
    channel2 = unbatched(client, "j6")
    channel2.write("Paris [9] [1]")
    channel2.finish("Paris [1]", method="llm")  # a citation of no source dropped on the whole text
    assert [(e.kind, e.text) for e in read_all(server, "j5")] == [
        ("delta", "Paris [1]"), ("delta", " is big."), ("answer", "Paris [1] is big.")]
    assert [(e.kind, e.text) for e in read_all(server, "j6")] == [
        ("delta", "Paris [9] [1]"), ("reset", ""), ("delta", "Paris [1]"), ("answer", "Paris [1]")]


def test_a_redis_outage_costs_the_preview_not_the_answer():
    broken = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    channel = AnswerChannel(broken, "j7")
    channel.start()
    channel.write("x" * 100)
    channel.finish("x" * 100, method="extractive")
    assert channel.broken


# --- the batching rule -------------------------------------------------------------------------------------------


def test_tiny_pieces_are_batched_by_size_or_age_and_flushed_at_the_end():
    sent, now = [], [0.0]
    batcher = DeltaBatcher(sent.append, min_chars=10, max_wait_s=0.05, clock=lambda: now[0])
    for piece in ["ab", "cd", "efgh", "ij"]:  # 10 characters: one delta
        batcher.add(piece)
    assert sent == ["abcdefghij"]
    batcher.add("k")
    now[0] = 0.04
    batcher.add("l")
    assert sent == ["abcdefghij"]  # 2 characters, 40 ms: kept
    now[0] = 0.06
    batcher.add("m")  # the buffer's first piece is 60 ms old: sent
    assert sent == ["abcdefghij", "klm"]
    batcher.add("x" * 500)  # a large piece goes whole, never cut
    batcher.add("n")
    batcher.flush()
    assert sent == ["abcdefghij", "klm", "x" * 500, "n"]
    with pytest.raises(ValueError):
        DeltaBatcher(sent.append, min_chars=0)


# --- the LLM client's stream -------------------------------------------------------------------------------------


fake, llm = llm_fixtures.fake, llm_fixtures.llm


MESSAGES = [{"role": "user", "content": "hi"}]


def test_the_stream_gives_the_pieces_in_order_and_asks_for_a_stream(fake, llm):
    fake.script(FakeLLM.streamed(["Hel", "lo ", "wor", "ld"], interval_s=0.01))
    assert list(llm.stream(MESSAGES, timeout_s=5)) == ["Hel", "lo ", "wor", "ld"]
    assert fake.requests[0]["stream"] is True and fake.requests[0]["model"] == "fake-model"


def test_the_stream_is_retried_before_its_first_piece(fake, llm):
    fake.script(FakeLLM.error(503), FakeLLM.error(429), FakeLLM.streamed(["ok"]))
    assert list(llm.stream(MESSAGES, timeout_s=5)) == ["ok"]
    assert len(fake.requests) == 3


def test_the_stream_is_not_retried_once_a_piece_was_given(fake, llm):
    fake.script(FakeLLM.streamed(["a", "b", "c"], break_after=2), FakeLLM.streamed(["never"]))
    got = []
    with pytest.raises(LLMError) as caught:
        for piece in llm.stream(MESSAGES, timeout_s=5):
            got.append(piece)
    assert got == ["a", "b"] and caught.value.attempts == 1 and len(fake.requests) == 1


def test_the_stream_keeps_its_budget_and_fails_at_once_on_a_client_error(fake, llm):
    fake.script(FakeLLM.streamed(["a"] * 600, interval_s=0.05))
    started = time.monotonic()
    with pytest.raises(LLMError, match="budget"):
        list(llm.stream(MESSAGES, timeout_s=0.5))
    assert time.monotonic() - started < 10  # the budget's half second, not the stream's 30 s
    fake.script(FakeLLM.error(400, "bad request"), FakeLLM.streamed(["never"]))
    with pytest.raises(LLMError):
        list(llm.stream(MESSAGES, timeout_s=5))
    assert len(fake.requests) == 2  # no retry of the 400


# --- the reply's sentences, each once it is complete ------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_each_sentence_of_a_structured_reply_is_given_once_its_item_closes(size):
    reply = json.dumps({"sentences": [{"text": 'The "Pats" won é 😀.', "sources": [2]},
                                      {"text": "They beat Seattle [1].", "sources": []}]})
    reader = SentenceReader(n_sources=2)
    given = []
    for i in range(0, len(reply), size):
        for sentence in reader.feed(reply[i:i + size]):
            given.append((i + size, sentence))
    given.extend((len(reply), s) for s in reader.close())
    assert [(s.text, s.cited) for _, s in given] == [('The "Pats" won é 😀.', [2]), ("They beat Seattle.", [1])]
    if size < 100:  # the first sentence came while the second was still being written
        assert given[0][0] < len(reply) - 20


def test_a_prose_reply_gives_a_sentence_once_the_next_one_begins():
    reader = SentenceReader(n_sources=2)
    first = reader.feed("The Patriots won Super Bowl XLIX [2]. The game was pla")
    assert [(s.text, s.cited) for s in first] == [("The Patriots won Super Bowl XLIX.", [2])]
    assert reader.feed("yed in Glendale [2].") == []
    assert [s.text for s in reader.close()] == ["The game was played in Glendale."]


# --- the answer step writes the channel --------------------------------------------------------------------------


def job_state() -> JobState:
    return JobState(job_id=str(uuid.uuid4()), collection_id="c1", query=QUESTION, original_query=QUESTION,
                    documents=DOCS)


PATRIOTS = {"text": "The New England Patriots won Super Bowl XLIX.", "sources": [2]}
GLENDALE = {"text": "The game was played in Glendale, Arizona.", "sources": [2]}
INVENTED = {"text": "The Seattle Seahawks lost by 4 points.", "sources": [2]}
AGREES = FakeLLM.entailment(lambda claim, source: ("supported", claim))


def test_the_llm_answer_streams_checked_sentences_and_its_deltas_join_to_the_answer(server, client, fake, llm):
    body = json.dumps({"sentences": [PATRIOTS, INVENTED, GLENDALE]})
    fake.script(FakeLLM.streamed([body[i:i + 6] for i in range(0, len(body), 6)], interval_s=0.002), AGREES)
    state = job_state()
    out = answer_step(state, llm=llm, stream=unbatched(client, state.job_id))
    entries = read_all(server, state.job_id)
    deltas = [e.text for e in entries if e.kind == "delta"]
    # One delta per checked sentence as it completed; the invented one was never shown.
    assert deltas[:2] == ["The New England Patriots won Super Bowl XLIX [2].",
                          " The game was played in Glendale, Arizona [2]."]
    assert not any("Seahawks" in d for d in deltas)
    assert "reset" not in [e.kind for e in entries]
    assert "".join(deltas) == out.answer
    assert entries[-1].kind == "answer" and entries[-1].text == out.answer and entries[-1].data["method"] == "llm"


def test_a_stream_of_unsupported_sentences_is_replaced_by_the_offline_answer(server, client, fake, llm):
    fake.script(FakeLLM.streamed(json.dumps({"sentences": [INVENTED]}), interval_s=0.002))
    state = job_state()
    out = answer_step(state, llm=llm, stream=unbatched(client, state.job_id))
    entries = read_all(server, state.job_id)
    assert out.metadata["answer"]["method"] == "extractive"
    assert not any("Seahawks" in e.text for e in entries)
    assert "".join(e.text for e in entries if e.kind == "delta") == out.answer


def test_the_offline_answer_is_one_delta(server, client):
    state = job_state()
    out = answer_step(state, stream=AnswerChannel(client, state.job_id))
    entries = read_all(server, state.job_id)
    assert [e.kind for e in entries] == ["delta", "answer"]
    assert entries[0].text == entries[1].text == out.answer and "[2]" in out.answer


def test_an_llm_that_fails_part_way_voids_its_text_before_the_offline_answer(server, client, fake, llm):
    body = json.dumps({"sentences": [PATRIOTS, GLENDALE]})
    fake.script(FakeLLM.streamed([body[:60], body[60:90], body[90:]], break_after=2))
    channel = unbatched(client, "jf")
    answer = generate_answer(QUESTION, DOCS, llm=llm, stream=channel)
    channel.finish(answer.text, method=answer.method, fallback_reason=answer.fallback_reason)
    kinds = [e.kind for e in read_all(server, "jf")]
    assert answer.method == "extractive" and "LLMError" in answer.fallback_reason
    assert kinds[-3:] == ["reset", "delta", "answer"] and kinds.count("delta") >= 2


# --- the events route's answer part ------------------------------------------------------------------------------


def events_of(chunks: list[str]) -> list[tuple[str, dict]]:
    out = []
    for chunk in chunks:
        name, data = chunk.strip().split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_events_replay_the_stream_then_the_answer(server, client):
    channel = unbatched(client, "je")
    channel.write("Paris ")
    channel.write("[1]")
    channel.finish("Paris [1]", method="llm")

    async def run():
        events = AnswerEvents(AnswerStreamReader(fakeredis.FakeAsyncRedis(server=server), "je"))
        got = [e async for e in events.wait(0.2)]
        got += [e async for e in events.close("succeeded", _never)]
        return got

    assert events_of(asyncio.run(run())) == [
        ("answer.delta", {"seq": 0, "text": "Paris "}), ("answer.delta", {"seq": 1, "text": "[1]"}),
        ("answer", {"seq": 2, "text": "Paris [1]", "method": "llm", "fallback_reason": None, "source": "stream"})]


async def _never():
    raise AssertionError("the stored answer is not read when the stream carried it")


def test_events_without_a_stream_give_the_stored_answer_as_one_delta(server):
    async def stored():
        return {"text": "Cached [1].", "method": "extractive", "fallback_reason": None}

    async def run(status):
        events = AnswerEvents(AnswerStreamReader(fakeredis.FakeAsyncRedis(server=server), "cached-job"))
        return [e async for e in events.close(status, stored)]

    assert events_of(asyncio.run(run("succeeded"))) == [
        ("answer.delta", {"seq": 0, "text": "Cached [1]."}),
        ("answer", {"seq": 1, "text": "Cached [1].", "method": "extractive", "fallback_reason": None,
                    "source": "stored"})]
    assert asyncio.run(run("failed")) == []


# --- the CLI's reading of the events -----------------------------------------------------------------------------


def test_the_cli_client_reads_the_events_until_done():
    body = ('event: status\ndata: {"status": "running"}\n\n'
            'event: answer.delta\ndata: {"seq": 0, "text": "Par"}\n\n'
            'event: answer.delta\ndata: {"seq": 1, "text": "is [1]"}\n\n'
            'event: answer\ndata: {"seq": 2, "text": "Paris [1]"}\n\n'
            'event: done\ndata: {"status": "succeeded", "error": null}\n\n'
            'event: never\ndata: {}\n\n')

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/jobs/j1/events" and request.headers["authorization"] == "Bearer k"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    api = ApiClient("http://api.test", "k")
    api.http = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(handler),
                            headers={"Authorization": "Bearer k"})
    events = list(api.events("j1"))
    assert [name for name, _ in events] == ["status", "answer.delta", "answer.delta", "answer", "done"]
    assert "".join(d["text"] for name, d in events if name == "answer.delta") == "Paris [1]"


def test_the_cli_refuses_stream_with_json_or_no_wait():
    for extra in (["--json"], ["--no-wait"]):
        result = CliRunner().invoke(search, ["q", "--collection", "c", "--stream", *extra])
        assert result.exit_code != 0 and "--stream" in result.output
