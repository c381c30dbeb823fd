"""Pre-search: translate the query into the collection's language(s) through the configured LLM.

The targets are the collection's main languages (each holding at least ``main_share`` of its chunks, as detected
at ingest: ``tools.collection_languages``), or ``target_language`` when that is set, or English when the collection
cannot say. The detector's result (``language`` in the job metadata, put there by ``language_detector`` when it
runs earlier) decides whether there is anything to do: a query already in the only target language is ``skipped``;
in a collection of several languages it is translated into the others. The source language is named in the prompt;
without a detector the LLM names it itself. Without an LLM endpoint (``AGENTSEARCH_OPENAI_BASE_URL`` / ``_MODEL``)
the agent reports ``skipped`` with that reason: there is no offline translation, and the search's
``language_route`` says the search stayed monolingual.

Every reply is checked before it replaces anything (a small model echoes the query, answers it, or writes a word
or two): asked by JSON schema, a translation that is empty, under a quarter or over four times the query's length,
without a word, without the query's numbers, made only of the query's own words, or (by the language detector,
confidently) in another language than the target is refused. With no translation left the run is an error saying
why (never cached), and the query is searched as asked; a target that failed beside others that did not is named in
``translation_errors``.

The query becomes the first translation; the original stays in metadata (``original_query``, ``translated_from``,
``translated_to``), and with several targets ``translations`` holds each (``{language: text}``): the search's input
as ``agentsearch.pipeline.retrieval.translations.Translations`` reads it (the search's one reader of these keys). It
runs the original and every translation and fuses the lists, so the question meets documents in its own language and in
the collection's. ``language`` is left as detected, so later agents still know what the user wrote in.

Usage::

    agent = Translator({"target_language": "en"})
    out = agent.run(PreSearchInput(query="¿Cuáles fueron los ingresos del cuarto trimestre?",
                                   metadata={"language": "es"}), ctx)   # ctx.tools.llm configured
    out.query      # "What was the revenue in the fourth quarter?"
    out.metadata   # {"original_query": "¿Cuáles ...?", "translated_from": "es", "translated_to": "en", ...}
    Translator().run(inp, ctx).metadata["translations"]   # {"en": "...", "zh": "..."} in an en/de/zh collection
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from agentsearch.pipeline.platform.llm import LLMError, estimate_tokens, parse_json_reply
from agentsearch.pipeline.platform.prompt_budget import require_fit
from agentsearch.pipeline.retrieval.language import detect_language
from agentsearch.pipeline.text import words

LANGUAGE_NAMES = {
    "en": "English", "de": "German", "es": "Spanish", "fr": "French", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish", "pl": "Polish",
    "cs": "Czech", "ru": "Russian", "uk": "Ukrainian", "tr": "Turkish", "el": "Greek", "ar": "Arabic",
    "he": "Hebrew", "hi": "Hindi", "zh-cn": "Chinese", "zh": "Chinese", "ja": "Japanese", "ko": "Korean",
}
_CODE = re.compile(r"^[a-z]{2,3}(-[a-z]{2,4})?$")
TRANSLATION_SCHEMA = {
    "type": "object",
    "properties": {"source_language": {"type": "string", "maxLength": 8}, "translation": {"type": "string"}},
    "required": ["source_language", "translation"],
}
REPLY_BASE_TOKENS = 48
# The detector's confidence from which a reply "in another language" is believed: short queries of names and
# numbers read as anything at 0.1-0.3, real sentences at 0.9 and more.
WRONG_LANGUAGE_CONFIDENCE = 0.8
MAX_GROWTH = 4  # a translation this many times longer than the query is an answer or a ramble, not a translation
MIN_SHARE = 0.25  # Chinese takes about 0.4 of a German question's characters; a quarter is a word or two left
_NUMBER = re.compile(r"\d+")


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code.lower(), code)


def _same_language(a: str, b: str) -> bool:
    return a.lower().split("-")[0] == b.lower().split("-")[0]


class Translator(PreSearchAgent):
    agent_id = "translator"
    version = "1"
    description = "Translates the query into the target language through the configured LLM (skipped without one)."
    default_timeout_s = 30.0
    cache_ttl_s = 24 * 3600  # a translation does not go stale

    class Config(AgentConfig):
        target_language: str | None = Field(
            None, description="ISO 639-1 code to translate into; unset: the collection's main languages (else 'en')."
        )
        main_share: float = Field(
            0.2, gt=0.0, le=1.0,
            description="A language is one of the collection's main ones from this share of chunks.",
        )
        max_targets: int = Field(3, ge=1, le=8, description="At most this many translations (one LLM call each).")
        min_confidence: float = Field(
            0.0, ge=0.0, le=1.0,
            description="Trust the detector's language only at or above this confidence (else the LLM decides).",
        )
        llm_timeout_s: float = Field(20.0, gt=0, le=300, description="Budget of the LLM call, retries included.")

        @field_validator("target_language")
        @classmethod
        def _iso_code(cls, value: str | None) -> str | None:
            if value is None:
                return None
            value = value.strip().lower()
            if not _CODE.match(value):
                raise ValueError(f"target_language must be an ISO 639-1 code such as 'en', not {value!r}")
            return value

    config: Config

    def targets(self, ctx: AgentContext) -> list[str]:
        """The languages to translate into: the configured one, else the collection's main ones, else English."""
        if self.config.target_language:
            return [self.config.target_language]
        reader = getattr(ctx.tools, "collection_languages", None) if ctx.tools is not None else None
        counts: dict[str, int] = {}
        if reader is not None and ctx.collection_id:
            try:
                counts = reader(ctx.collection_id) or {}
            except Exception:  # noqa: BLE001 - a collection that cannot say is searched as English
                counts = {}
        total = sum(counts.values())
        main = [code for code, n in sorted(counts.items(), key=lambda kv: -kv[1])
                if code != "und" and n >= self.config.main_share * total]
        return main[: self.config.max_targets] or ["en"]

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        detected = inp.metadata.get("language")
        confidence = inp.metadata.get("language_confidence")
        if not isinstance(detected, str) or not detected or (
            isinstance(confidence, (int, float)) and confidence < self.config.min_confidence
        ):
            detected = None
        targets = self.targets(ctx)
        if detected:
            others = [t for t in targets if not _same_language(detected, t)]
            if not others:
                raise AgentSkipped(f"the query is already in the target language {targets[0]!r}")
            targets = others
        llm = ctx.llm
        if llm is None:
            raise AgentSkipped(
                "no LLM endpoint configured (set AGENTSEARCH_OPENAI_BASE_URL and AGENTSEARCH_OPENAI_MODEL); "
                "translation needs one"
            )
        translations: dict[str, str] = {}
        failures: dict[str, str] = {}
        source = None
        for target in targets:
            try:
                said, translation = self._translate(llm, inp.query, detected, target)
            except LLMError as exc:
                failures[target] = str(exc)
                continue
            source = source or said
            # The LLM's word that the query is already in the target counts only where no detector said otherwise.
            if translation and translation != inp.query and not (detected is None and said
                                                                 and _same_language(said, target)):
                translations[target] = translation
        if failures and not translations:
            # No translation at all: an error (recorded on the run, never cached), the query searched as asked.
            raise LLMError("; ".join(f"{target}: {why}" for target, why in failures.items()))
        warnings = {"translation_errors": failures} if failures else {}
        if not translations:
            # Nothing changed: the LLM found the query already in the target language.
            return PreSearchOutput(
                query=inp.query,
                metadata={"translated_from": None, "translated_to": targets[0], "translation_method": "llm"},
            )
        first = next(iter(translations))
        return PreSearchOutput(
            query=translations[first],
            metadata={
                "original_query": inp.query,
                "translated_from": detected or source,
                "translated_to": first,
                "translation_method": "llm",
                **({"translations": translations} if len(translations) > 1 else {}),
                **warnings,
            },
        )

    def _translate(self, llm, query: str, detected: str | None, target: str) -> tuple[str | None, str]:
        """(the source language the LLM named, the translation); ``LLMError`` for a reply that is not one."""
        source_hint = f" The query is in {language_name(detected)} ({detected})." if detected else ""
        system = (
            f"You translate search queries into {language_name(target)} ({target}).{source_hint} "
            "Translate faithfully and keep names, numbers, dates, units, acronyms and product names unchanged. "
            'Reply with JSON only: {"source_language": "<ISO 639-1 code of the query>", "translation": "<the query '
            f'in {language_name(target)}>"}}'
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": query}]
        # Room for a translation several times the query's tokens (another script can take more of them).
        reply_tokens = REPLY_BASE_TOKENS + 3 * estimate_tokens(query)
        require_fit(llm, messages, reply_tokens)
        reply = llm.reply(messages, timeout_s=self.config.llm_timeout_s, max_tokens=reply_tokens,
                          json_schema=TRANSLATION_SCHEMA)
        if reply.truncated:
            raise LLMError(f"translation reply cut at max_tokens ({reply_tokens}): {reply.text[:200]!r}")
        try:
            data = parse_json_reply(reply.text)
        except LLMError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("translation"), str):
            source = data.get("source_language")
            source = source.strip().lower() if isinstance(source, str) and source.strip() else None
            return source, self._checked(query, " ".join(data["translation"].split()), detected, target)
        if "{" in reply.text:
            raise LLMError(f"translation reply is not the JSON asked for: {reply.text[:200]!r}")
        # A model that ignored the format but answered with the translation alone.
        return detected, self._checked(query, reply.text.strip().strip('"').strip(), detected, target)

    @staticmethod
    def _checked(query: str, translation: str, detected: str | None, target: str) -> str:
        """The translation, unless it is no translation (the checks in the module's docstring): then ``LLMError``
        says why. The query handed back is a translation only when no detector named another language for it."""
        if not translation:
            raise LLMError("the translation reply was empty")
        if translation == query and detected is not None:
            raise LLMError(f"the reply repeats the query, which is in {detected!r}, not {target!r}")
        if not (MIN_SHARE * len(query) <= len(translation) <= MAX_GROWTH * len(query) + 40):
            raise LLMError(f"the translation reply is {len(translation)} characters for a {len(query)}-character "
                           f"query: {translation[:200]!r}")
        if not any(c.isalpha() for c in translation) and any(c.isalpha() for c in query):
            raise LLMError(f"the translation reply has no word: {translation[:200]!r}")
        said = set(words(translation))
        if translation != query and said and said <= set(words(query)):
            raise LLMError(f"the translation reply copies words of the query without translating any: "
                           f"{translation[:200]!r}")
        lost = [n for n in _NUMBER.findall(query) if n not in translation]
        if lost:
            raise LLMError(f"the translation reply lost the query's numbers {lost}: {translation[:200]!r}")
        found = detect_language(translation)
        if found.confidence >= WRONG_LANGUAGE_CONFIDENCE and not _same_language(found.code, target):
            if translation == query:
                raise LLMError(f"the reply repeats the query, which is in {found.code!r}, not {target!r}")
            raise LLMError(f"the translation reply is in {found.code!r}, not {target!r}: {translation[:200]!r}")
        return translation
