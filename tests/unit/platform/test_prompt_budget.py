"""Prompt budgets in tokens (agentsearch.pipeline.platform.prompt_budget): what is cut, what is left out, what is never
asked."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.platform.llm import LLMError, estimate_tokens
from agentsearch.pipeline.platform.prompt_budget import (
    MARGIN_TOKENS,
    TOKENS_PER_MESSAGE,
    cut_to_tokens,
    fit,
    fit_texts,
    require_fit,
)


class WordCounter:
    """A model whose tokens are words, with a context of ``context`` tokens (None: unknown)."""

    default_context_tokens = 1000

    def __init__(self, context: int | None) -> None:
        self.context = context
        self.counted: list[str] = []

    def context_tokens(self) -> int | None:
        return self.context

    def count_tokens(self, text: str) -> int:
        self.counted.append(text)
        return len(text.split())


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def room(context: int, reply: int, messages: int = 1) -> int:
    return context - reply - MARGIN_TOKENS - TOKENS_PER_MESSAGE * messages


def test_texts_that_fit_by_estimate_are_kept_whole_without_asking_the_tokenizer():
    llm = WordCounter(4096)
    fitted = fit_texts(llm, "system", ["one short source", "another"], reply_tokens=256)
    assert fitted.texts == ["one short source", "another"] and fitted.fits and not fitted.changed
    assert fitted.note() is None and llm.counted == []


def test_texts_too_long_share_the_room_and_short_ones_stay_whole():
    llm = WordCounter(1000)
    texts = [words(900, "alpha"), "a short one", words(900, "beta")]
    fitted = fit_texts(llm, "fixed part", texts, reply_tokens=100)
    available = room(1000, 100) - 2
    assert fitted.available_tokens == available and fitted.fits
    sizes = [len(t.split()) for t in fitted.texts]
    assert fitted.texts[1] == "a short one" and fitted.cut == 2 and fitted.dropped == 0
    assert sum(sizes) <= available and abs(sizes[0] - sizes[2]) <= 1  # equal shares of what the short one left
    assert fitted.texts[0].startswith("alpha alpha") and fitted.texts[0].endswith(" …")
    assert fitted.note() == "2 of 3 texts cut to fit a 1000-token context"


def test_the_least_important_texts_are_left_out_when_even_a_minimum_each_does_not_fit():
    llm = WordCounter(300)
    texts = [words(200, f"t{i}") for i in range(6)]
    fitted = fit_texts(llm, [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}], texts,
                       reply_tokens=50, min_tokens=48)
    assert fitted.dropped > 0 and len(fitted.texts) == 6 - fitted.dropped
    # A prefix: source [n] stays source [n].
    assert all(t.startswith(f"t{i} ") for i, t in enumerate(fitted.texts))
    assert sum(len(t.split()) for t in fitted.texts) <= fitted.available_tokens
    assert "left out" in fitted.note()


def test_a_fixed_part_longer_than_the_context_does_not_fit():
    llm = WordCounter(200)
    fitted = fit_texts(llm, words(500), ["a source"], reply_tokens=10)
    assert not fitted.fits and fitted.texts == [] and fitted.dropped == 1
    assert "do not fit the model's 200-token context" in fitted.note()
    with pytest.raises(LLMError, match="prompt not sent"):
        require_fit(llm, [{"role": "user", "content": words(500)}], 10)
    require_fit(llm, [{"role": "user", "content": "short"}], 10)  # fits: nothing raised


def test_the_reply_is_reserved():
    llm = WordCounter(1000)
    big_reply = fit(llm, "", [words(800)], reply_tokens=600)
    small_reply = fit(llm, "", [words(800)], reply_tokens=100)
    assert len(big_reply[0].split()) < len(small_reply[0].split()) <= room(1000, 100)


def test_an_unknown_context_takes_the_clients_default():
    llm = WordCounter(None)
    (text,) = fit(llm, "", [words(5000)], reply_tokens=100)
    assert len(text.split()) <= room(llm.default_context_tokens, 100)


def test_a_client_without_token_counting_is_estimated_on_the_high_side():
    class Bare:
        pass

    (text,) = fit(Bare(), "", ["x " * 20000], reply_tokens=0)
    assert estimate_tokens(text) <= room(4096, 0)


def test_cut_to_tokens_cuts_at_a_word_boundary():
    llm = WordCounter(None)
    text = "alpha beta gamma delta epsilon zeta eta theta"
    cut = cut_to_tokens(llm, text, 4)
    assert cut.endswith(" …") and len(cut.split()) <= 4 and text.startswith(cut[:-2])
    assert cut_to_tokens(llm, text, 100) == text


def test_estimate_never_counts_fewer_tokens_than_a_third_of_the_bytes():
    assert estimate_tokens("") == 0
    for text in ("What was the revenue?", "谁赢得了第50届超级碗？", "1234567890", "Übergrößenträger"):
        assert estimate_tokens(text) >= len(text.encode()) / 3
    assert estimate_tokens("1234567890") >= 10  # digits are tokens of their own


def test_in_order_keeps_the_first_texts_whole_and_leaves_out_what_follows_the_cut_one():
    llm = WordCounter(400)
    texts = [words(100, "newest"), words(100, "older"), words(200, "oldest"), words(50, "ancient")]
    fitted = fit_texts(llm, "", texts, reply_tokens=50, share="in_order")
    available = room(400, 50)
    assert fitted.texts[:2] == texts[:2] and fitted.texts[2].startswith("oldest") and fitted.cut == 1
    assert fitted.dropped == 1 and sum(len(t.split()) for t in fitted.texts) <= available
    with pytest.raises(ValueError, match="share"):
        fit_texts(llm, "", texts, reply_tokens=50, share="greedy")
