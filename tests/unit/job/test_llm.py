"""The LLM provider and LLM answers, against a local OpenAI-compatible server (tests/support/fake_llm.py)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from agentsearch.pipeline.job.answer import ANSWER_LLM_TIMEOUT_S, NO_RESULTS, draft_answer, generate_answer
from agentsearch.pipeline.job.answer.llm import ANSWER_MAX_TOKENS, ANSWER_SCHEMA, ANSWER_SCHEMA_COT, read_reply
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.workflow import answer_step
from agentsearch.pipeline.platform.llm import LLMClient, LLMError, parse_json_reply
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.worker.job_tasks import STEP_LIMIT_S
from tests.support import llm_fixtures
from tests.support.fake_llm import FakeLLM
from tests.support.super_bowl import DOCS, QUESTION

fake = llm_fixtures.fake


@pytest.fixture
def llm(fake):
    """The shared client with a key: the request tests check the header it is sent in."""
    return LLMClient(fake.base_url, model="fake-model", api_key="sk-test", backoff_s=0.01, max_backoff_s=0.05)


def reply(*sentences: tuple[str, list[int]], steps: list[str] | None = None) -> str:
    """The reply the answer's schema asks for (``agentsearch.pipeline.job.answer.llm.ANSWER_SCHEMA``)."""
    body = {"sentences": [{"text": text, "sources": cited} for text, cited in sentences]}
    return json.dumps({**({"steps": steps} if steps is not None else {}), **body})


AGREES = FakeLLM.entailment(lambda claim, source: ("supported", claim))
PATRIOTS = ("The New England Patriots won Super Bowl XLIX.", [2])  # word for word in source 2: no judge asked
WON = ("Super Bowl XLIX was won by the New England Patriots.", [2])  # said otherwise: the judge is asked


# --- the request the project sends --------------------------------------------------------------------------------


def test_the_answer_request_carries_model_numbered_sources_question_schema_and_temperature(fake, llm):
    fake.script(reply(PATRIOTS))
    draft_answer(llm, QUESTION, DOCS, with_cot=False, timeout_s=5)
    assert len(fake.requests) == 1 and fake.paths == ["/v1/chat/completions"]
    body = fake.requests[0]
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.0 and body["max_tokens"] == ANSWER_MAX_TOKENS
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA
    assert fake.headers[0]["authorization"] == "Bearer sk-test"
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert '"sentences"' in system["content"] and '"steps"' not in system["content"]  # steps only when asked
    assert "[1] Super Bowl 50\nThe Denver Broncos defeated" in user["content"]
    assert "[2] Super Bowl XLIX\nThe New England Patriots won Super Bowl XLIX." in user["content"]
    assert user["content"].rstrip().endswith(f"Question: {QUESTION}")
    assert user["content"].index("[1] Super Bowl 50") < user["content"].index("[2] Super Bowl XLIX")


def test_an_endpoint_without_structured_output_is_asked_for_plain_text_with_marks(fake):
    plain = LLMClient(fake.base_url, model="fake-model", structured_output=False)
    fake.script("The New England Patriots won Super Bowl XLIX [2]. It was played in Glendale.")
    draft = draft_answer(plain, QUESTION, DOCS, timeout_s=5)
    assert "response_format" not in fake.requests[0]
    assert "square brackets" in fake.requests[0]["messages"][0]["content"]
    assert [(s.text, s.cited) for s in draft.sentences] == [
        ("The New England Patriots won Super Bowl XLIX.", [2]), ("It was played in Glendale.", [])]
    assert draft.info["format"] == "text" and draft.info["structured"] is False


def test_with_cot_the_schema_asks_for_steps_and_checked_steps_become_cot_steps(fake, llm):
    fake.script(reply(PATRIOTS, steps=["Source [2] names the winner of Super Bowl XLIX.",
                                       "The Seattle Seahawks lost it 28-24 [1]."]), AGREES)
    answer = generate_answer(QUESTION, DOCS, with_cot=True, llm=llm)
    assert fake.requests[0]["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA_COT
    assert answer.method == "llm"
    # The second step names a team and a score no source holds: it is not shown.
    assert [(s.step, s.evidence) for s in answer.cot_steps] == [(1, ["sb49"])]
    assert [s.document_id for s in answer.sources] == ["sb50", "sb49"]


# --- how the reply is read -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "fmt"), [
    ("Here you go:\n```json\n" + reply(PATRIOTS) + "\n```", "json"),
    ('{"answer": "The New England Patriots won Super Bowl XLIX [2]."}', "json_answer"),
    ('{"sentences": [{"text": "The New England Patriots won Super Bowl XLIX.", "sources": [2]}, {"text": "The ga',
     "json_salvaged"),
    ("The New England Patriots won Super Bowl XLIX [2].", "text"),
])
def test_a_reply_is_read_as_sentences_in_every_form_a_model_gives(raw, fmt):
    sentences, _, got, _ = read_reply(raw, n_sources=2)
    assert got == fmt
    assert [(s.text, s.cited) for s in sentences] == [PATRIOTS]


@pytest.mark.parametrize("bad", ['{"response": "Patriots"}', '["Patriots"]', '{"sentences": []}', "   ", "{\"sen"])
def test_a_reply_without_sentences_ends_in_the_offline_answer_saying_so(fake, llm, bad):
    fake.script(bad)
    answer = generate_answer(QUESTION, DOCS, llm=llm)
    assert answer.method == "extractive" and answer.fallback_reason == "the LLM's answer held no sentence"
    assert "The New England Patriots won Super Bowl XLIX [2]." in answer.text
    assert len(fake.requests) == 1  # nothing to judge: no second call


def test_citations_of_sources_that_do_not_exist_are_dropped_and_counted():
    sentences, _, _, dropped = read_reply(reply(("Patriots won.", [2, 7]), ("Played in Arizona [9].", []),
                                                ("Broncos won the next one.", ["1", "[8]"])), n_sources=2)
    assert [s.cited for s in sentences] == [[2], [], [1]]
    assert dropped == [7, 9, 8]


def test_parse_json_reply_tolerates_fences_and_surrounding_text():
    assert parse_json_reply('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_reply('Sure! {"a": [1, 2]} Hope that helps.') == {"a": [1, 2]}
    with pytest.raises(LLMError):
        parse_json_reply("not json at all")


# --- errors, retries and timeouts ----------------------------------------------------------------------------------


def test_a_500_then_success_is_retried(fake, llm):
    fake.script(FakeLLM.error(500, "upstream hiccup"), "hello")
    assert llm.complete([{"role": "user", "content": "hi"}], timeout_s=5) == "hello"
    assert len(fake.requests) == 2


def test_a_429_is_retried_after_the_servers_retry_after(fake, llm):
    fake.script(FakeLLM.error(429, "slow down", headers={"retry-after-ms": "200"}), "hello")
    started = time.monotonic()
    assert llm.complete([{"role": "user", "content": "hi"}], timeout_s=5) == "hello"
    assert time.monotonic() - started >= 0.2
    assert len(fake.requests) == 2


def test_a_400_is_not_retried(fake, llm):
    fake.script(FakeLLM.error(400, "bad request: unknown model"), "never sent")
    with pytest.raises(LLMError) as info:
        llm.complete([{"role": "user", "content": "hi"}], timeout_s=5)
    assert info.value.status == 400 and not info.value.transient and info.value.attempts == 1
    assert "unknown model" in str(info.value)
    assert len(fake.requests) == 1 and fake.pending == 1


def test_retries_stop_after_max_retries(fake, llm):
    fake.script(*[FakeLLM.error(503)] * 5)
    with pytest.raises(LLMError) as info:
        llm.complete([{"role": "user", "content": "hi"}], timeout_s=5)
    assert info.value.attempts == 3 and info.value.transient  # max_retries=2: three attempts
    assert len(fake.requests) == 3


def test_a_reply_slower_than_the_budget_raises_within_it(fake, llm):
    fake.script(FakeLLM.delay(60, "too late"), "would be the retry")
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        llm.complete([{"role": "user", "content": "hi"}], timeout_s=0.5)
    elapsed = time.monotonic() - started
    # The budget's half second, not the reply's minute (the bound leaves a loaded machine its room).
    assert 0.4 <= elapsed < 10
    assert len(fake.requests) == 1  # the budget was spent: no retry past it


def test_the_budget_bounds_the_retries_too(fake):
    slow_backoff = LLMClient(fake.base_url, model="fake-model", max_retries=5, backoff_s=30.0, max_backoff_s=60.0)
    fake.script(*[FakeLLM.error(500)] * 6)
    started = time.monotonic()
    with pytest.raises(LLMError, match="no time left"):
        slow_backoff.complete([{"role": "user", "content": "hi"}], timeout_s=1.0)
    # The first backoff (22-30 s) would overrun the 1 s budget: it is not slept.
    assert time.monotonic() - started < 10 and len(fake.requests) == 1


def test_the_answer_budget_stays_below_the_answer_steps_celery_limit():
    assert ANSWER_LLM_TIMEOUT_S < STEP_LIMIT_S


def test_from_settings_needs_url_and_model():
    assert LLMClient.from_settings(Settings(openai_base_url=None, openai_model=None)) is None
    assert LLMClient.from_settings(Settings(openai_base_url="http://x/v1", openai_model=None)) is None
    client = LLMClient.from_settings(Settings(openai_base_url="http://x/v1", openai_model="m", openai_api_key="k"))
    assert client is not None and client.model == "m"


# --- the answer step -----------------------------------------------------------------------------------------------


def state(**kwargs) -> JobState:
    return JobState(job_id=str(uuid.uuid4()), collection_id="c1", query=QUESTION, original_query=QUESTION,
                    documents=DOCS, **kwargs)


def test_answer_step_delivers_the_checked_llm_answer_and_records_every_sentence(fake, llm):
    fake.script(reply(WON, ("The Seattle Seahawks scored 24 points.", [2]), steps=["Source [2] names it."]),
                AGREES)
    out = answer_step(state(cot=True), llm=llm)
    assert out.answer.startswith("Super Bowl XLIX was won by the New England Patriots [2].")
    assert "Seahawks" not in out.answer
    meta = out.metadata["answer"]
    assert meta["method"] == "llm" and meta["fallback_reason"] is None
    assert meta["draft"]["model"] == "fake-model" and meta["check"]["judge"] == "llm"
    assert [(s["status"], s["delivered"]) for s in meta["sentences"]] == [("supported", True),
                                                                         ("unsupported", False)]
    assert "Seattle" in meta["sentences"][1]["reason"]
    assert [s.evidence for s in out.cot_steps] == [["sb49"]]
    # Every delivered sentence carries its verdict; the judge's call listed only the sentence the check kept.
    assert {c.sentence: c.status for c in out.citations}["Super Bowl XLIX was won by the New England Patriots [2]."] \
        == "supported"
    assert "Seahawks" not in fake.requests[1]["messages"][1]["content"]
    assert out.metadata["citations"]["method"] == "llm"


def test_answer_step_falls_back_to_the_extractive_answer_when_the_llm_fails(fake, llm):
    fake.script(*[FakeLLM.error(500, "model overloaded")] * 3)
    out = answer_step(state(cot=True), llm=llm)
    assert out.metadata["answer"]["method"] == "extractive"
    assert out.metadata["answer"]["degraded"] is True
    reason = out.metadata["answer"]["fallback_reason"]
    assert "LLMError" in reason and "500" in reason and "model overloaded" in reason
    assert "The New England Patriots won Super Bowl XLIX [2]." in out.answer
    assert len(out.cot_steps) == 2  # the extractive answer's own steps
    assert len(fake.requests) == 3


def test_a_sentence_found_word_for_word_is_not_judged_again(fake, llm):
    fake.script(reply(PATRIOTS))
    answer = generate_answer(QUESTION, DOCS, llm=llm)
    assert answer.method == "llm" and answer.info["check"]["judge"] == "not needed"
    assert len(fake.requests) == 1


def test_a_judge_that_fails_leaves_the_offline_verdicts(fake, llm):
    fake.script(reply(WON), "not json at all")
    answer = generate_answer(QUESTION, DOCS, llm=llm)
    assert answer.method == "llm" and answer.info["check"]["judge"] == "offline only"
    assert "not JSON" in answer.info["check"]["judge_error"]


def test_an_answer_its_budget_cuts_is_recorded_with_the_setting_that_cut_it(fake, llm):
    fake.script(FakeLLM.delay(5, reply(PATRIOTS)))
    started = time.monotonic()
    answer = generate_answer(QUESTION, DOCS, llm=llm, timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert answer.method == "extractive" and answer.info["degraded"]
    assert answer.fallback_reason.startswith(
        "the LLM's reply was cut at 0.5 s by AGENTSEARCH_ANSWER_LLM_TIMEOUT_S (LLMError: ")
    assert answer.metadata()["llm_cut"] == {"setting": "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S", "budget_s": 0.5}


def test_a_judge_its_budget_cuts_is_recorded_with_the_setting_that_cut_it(fake, llm):
    fake.script(reply(WON), FakeLLM.delay(5, AGREES))
    answer = generate_answer(QUESTION, DOCS, llm=llm, judge_timeout_s=0.5)
    check = answer.info["check"]
    assert answer.method == "llm" and check["judge"] == "offline only"  # the offline verdicts stand
    assert check["judge_error"].startswith("the LLM's reply was cut at 0.5 s by AGENTSEARCH_JUDGE_LLM_TIMEOUT_S")
    assert check["judge_cut"] == {"setting": "AGENTSEARCH_JUDGE_LLM_TIMEOUT_S", "budget_s": 0.5}
    assert "llm_cut" not in answer.info


def test_a_failure_that_is_not_the_budgets_names_no_setting(fake, llm):
    fake.script(FakeLLM.error(401, "invalid api key"))
    answer = generate_answer(QUESTION, DOCS, llm=llm)
    assert answer.fallback_reason.startswith("LLMError: ") and "invalid api key" in answer.fallback_reason
    assert "llm_cut" not in answer.info and "TIMEOUT_S" not in answer.fallback_reason


def test_a_judge_that_disagrees_lowers_the_verdict_and_the_offline_answer_is_delivered(fake, llm):
    fake.script(reply(WON), FakeLLM.entailment(lambda claim, source: ("unsupported", "")))
    answer = generate_answer(QUESTION, DOCS, llm=llm)
    assert answer.method == "extractive" and "1 unsupported" in answer.fallback_reason
    assert answer.info["sentences"][0]["reason"] == "entailment: the LLM judged it unsupported"


def test_answer_step_without_an_llm_is_extractive_without_a_fallback_reason():
    out = answer_step(state())
    assert out.metadata["answer"]["method"] == "extractive"
    assert out.metadata["answer"]["fallback_reason"] is None
    assert "Patriots won Super Bowl XLIX [2]" in out.answer


def test_no_documents_never_asks_the_llm(fake, llm):
    answer = generate_answer(QUESTION, [], llm=llm)
    assert answer.text == NO_RESULTS and answer.fallback_reason == "no documents to answer from"
    assert fake.requests == []


def test_the_llm_is_told_the_users_question_and_what_was_searched(fake, llm):
    fake.script(reply(PATRIOTS), AGREES)
    translated = state().model_copy(update={"original_query": "¿Quién ganó el Super Bowl XLIX?"})
    answer_step(translated, llm=llm)
    user = fake.requests[0]["messages"][1]["content"]
    assert "Question: ¿Quién ganó el Super Bowl XLIX?" in user
    assert f"(searched as: {QUESTION})" in user


# --- the Celery task, called in-process, takes the LLM from the settings -------------------------------------------


@pytest.fixture
def services_with_llm(request, tmp_path, install_services, fake):
    import agentsearch.pipeline.services as services_module

    budgets = getattr(request, "param", {})  # the LLM budgets of a test's own
    settings = Settings(data_dir=tmp_path, openai_base_url=fake.base_url, openai_model="fake-model",
                        openai_api_key="sk-task", **budgets)
    from tests.support.databases import migrated_sqlite

    migrated_sqlite(settings.database_url)  # the task records its progress in the jobs table (no row: nothing written)
    services = services_module.Services(settings)
    install_services(services)
    yield services
    services.close()


def test_the_generate_answer_task_answers_with_the_configured_llm(services_with_llm, fake):
    from agentsearch.worker.job_tasks import write_answer

    fake.script(reply(PATRIOTS), AGREES)
    out = JobState.load(write_answer(state().dump()))  # no job row: progress is a no-op
    assert out.answer.startswith("The New England Patriots won Super Bowl XLIX [2].")
    assert out.metadata["answer"]["method"] == "llm"
    assert fake.requests[0]["model"] == "fake-model" and fake.headers[0]["authorization"] == "Bearer sk-task"
    assert "answer" in out.timings_ms


def test_the_generate_answer_task_falls_back_with_embeddings_when_the_llm_refuses(services_with_llm, fake):
    from agentsearch.worker.job_tasks import write_answer

    fake.script(FakeLLM.error(401, "invalid api key"))
    out = JobState.load(write_answer(state().dump()))
    assert out.metadata["answer"]["method"] == "extractive"
    assert "invalid api key" in out.metadata["answer"]["fallback_reason"]
    assert out.metadata["answer"]["scoring"] == "embedding+lexical"
    assert "Patriots won Super Bowl XLIX [2]" in out.answer
    assert len(fake.requests) == 1


@pytest.mark.parametrize("services_with_llm", [{"answer_llm_timeout_s": 0.5}], indirect=True)
def test_the_generate_answer_task_holds_the_llm_to_the_budget_of_the_settings(services_with_llm, fake):
    from agentsearch.worker.job_tasks import write_answer

    fake.script(FakeLLM.delay(5, reply(PATRIOTS)))
    started = time.monotonic()
    out = JobState.load(write_answer(state().dump()))
    assert time.monotonic() - started < 4
    meta = out.metadata["answer"]
    assert meta["method"] == "extractive"
    assert meta["fallback_reason"].startswith("the LLM's reply was cut at 0.5 s by AGENTSEARCH_ANSWER_LLM_TIMEOUT_S")
    assert meta["llm_cut"] == {"setting": "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S", "budget_s": 0.5}
