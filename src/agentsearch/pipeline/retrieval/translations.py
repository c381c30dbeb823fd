"""The translations a search takes: the question in the words it was asked in, and the same question in the
collection's other languages. The search runs the original and each translation and fuses the lists
(``Retriever.search``, ``language_route.fuse_translations``).

The translator agent (``agentsearch.pipeline.agents.builtin.translator``) leaves its record in the job's metadata, which
the job's response shows as it is; ``Translations.of_translator`` is the one reader of that record, so the search step
hands the retriever a typed input and knows none of the translator's keys.

Usage::

    translations = Translations.of_translator(state.metadata, state.query)   # None: the query was not translated
    retriever.search(name, translations.original, config, translations=translations)
    translations.by_language                      # {"en": "Who won Super Bowl 50?", "zh": "谁赢得了第50届超级碗？"}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field


class Translations(BaseModel):
    """A question in its own words and in other languages, searched together."""

    original: str = Field(min_length=1, description="The question as asked: what the search runs as its query.")
    by_language: dict[str, str] = Field(description="{language: the question in it}, each searched beside it.")

    @classmethod
    def of_translator(cls, metadata: Mapping[str, Any], query: str) -> Translations | None:
        """The translator's record read as the search's input; None when it did not translate the query.

        ``query`` is the job's query as the agents after the translator left it (an expander may have added to
        it): it stands for the first translation, so what they did to it is searched.
        """
        original = metadata.get("original_query")
        # The translator names where the query came from; another agent's original_query (the spell checker
        # keeps one) is no translation.
        if not (metadata.get("translation_method") and metadata.get("translated_from")
                and isinstance(original, str) and original):
            return None
        by_language = {str(k): str(v) for k, v in (metadata.get("translations") or {}).items()}
        by_language[str(metadata.get("translated_to"))] = query
        return cls(original=original, by_language=by_language)

    def searched_beside(self, query: str) -> dict[str, str]:
        """The translations the search runs beside ``query``: none empty, none the query itself."""
        return {k: v for k, v in self.by_language.items() if v and v.strip() and v != query}
