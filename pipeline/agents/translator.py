"""Pre-search: translate the query into the collection's language through the configured LLM.

The detector's result (``language`` in the job metadata, put there by ``language_detector`` when it runs earlier)
decides whether there is anything to do: a query already in ``target_language`` is ``skipped``, and the source
language is named in the prompt. Without a detector the LLM names the source language itself. Without an LLM
endpoint (``AGENTSEARCH_OPENAI_BASE_URL`` / ``_MODEL``) the agent reports ``skipped`` with that reason: there is no
offline translation. The original query stays in metadata (``original_query``, ``translated_from``,
``translated_to``); ``language`` is left as detected, so later agents still know what the user wrote in.

Usage::

    agent = Translator({"target_language": "en"})
    out = agent.run(PreSearchInput(query="¿Cuáles fueron los ingresos del cuarto trimestre?",
                                   metadata={"language": "es"}), ctx)   # ctx.tools.llm configured
    out.query      # "What was the revenue in the fourth quarter?"
    out.metadata   # {"original_query": "¿Cuáles ...?", "translated_from": "es", "translated_to": "en", ...}
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from pipeline.platform.llm import LLMError, parse_json_reply

LANGUAGE_NAMES = {
    "en": "English", "de": "German", "es": "Spanish", "fr": "French", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish", "pl": "Polish",
    "cs": "Czech", "ru": "Russian", "uk": "Ukrainian", "tr": "Turkish", "el": "Greek", "ar": "Arabic",
    "he": "Hebrew", "hi": "Hindi", "zh-cn": "Chinese", "zh": "Chinese", "ja": "Japanese", "ko": "Korean",
}
_CODE = re.compile(r"^[a-z]{2,3}(-[a-z]{2,4})?$")


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
        target_language: str = Field("en", description="ISO 639-1 code of the language the collection is searched in.")
        min_confidence: float = Field(
            0.0, ge=0.0, le=1.0,
            description="Trust the detector's language only at or above this confidence (else the LLM decides).",
        )
        llm_timeout_s: float = Field(20.0, gt=0, le=300, description="Budget of the LLM call, retries included.")

        @field_validator("target_language")
        @classmethod
        def _iso_code(cls, value: str) -> str:
            value = value.strip().lower()
            if not _CODE.match(value):
                raise ValueError(f"target_language must be an ISO 639-1 code such as 'en', not {value!r}")
            return value

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        target = self.config.target_language
        detected = inp.metadata.get("language")
        confidence = inp.metadata.get("language_confidence")
        if not isinstance(detected, str) or not detected or (
            isinstance(confidence, (int, float)) and confidence < self.config.min_confidence
        ):
            detected = None
        if detected and _same_language(detected, target):
            raise AgentSkipped(f"the query is already in the target language {target!r}")
        llm = ctx.llm
        if llm is None:
            raise AgentSkipped(
                "no LLM endpoint configured (set AGENTSEARCH_OPENAI_BASE_URL and AGENTSEARCH_OPENAI_MODEL); "
                "translation needs one"
            )
        source, translation = self._translate(llm, inp.query, detected, target)
        if not translation or (source and _same_language(source, target)) or translation == inp.query:
            # Nothing changed: the LLM found the query already in the target language.
            return PreSearchOutput(
                query=inp.query, metadata={"translated_from": None, "translated_to": target, "translation_method": "llm"}
            )
        return PreSearchOutput(
            query=translation,
            metadata={
                "original_query": inp.query,
                "translated_from": source or detected,
                "translated_to": target,
                "translation_method": "llm",
            },
        )

    def _translate(self, llm, query: str, detected: str | None, target: str) -> tuple[str | None, str]:
        source_hint = f" The query is in {language_name(detected)} ({detected})." if detected else ""
        system = (
            f"You translate search queries into {language_name(target)} ({target}).{source_hint} "
            "Translate faithfully and keep names, numbers, dates, units, acronyms and product names unchanged. "
            'Reply with JSON only: {"source_language": "<ISO 639-1 code of the query>", "translation": "<the query '
            f'in {language_name(target)}>"}}'
        )
        reply = llm.complete(
            [{"role": "system", "content": system}, {"role": "user", "content": query}],
            timeout_s=self.config.llm_timeout_s,
        )
        try:
            data = parse_json_reply(reply)
        except LLMError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("translation"), str):
            source = data.get("source_language")
            source = source.strip().lower() if isinstance(source, str) and source.strip() else None
            return source, data["translation"].strip()
        if "{" in reply:
            raise LLMError(f"translation reply is not the JSON asked for: {reply[:200]!r}")
        # A model that ignored the format but answered with the translation alone.
        return detected, reply.strip().strip('"').strip()
