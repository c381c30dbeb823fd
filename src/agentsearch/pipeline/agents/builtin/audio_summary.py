"""Response: the answer read aloud, as an MP3 (espeak-ng speaks a WAV, lameenc encodes it).

The voice follows the language the ``language_detector`` agent put into the job's metadata (``language``: an ISO
639-1 code such as ``de``), mapped to an installed espeak-ng voice; an unknown or missing language falls back to
English, and the ``voice`` setting overrides both. Citation markers are not read out. ``metadata.duration_s`` is the
length of the speech, from the WAV's frame count.

espeak-ng is a system package (``apt-get install espeak-ng``); without it the agent fails with an error that says so.
Speech synthesis runs in a subprocess with its own timeout, so a stuck synthesiser never outlives the agent's deadline.

Usage::

    agent = AudioSummary({"speed": 170, "max_chars": 1200})
    artifact = agent.run(ResponseAgentInput(answer=..., sources=..., query=..., metadata={"language": "de"}), ctx)
    artifact.metadata   # {"voice": "de", "language": "de", "duration_s": 14.2, "sample_rate": 22050, ...}
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentSkipped,
    Loaded,
    ResponseAgent,
    ResponseAgentInput,
)
from agentsearch.pipeline.text import without_citation_marks

ESPEAK = "espeak-ng"
ESPEAK_TIMEOUT_S = 25.0  # below the agent's default deadline: the subprocess is killed before the runner gives up
FALLBACK_VOICE = "en-us"
# ISO 639-1 codes (as langdetect reports them) whose espeak-ng voice has another name; the rest are used as they are
# when espeak-ng has a voice of that name.
LANGUAGE_VOICES = {
    "en": "en-us",
    "fr": "fr-fr",
    "no": "nb",
    "zh": "cmn",
    "zh-cn": "cmn",
    "zh-tw": "cmn",
}
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


class EspeakMissing(RuntimeError):
    def __init__(self) -> None:
        super().__init__(
            "espeak-ng is not installed: install the espeak-ng system package "
            "(e.g. `apt-get install espeak-ng`, or `make services`)"
        )


def _espeak() -> str:
    path = shutil.which(ESPEAK)
    if path is None:
        raise EspeakMissing()
    return path


def installed_voices() -> frozenset[str]:
    """The language names espeak-ng accepts after ``-v`` ("en-us", "de", "cmn", ...)."""
    out = subprocess.run([_espeak(), "--voices"], capture_output=True, text=True, timeout=10, check=True).stdout
    names = set()
    for line in out.splitlines()[1:]:  # header: Pty Language Age/Gender VoiceName File Other Languages
        parts = line.split()
        if len(parts) >= 2:
            names.add(parts[1].lower())
    return frozenset(names)


def voice_for(language: object, voices: frozenset[str]) -> str | None:
    """The espeak-ng voice for an ISO language code, or None when espeak-ng has none for it."""
    if not isinstance(language, str) or not language.strip():
        return None
    code = language.strip().lower().replace("_", "-")
    for candidate in (LANGUAGE_VOICES.get(code), code, LANGUAGE_VOICES.get(code.split("-")[0]), code.split("-")[0]):
        if candidate and candidate in voices:
            return candidate
    return None


def speech_text(query: str, answer: str, include_query: bool, max_chars: int) -> tuple[str, bool]:
    """What is read out: the question, then the answer without citation markers, cut at a sentence within the limit."""
    body = " ".join(without_citation_marks(answer).split())
    question = " ".join(query.split())
    text = f"{question}\n\n{body}" if include_query and question else body
    if len(text) <= max_chars:
        return text, False
    head = text[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= max_chars // 2:
        return head[: ends[-1]], True
    return head.rsplit(" ", 1)[0].rstrip(",;:") + " …", True


class AudioSummary(ResponseAgent):
    agent_id = "audio_summary"
    version = "1"
    description = "The answer read aloud (espeak-ng, MP3) in the language the query was detected in."
    default_timeout_s = 30.0
    # Asked of espeak-ng once per process, shared by every instance.
    voices: ClassVar[Loaded[frozenset[str]]] = Loaded(installed_voices)

    class Config(AgentConfig):
        voice: str | None = Field(
            None,
            pattern=r"^[a-z]{2,3}(-[a-z0-9]{1,8})*$",
            description="An espeak-ng voice (e.g. en-gb, de, fr-fr); default: from the detected language.",
        )
        speed: int = Field(165, ge=80, le=450, description="Words per minute.")
        max_chars: int = Field(2000, ge=50, le=10000, description="Longer text is cut at a sentence end.")
        include_query: bool = Field(True, description="Read the question before the answer.")
        bitrate_kbps: Literal[32, 48, 64, 96, 128] = 64
        filename: str = Field("summary.mp3", pattern=r"^[\w.-]+\.mp3$")

    config: Config

    def warm_up(self) -> None:
        # Without espeak-ng there is nothing to load; ``run`` says what to install (or skips an empty answer first).
        if shutil.which(ESPEAK) is not None:
            self.voices.get()

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        if not inp.answer.strip():
            raise AgentSkipped("no answer to read out")
        cfg = self.config
        espeak = _espeak()
        voices = self.voices.get()
        language = inp.metadata.get("language")
        voice: str | None
        if cfg.voice is not None:
            if cfg.voice not in voices:
                raise ValueError(f"espeak-ng has no voice {cfg.voice!r}")
            voice, source = cfg.voice, "config"
        else:
            voice = voice_for(language, voices)
            source = "language" if voice else "fallback" if language else "default"
            voice = voice or FALLBACK_VOICE
        assert voice is not None  # the config's, the language's or the fallback
        text, truncated = speech_text(inp.query, inp.answer, cfg.include_query, cfg.max_chars)

        with tempfile.TemporaryDirectory(prefix="agentsearch-audio-") as tmp:
            wav_path = Path(tmp) / "speech.wav"
            try:
                done = subprocess.run(
                    [espeak, "-v", voice, "-s", str(cfg.speed), "-b", "1", "--stdin", "-w", str(wav_path)],
                    input=text.encode("utf-8"),
                    capture_output=True,
                    timeout=ESPEAK_TIMEOUT_S,
                )
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"espeak-ng did not finish within {ESPEAK_TIMEOUT_S:g} s") from None
            if done.returncode != 0 or not wav_path.is_file():
                detail = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
                raise RuntimeError(f"espeak-ng failed for voice {voice!r}: {detail}")
            with wave.open(str(wav_path), "rb") as wav:
                channels, width, rate, frames = (
                    wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getnframes()
                )
                pcm = wav.readframes(frames)
        if width != 2 or frames == 0:
            raise RuntimeError(f"espeak-ng produced {frames} frames of {8 * width}-bit audio; expected 16-bit speech")

        import lameenc  # with the first recording: a worker that makes none does not load the encoder

        encoder = lameenc.Encoder()
        encoder.set_bit_rate(cfg.bitrate_kbps)
        encoder.set_in_sample_rate(rate)
        encoder.set_channels(channels)
        encoder.set_quality(5)  # 2 = best, 7 = fastest; speech does not need more
        mp3 = bytes(encoder.encode(pcm) + encoder.flush())
        return AgentArtifact(
            agent_id=self.agent_id,
            type="mp3",
            data=mp3,
            filename=cfg.filename,
            content_type="audio/mpeg",
            metadata={
                "voice": voice,
                "voice_source": source,
                "language": language if isinstance(language, str) else None,
                "duration_s": round(frames / rate, 3),
                "sample_rate": rate,
                "bitrate_kbps": cfg.bitrate_kbps,
                "chars": len(text),
                "truncated": truncated,
            },
        )
