"""The audio summary, each MP3 decoded with mutagen."""

from __future__ import annotations

import io
import shutil

import pytest
from mutagen.mp3 import MP3
from pydantic import ValidationError

from agentsearch.pipeline.agents.builtin.audio_summary import AudioSummary, EspeakMissing, speech_text
from tests.unit.agents.response_fakes import ANSWER, CTX, QUERY, make_input

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng missing (make services)")


def mp3_length(data: bytes) -> float:
    return MP3(io.BytesIO(data)).info.length


@needs_espeak
def test_audio_mp3_decodes_and_its_length_grows_with_the_text():
    short = AudioSummary({"include_query": False}).run(make_input("Revenue rose [1]."), CTX)
    long = AudioSummary({"include_query": False}).run(make_input(ANSWER), CTX)
    assert short.content_type == "audio/mpeg" and short.filename == "summary.mp3"
    for artifact in (short, long):
        length = mp3_length(artifact.data)
        assert length > 0.3
        assert abs(length - artifact.metadata["duration_s"]) < 0.25, (length, artifact.metadata)
    assert mp3_length(long.data) > 4 * mp3_length(short.data)
    assert long.metadata["voice"] == "en-us" and long.metadata["voice_source"] == "language"
    # Faster speech, same text: shorter audio.
    fast = AudioSummary({"include_query": False, "speed": 300}).run(make_input(ANSWER), CTX)
    assert mp3_length(fast.data) < 0.8 * mp3_length(long.data)


@needs_espeak
def test_audio_voice_follows_the_detected_language_and_config_overrides_it():
    german = "Der Umsatz im vierten Quartal 2025 stieg auf 412 Millionen US-Dollar [1]."
    artifact = AudioSummary().run(make_input(german, metadata={"language": "de"}), CTX)
    assert artifact.metadata["voice"] == "de" and artifact.metadata["language"] == "de"
    assert mp3_length(artifact.data) > 1
    unknown = AudioSummary().run(make_input(metadata={"language": "tlh"}), CTX)
    assert unknown.metadata["voice"] == "en-us" and unknown.metadata["voice_source"] == "fallback"
    unset = AudioSummary().run(make_input(metadata={}), CTX)
    assert unset.metadata["voice"] == "en-us" and unset.metadata["voice_source"] == "default"
    chosen = AudioSummary({"voice": "en-gb"}).run(make_input(metadata={"language": "de"}), CTX)
    assert chosen.metadata["voice"] == "en-gb" and chosen.metadata["voice_source"] == "config"
    with pytest.raises(ValueError, match="no voice 'zz-nope'"):
        AudioSummary({"voice": "zz-nope"}).run(make_input(), CTX)


@needs_espeak
def test_audio_respects_max_chars():
    long_answer = " ".join(f"Sentence {i} talks about quarterly revenue [1]." for i in range(40))
    artifact = AudioSummary({"max_chars": 200}).run(make_input(long_answer), CTX)
    assert artifact.metadata["truncated"] is True and artifact.metadata["chars"] <= 200
    text, cut = speech_text(QUERY, ANSWER, include_query=True, max_chars=5000)
    assert not cut and "[1]" not in text and text.startswith(QUERY)


def test_audio_without_espeak_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    with pytest.raises(EspeakMissing, match="install the espeak-ng system package"):
        AudioSummary().run(make_input(), CTX)


def test_audio_voice_setting_cannot_smuggle_an_option():
    for bad in ("--help", "de -w /etc/passwd", "DE"):
        with pytest.raises(ValidationError):
            AudioSummary({"voice": bad})
