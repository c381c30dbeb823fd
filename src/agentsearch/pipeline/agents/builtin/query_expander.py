"""Pre-search: add related terms to the query, from the collection itself, configured synonyms, or the LLM.

Offline, the expander does pseudo-relevance feedback: a first keyword (BM25) pass over the collection
(``ctx.tools.search(..., strategy="keyword")``) gives the top ``feedback_docs`` documents, and their words are
scored tf-idf-like against the collection vocabulary (``ctx.tools.vocabulary``): the Kullback-Leibler term
selection of pseudo-relevance feedback, ``p_F(t) * log(p_F(t) / p_C(t))``, where ``p_F`` is the word's share of the
feedback documents (each weighted by its rank score) and ``p_C`` its share of the whole collection, so words common
in the feedback but rare elsewhere win. Stop words, numbers, the query's own words
(and their stems) and words seen in fewer than ``min_feedback_docs`` feedback documents are left out; the best
``max_terms`` are appended to the query. Configured ``synonyms`` (a word or phrase -> its synonyms) are always
added when the key occurs in the query. With ``mode: "llm"`` (or ``"auto"`` and an LLM endpoint configured) the
LLM proposes the terms instead of the feedback pass (asked by JSON schema); a term made only of the query's own
words or of the prompt's ("term", "json"), a sentence, a figure or a placeholder ("employee_name") is dropped, and in
``auto`` a failing LLM call or a reply with no new term left falls back to the offline path, saying why in
``expansion_warning``.

The added terms go into metadata (``expansion_terms``, with ``expansion_sources`` telling where each came from).

Usage::

    agent = QueryExpander({"max_terms": 4, "feedback_docs": 5, "synonyms": {"foundations": ["substructures"]}})
    out = agent.run(PreSearchInput(query="offshore foundations", collection_id=cid), ctx)   # the sample corpus
    out.query                            # "offshore foundations substructures floating meters wind depths"
    out.metadata["expansion_terms"]      # ["substructures", "floating", "meters", "wind", "depths"]
    out.metadata["expansion_sources"]    # {"substructures": "synonym", "floating": "feedback", ...}
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import Literal

import Stemmer
from pydantic import Field, field_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from agentsearch.pipeline.agents.phrase_lists import phrase_lists
from agentsearch.pipeline.platform.llm import LLMError
from agentsearch.pipeline.platform.prompt_budget import require_fit
from agentsearch.pipeline.text import STOPWORDS, words

# Generic English words the shared stop list keeps but that never help a search.
_GENERIC = frozenset(
    """also already although among around either else even ever however including less many may might much must
    often per perhaps rather roughly since still though thus upon usually via well whether within without yet""".split()
)
# Function words of the other languages a collection commonly mixes in: feedback documents may be in any of them.
_OTHER_STOPWORDS = frozenset(
    """al algo como con cual cuales cuál cuáles de del desde donde el ella en entre era es esta este esto fue fueron
    ha han hasta la las le les lo los mas más muy no nos o para pero por que qué se ser si sin sobre son su sus también
    un una unas uno unos y ya
    aber als am auch auf aus bei bis das dass dem den der des die ein eine einem einen einer eines er es für hat
    haben im in ist mit nach nicht noch oder sich sie sind so über um und von vor war wie wird wurde zu zum zur
    au aux avec ce ces dans du elle est et il ils la le les leur lui mais même nous ou par pas pour qui quel quelle
    sa se ses son sont sur un une vous été être
    ao aos as com da das do dos em foi na nas no nos os pela pelo por uma
    che chi con da dei del della delle di gli il nel nella per più sono tra una""".split()
)
TOKENS_PER_TERM = 12
MAX_TERM_CHARS = 60
MAX_TERM_WORDS = 4
_STEMMER = Stemmer.Stemmer("english")
_LETTERS = re.compile(r"^[^\W\d_]+(?:-[^\W\d_]+)*$")


def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def _is_candidate(word: str) -> bool:
    return (len(word) >= 3 and bool(_LETTERS.match(word))
            and word not in STOPWORDS and word not in _OTHER_STOPWORDS and word not in _GENERIC)


class QueryExpander(PreSearchAgent):
    agent_id = "query_expander"
    version = "1"
    description = (
        "Adds related terms to the query: pseudo-relevance feedback from the collection, configured synonyms, or the "
        "LLM."
    )
    default_timeout_s = 20.0
    cache_ttl_s = 3600

    class Config(AgentConfig):
        mode: Literal["offline", "llm", "auto"] = Field(
            "auto", description="offline: feedback + synonyms; llm: LLM + synonyms; auto: the LLM when configured."
        )
        max_terms: int = Field(5, ge=1, le=30, description="Terms added by feedback or the LLM (synonyms come on top).")
        feedback_docs: int = Field(5, ge=1, le=50, description="Top documents of the first keyword pass to learn from.")
        min_feedback_docs: int = Field(
            2, ge=1, le=50, description="A term must occur in this many feedback documents (fewer if fewer were found)."
        )
        min_lift: float = Field(
            1.0, ge=1.0, le=100.0,
            description="A feedback term must be this many times more frequent in the feedback than in the collection.",
        )
        pseudo_relevance: bool = Field(True, description="Offline: draw terms from the collection's top documents.")
        synonyms: dict[str, list[str]] = Field(
            default_factory=dict, description="Word or phrase -> synonyms added when it occurs in the query."
        )
        llm_timeout_s: float = Field(10.0, gt=0, le=120)

        @field_validator("synonyms")
        @classmethod
        def _clean_synonyms(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
            return phrase_lists(value, blank_key="a synonym key must not be empty",
                                no_phrases="synonyms of {key!r} need at least one non-empty entry")

    config: Config

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        collection_id = inp.collection_id or ctx.collection_id
        has_collection = ctx.tools is not None and bool(collection_id)
        llm = ctx.llm
        mode = self.config.mode
        if mode == "llm" and llm is None:
            raise AgentSkipped("mode 'llm' but no LLM endpoint configured")
        if not self.config.synonyms and not (mode != "offline" and llm is not None) and not (
            self.config.pseudo_relevance and has_collection
        ):
            raise AgentSkipped("no synonyms configured and no collection to draw feedback terms from")

        added: dict[str, str] = {}  # term (as written) -> where it came from, in order of addition
        seen: set[str] = set()
        present = set(words(inp.query))
        present_stems = {_stem(w) for w in present}

        def add(term: str, source: str) -> None:
            term = term.strip()
            key = term.lower()
            if not term or key in seen or key in present:
                return
            if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", inp.query.lower()):
                return
            seen.add(key)
            added[term] = source

        for term in self._synonyms(inp.query):
            add(term, "synonym")
        metadata: dict = {}
        method = "synonyms"
        found: list[str] | None = None
        if mode in ("llm", "auto") and llm is not None:
            try:
                found, method = self._by_llm(llm, inp.query, present_stems), "llm"
            except LLMError as exc:
                if mode == "llm":
                    raise
                metadata["expansion_warning"] = f"LLM expansion failed, used feedback terms: {exc}"
        if found is None and self.config.pseudo_relevance and has_collection:
            assert collection_id is not None  # has_collection says so
            found, feedback_ids = self._by_feedback(inp.query, collection_id, ctx.tools, present_stems)
            metadata["feedback_documents"] = feedback_ids
            method = "pseudo_relevance"
        for term in (found or [])[: self.config.max_terms]:
            add(term, "llm" if method == "llm" else "feedback")

        terms = list(added)
        query = f"{inp.query.rstrip()} {' '.join(terms)}" if terms else inp.query
        metadata.update({"expansion_terms": terms, "expansion_sources": added, "expansion_method": method})
        return PreSearchOutput(query=query, metadata=metadata)

    def _synonyms(self, query: str) -> list[str]:
        lowered = query.lower()
        out: list[str] = []
        for key, synonyms in self.config.synonyms.items():
            if re.search(rf"(?<!\w){re.escape(key.lower())}(?!\w)", lowered):
                out.extend(synonyms)
        return out

    def _by_feedback(self, query: str, collection_id: str, tools, query_stems: set[str]) -> tuple[list[str], list[str]]:
        documents = tools.search(collection_id, query, top_k=self.config.feedback_docs, strategy="keyword")
        documents = documents[: self.config.feedback_docs]
        if not documents:
            return [], []
        vocabulary = tools.vocabulary(collection_id)
        total = sum(vocabulary.values()) or 1
        top_score = max((d.score for d in documents), default=0.0)
        weight: defaultdict[str, float] = defaultdict(float)
        seen_in: Counter[str] = Counter()
        mass = 0.0
        for rank, doc in enumerate(documents):
            tokens = words(f"{doc.title} {doc.text}")
            if not tokens:
                continue
            # The rank score when the search gave one, else a gentle decay by position.
            doc_weight = doc.score / top_score if top_score > 0 and doc.score > 0 else 1.0 / (1 + rank)
            mass += doc_weight
            counts = Counter(t for t in tokens if _is_candidate(t))
            for term, tf in counts.items():
                weight[term] += doc_weight * tf / len(tokens)
                seen_in[term] += 1
        needed = min(self.config.min_feedback_docs, len(documents))
        mass = mass or 1.0
        scored = []
        for term, w in weight.items():
            if seen_in[term] < needed or _stem(term) in query_stems:
                continue
            # Kullback-Leibler term selection: common in the feedback, rare in the collection.
            p_feedback = w / mass
            p_collection = (vocabulary.get(term, 0) + 1) / (total + len(vocabulary) + 1)
            if p_feedback > p_collection * self.config.min_lift:
                scored.append((p_feedback * math.log(p_feedback / p_collection), term))
        scored.sort(key=lambda item: (-item[0], item[1]))
        chosen, stems = [], set()
        for _, term in scored:
            stem = _stem(term)
            if stem in stems:  # "turbine" and "turbines" are one term
                continue
            stems.add(stem)
            chosen.append(term)
            if len(chosen) >= self.config.max_terms:
                break
        return chosen, [d.id for d in documents]

    def _by_llm(self, llm, query: str, query_stems: set[str]) -> list[str]:
        """The LLM's terms; ``LLMError`` for a reply with none that is new, short and not the query again."""
        system = (
            "You expand search queries for a document search engine. Propose up to "
            f"{self.config.max_terms} additional search terms (synonyms, closely related terms, spelled-out "
            "abbreviations) in the query's language that would help find relevant documents. Do not repeat words of "
            'the query. Reply with JSON only: {"terms": ["term", ...]}'
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": query}]
        # Room for a few repeats of the query's words, which are dropped, beside the terms asked for.
        asked = 2 * self.config.max_terms
        reply_tokens = 16 + TOKENS_PER_TERM * asked
        require_fit(llm, messages, reply_tokens)
        schema = {"type": "object", "required": ["terms"], "properties": {"terms": {
            "type": "array", "maxItems": asked, "items": {"type": "string", "maxLength": MAX_TERM_CHARS}}}}
        data = llm.complete_json(messages, timeout_s=self.config.llm_timeout_s, max_tokens=reply_tokens,
                                 json_schema=schema)
        terms = data.get("terms") if isinstance(data, dict) else data
        if not isinstance(terms, list):
            raise LLMError(f"expansion reply has no list of terms: {str(data)[:200]!r}")
        prompt_words = set(words(system)) - set(words(query))
        out = [term for term in (" ".join(t.split()) for t in terms if isinstance(t, str)) if _usable_term(
            term, query_stems, prompt_words)]
        if not out:
            raise LLMError(f"expansion reply has no new term (empty, the query's or the prompt's own words): "
                           f"{terms!r:.200}")
        return out


def _usable_term(term: str, query_stems: set[str], prompt_words: set[str]) -> bool:
    """A short search term in words, not the query's again nor the prompt's ("term", "json"), no placeholder."""
    found = words(term)
    if not found or len(term) > MAX_TERM_CHARS or len(term.split()) > MAX_TERM_WORDS:
        return False  # nothing, or a sentence rather than a term
    if "_" in term or not any(c.isalpha() for c in term):
        return False  # an identifier ("employee_name") or a figure: other years are another question
    # A term of the query's own words ("wind turbine" for "offshore wind turbine") adds nothing.
    return any(_stem(w) not in query_stems for w in found) and not set(found) <= prompt_words
