"""Time to the answer's first delta against time to the whole answer, through the HTTP API's event stream.

Starts the distributed stack on this machine (``devstack``) with its workers' LLM pointed at a local
OpenAI-compatible server in this process that streams its reply at a model's pace (``--token-ms`` per token,
``--tokens`` tokens: 20 ms and 300 by default, about 6 s of text), ingests the sample corpus, then runs ``--jobs``
jobs one after another, each read from ``GET /v1/jobs/{id}/events`` from its submission: the time to the first
``answer.delta``, to the ``answer`` event and to ``done``. Then the cost of the channel on the path that does not
stream: the offline answer step over the corpus with and without writing to the stack's Redis (``--repeat`` times
each, interleaved), and an LLM answer whose reply comes without pause, asked whole and streamed. Prints medians and
writes them to ``src/agentsearch/bench/results/answer_stream.md``.

Usage::

    .venv/bin/python -m agentsearch.bench.answer_stream                       # 8 jobs, 300 tokens at 20 ms
    .venv/bin/python -m agentsearch.bench.answer_stream --jobs 20 --tokens 500 --token-ms 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import redis

from agentsearch.bench.common import SAMPLE_CORPUS, Target, bench_stack, ingest, machine
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.job.answer import generate_answer
from agentsearch.pipeline.job.answer_stream import AnswerChannel
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from agentsearch.pipeline.platform.llm import LLMClient
from tests.support.fake_llm import FakeLLM

REPO = Path(__file__).resolve().parents[3]
RESULTS = REPO / "src" / "agentsearch" / "bench" / "results" / "answer_stream.md"


def reply_of(tokens: int):
    def reply(body: dict) -> str:
        return json.dumps({"answer": " ".join(f"t{i}" for i in range(tokens - 1)) + " [1]."})
    return reply


def one_job(target: Target, collection_id: str) -> dict[str, float]:
    """Seconds from submission to the first delta, the ``answer`` event and ``done``; the deltas' count."""
    with target.http() as http:
        started = time.monotonic()
        response = http.post("/v1/search", json={"collection_id": collection_id, "agents": [], "use_cache": False,
                                                 "query": f"solar output {uuid.uuid4().hex[:6]}"})
        response.raise_for_status()
        job_id = response.json()["job_id"]
        marks: dict[str, float] = {}
        deltas = 0
        with http.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
            name = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    now = time.monotonic() - started
                    if name == "answer.delta":
                        deltas += 1
                        marks.setdefault("first_delta_s", now)
                    elif name in ("answer", "done"):
                        marks[f"{name}_s"] = now
                    if name == "done":
                        break
    return {**marks, "deltas": deltas}


def channel_cost(redis_url: str, repeat: int) -> dict[str, float]:
    """The offline answer step's time (ms) without and with the channel (one delta and the end marker)."""
    documents = [Document(id=d["id"], title=d.get("title"), text=d["text"], score=1.0 / (n + 1))
                 for n, d in enumerate(json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines()
                                       if line.strip())][:5]
    client = redis.Redis.from_url(redis_url)
    state = JobState(job_id="bench", collection_id="c", query="What was the revenue in Q4 2025?",
                     documents=documents)
    plain: list[float] = []
    streamed: list[float] = []
    for _ in range(repeat):
        for out, stream in ((plain, None), (streamed, AnswerChannel(client, str(uuid.uuid4())))):
            started = time.perf_counter()
            answer_step(state, stream=stream)
            out.append((time.perf_counter() - started) * 1000)
    return {"plain_ms": statistics.median(plain), "streamed_ms": statistics.median(streamed)}


class Discard:
    """A stream that keeps nothing: the answer is read sentence by sentence as for a stream, and sent nowhere."""

    def quick(self, text: str) -> None:
        pass

    def write(self, piece: str) -> None:
        pass

    def reset(self, reason: str) -> None:
        pass


def llm_path_cost(redis_url: str, tokens: int, repeat: int) -> dict[str, float]:
    """The LLM answer's time (ms) for a reply of ``tokens`` sent without pause: asked whole (``complete``) against
    streamed into the channel: what the stream's parsing, text filter and batched writes cost beside the model."""
    documents = [Document(id="d1", title="Report", text="Revenue rose 12%.", score=0.9)]
    client = redis.Redis.from_url(redis_url)
    whole: list[float] = []
    parsed: list[float] = []
    streamed: list[float] = []
    with FakeLLM(default=reply_of(tokens)) as fast:
        llm = LLMClient(fast.base_url, model="fake-model")
        for _ in range(repeat):
            started = time.perf_counter()
            generate_answer("What rose?", documents, llm=llm)
            whole.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            generate_answer("What rose?", documents, llm=llm, stream=Discard())
            parsed.append((time.perf_counter() - started) * 1000)
            channel = AnswerChannel(client, str(uuid.uuid4()))
            started = time.perf_counter()
            answer = generate_answer("What rose?", documents, llm=llm, stream=channel)
            channel.finish(answer.text, method=answer.method)
            streamed.append((time.perf_counter() - started) * 1000)
    return {"complete_ms": statistics.median(whole), "parse_ms": statistics.median(parsed),
            "stream_ms": statistics.median(streamed),
            "deltas": channel.deltas_sent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()

    with FakeLLM(default=reply_of(args.tokens), stream_interval_s=args.token_ms / 1000) as llm, \
            tempfile.TemporaryDirectory(prefix="bench-answer-stream-") as tmp:
        env = {"AGENTSEARCH_OPENAI_BASE_URL": llm.base_url, "AGENTSEARCH_OPENAI_MODEL": "fake-model"}
        with bench_stack(Path(tmp), extra_env=env) as stack:
            target = Target.of(stack)
            documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
            collection_id = ingest(target, "bench-answer-stream", documents)
            one_job(target, collection_id)  # warm: the model loaded, the connections open
            runs = [one_job(target, collection_id) for _ in range(args.jobs)]
            cost = channel_cost(stack.redis_url, args.repeat)
            llm_cost = llm_path_cost(stack.redis_url, args.tokens, max(10, args.repeat // 10))

    medians = {key: statistics.median(r[key] for r in runs) for key in ("first_delta_s", "answer_s", "done_s",
                                                                        "deltas")}
    host = machine()
    command = (f".venv/bin/python -m agentsearch.bench.answer_stream --jobs {args.jobs} --tokens {args.tokens} "
               f"--token-ms {args.token_ms:g} --repeat {args.repeat}")
    lines = [
        "# The answer streamed: time to the first delta against time to the whole answer",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {host['CPU model']} ({host['nproc']} cores), `{command}`",
        "",
        f"{args.jobs} jobs, one at a time, no agents; the LLM streams {args.tokens} tokens {args.token_ms:g} ms "
        f"apart (about {args.tokens * args.token_ms / 1000:.1f} s of text). Seconds from the submission, medians:",
        "",
        "| first `answer.delta` | `answer` (whole text) | `done` | deltas per answer |",
        "|---:|---:|---:|---:|",
        f"| {medians['first_delta_s']:.2f} | {medians['answer_s']:.2f} | {medians['done_s']:.2f} "
        f"| {medians['deltas']:.0f} |",
        "",
        f"The offline answer step, median of {args.repeat}: {cost['plain_ms']:.2f} ms without the channel, "
        f"{cost['streamed_ms']:.2f} ms writing it (one delta and the end marker to Redis).",
        "",
        f"The LLM answer of {args.tokens} tokens sent without pause, median of {max(10, args.repeat // 10)}: "
        f"{llm_cost['complete_ms']:.1f} ms asked whole, {llm_cost['parse_ms']:.1f} ms streamed and dropped "
        f"(the chunks' parsing), {llm_cost['stream_ms']:.1f} ms streamed into the channel "
        f"({llm_cost['deltas']} deltas).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
