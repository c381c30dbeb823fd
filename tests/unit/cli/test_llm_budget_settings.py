"""AGENTSEARCH_ANSWER_LLM_TIMEOUT_S and AGENTSEARCH_JUDGE_LLM_TIMEOUT_S: what they accept, and how a process refuses
to start on a value they do not, naming the variable."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from agentsearch.cli import main
from agentsearch.pipeline.platform.settings import ANSWER_LLM_TIMEOUT_S, JUDGE_LLM_TIMEOUT_S, Settings, get_settings

ANSWER, JUDGE = "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S", "AGENTSEARCH_JUDGE_LLM_TIMEOUT_S"
NUMBER, ABOVE_0, FINITE = "must be a number of seconds", "must be a number of seconds above 0", "must be a finite"
BAD = [("abc", f"{NUMBER}, not 'abc'"), ("", f"{NUMBER}, not ''"), ("true", f"{NUMBER}, not 'true'"),
       ("0", f"{ABOVE_0}, not '0'"), ("-5", f"{ABOVE_0}, not '-5'"), ("-0.5", f"{ABOVE_0}, not '-0.5'"),
       ("nan", f"{FINITE} number of seconds, not 'nan'"), ("inf", f"{FINITE} number of seconds, not 'inf'")]


def invoke(monkeypatch, env: dict[str, str], *args: str):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        get_settings.cache_clear()


def test_the_defaults_are_the_budgets_the_answer_step_had():
    settings = Settings()
    assert (settings.answer_llm_timeout_s, settings.judge_llm_timeout_s) == (ANSWER_LLM_TIMEOUT_S, JUDGE_LLM_TIMEOUT_S)
    assert (ANSWER_LLM_TIMEOUT_S, JUDGE_LLM_TIMEOUT_S) == (60.0, 20.0)


@pytest.mark.parametrize("value, seconds", [("250", 250.0), ("1.5", 1.5), ("0.01", 0.01), (" 90 ", 90.0)])
def test_a_positive_number_of_seconds_is_taken(monkeypatch, value, seconds):
    monkeypatch.setenv(ANSWER, value)
    monkeypatch.setenv(JUDGE, value)
    settings = Settings()
    assert settings.answer_llm_timeout_s == settings.judge_llm_timeout_s == seconds


@pytest.mark.parametrize("variable", [ANSWER, JUDGE])
@pytest.mark.parametrize("value, message", BAD)
def test_a_value_that_is_not_a_positive_number_is_refused_naming_the_variable(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as raised:
        Settings()
    assert f"{variable} {message}" in str(raised.value)


def test_explicit_values_are_checked_alike():
    with pytest.raises(ValidationError, match=f"{JUDGE} must be a number of seconds above 0"):
        Settings(judge_llm_timeout_s=0)
    with pytest.raises(ValidationError, match=f"{ANSWER} must be a number of seconds, not True"):
        Settings(answer_llm_timeout_s=True)
    assert Settings(answer_llm_timeout_s=240, judge_llm_timeout_s=90).answer_llm_timeout_s == 240.0


def test_budgets_the_job_deadline_would_cut_first_are_refused_naming_all_three(monkeypatch):
    monkeypatch.setenv(ANSWER, "500")
    monkeypatch.setenv(JUDGE, "100")
    with pytest.raises(ValidationError) as raised:
        Settings()
    assert f"{ANSWER} (500) + {JUDGE} (100) must stay below AGENTSEARCH_JOB_DEADLINE_S (600)" in str(raised.value)
    monkeypatch.setenv("AGENTSEARCH_JOB_DEADLINE_S", "900")
    assert Settings().answer_llm_timeout_s == 500.0


@pytest.mark.parametrize("command", [["api"], ["worker"], ["agents", "list", "--json"]])
@pytest.mark.parametrize("variable", [ANSWER, JUDGE])
@pytest.mark.parametrize("value", ["abc", "0", "-1"])
def test_a_process_refuses_to_start_in_one_line_naming_the_variable(monkeypatch, command, variable, value):
    result = invoke(monkeypatch, {variable: value}, *command)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{variable} must be a number of seconds" in result.output


def test_a_valid_value_lets_a_command_run(monkeypatch):
    result = invoke(monkeypatch, {ANSWER: "300", JUDGE: "120"}, "agents", "list", "--json")
    assert result.exit_code == 0, result.output
