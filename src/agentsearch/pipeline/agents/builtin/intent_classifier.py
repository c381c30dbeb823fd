"""Pre-search: tag the query with an intent learnt from labelled example phrases (nearest centroid on embeddings).

Each label's examples are embedded with the service's embedding model (``ctx.tools.embed``) and averaged into a
unit-length centroid (computed once per agent instance and, per process, per toolbox and config); the query goes to
the label whose centroid is the most cosine-similar. Below ``min_confidence`` (that cosine similarity) the intent is
``fallback_intent``. With ``mode: "llm"`` (or ``"auto"`` and an LLM endpoint configured) the LLM picks the label from
the same examples instead (a JSON schema lists the labels, so a constrained endpoint answers one of them; a model
with a small context is shown fewer examples per label); in ``auto`` a failing LLM call or an unusable reply falls
back to the centroids. The tag goes into metadata (``intent``, ``intent_confidence``, ``intent_scores``), where later
agents and search filters can route on it.

With ``routes`` (intent -> the agent id or config id of a later pre-search agent) the classifier also names the
next agent to run (``next_agent_id``): the agents between it and that one are passed over
(``agentsearch.pipeline.job.routing``), so a query goes to its intent's specialist without code. An intent without a
route lets the stage go on in order.

Usage::

    agent = IntentClassifier({"intents": {
        "finance": ["What was revenue last quarter?", "Show the EBITDA margin"],
        "hr": ["How many days of annual leave do I get?", "What is the parental leave policy?"],
    }, "min_confidence": 0.3})
    agent.run(PreSearchInput(query="How much holiday can employees take?"), ctx).metadata
    # {"intent": "hr", "intent_confidence": 0.4776, "intent_scores": {"finance": 0.2153, "hr": 0.4776}, ...}

    IntentClassifier({"intents": {...}, "routes": {"finance": "acronym_resolver", "hr": "query_expander"}})
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from agentsearch.pipeline.agents.phrase_lists import phrase_lists
from agentsearch.pipeline.platform.llm import LLMError, estimate_tokens
from agentsearch.pipeline.platform.prompt_budget import fit_texts, require_fit

# Centroids per toolbox (so per embedding model and process) and per intents config, shared by agent instances:
# the runner builds a fresh agent for every call.
_shared: weakref.WeakKeyDictionary[object, dict[str, dict[str, list[float]]]] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()
REPLY_BASE_TOKENS = 24
EXAMPLES_SHOWN = (8, 4, 2, 1, 0)


# Question types any collection has; a collection's own config replaces them with its domain's intents.
DEFAULT_INTENTS: dict[str, tuple[str, ...]] = {
    "definition": (
        "What is a power purchase agreement?", "Define levelized cost of energy", "What does EBITDA mean?",
        "Explain what a heat pump is",
    ),
    "figure_lookup": (
        "What was the revenue in the fourth quarter?", "How many employees does the company have?",
        "What is the installed capacity?", "How much did the project cost?",
    ),
    "comparison": (
        "Compare wind and solar output", "What is the difference between PERC and TOPCon cells?",
        "Which is cheaper, onshore or offshore wind?", "How does 2025 revenue compare with 2024?",
    ),
    "how_to": (
        "How do I request flexible working?", "How to apply for parental leave", "Steps to file an expense claim",
        "How can I reset my password?",
    ),
    "summary": (
        "Summarize the annual report", "Give me an overview of the safety record",
        "What are the key points of the sustainability report?",
    ),
}


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


class IntentClassifier(PreSearchAgent):
    agent_id = "intent_classifier"
    version = "1"
    description = "Tags the query with an intent: nearest centroid of labelled example phrases, or the LLM."
    default_timeout_s = 20.0
    cache_ttl_s = 3600
    routing_field = "routes"

    class Config(AgentConfig):
        intents: dict[str, list[str]] = Field(
            default_factory=lambda: {k: list(v) for k, v in DEFAULT_INTENTS.items()},
            description="Intent label -> example phrases (at least one label with at least one example).",
        )
        min_confidence: float = Field(
            0.3, ge=-1.0, le=1.0, description="Cosine similarity to the best centroid below which the fallback applies."
        )
        fallback_intent: str = Field("general", min_length=1, max_length=100)
        mode: Literal["embedding", "llm", "auto"] = Field(
            "auto", description="embedding: centroids; llm: the LLM picks; auto: the LLM when configured."
        )
        llm_timeout_s: float = Field(10.0, gt=0, le=120)
        routes: dict[str, str] = Field(
            default_factory=dict, description="Intent label -> the agent id (or config id) of a later pre-search "
            "agent of the collection to run next; the agents between are skipped ('routed').",
        )

        @field_validator("routes")
        @classmethod
        def _routes_name_intents(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
            # Declared after intents and fallback_intent, so those are here when they were valid themselves.
            labels = {*info.data.get("intents", {}), info.data.get("fallback_intent", "general")}
            for label, agent in value.items():
                if label not in labels:
                    raise ValueError(f"routes names the intent {label!r}, which is not one of {sorted(labels)}")
                if not agent.strip():
                    raise ValueError(f"the route of {label!r} names no agent")
            return value

        @field_validator("intents")
        @classmethod
        def _labels_with_examples(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
            # A label whose examples are all blank is left out; none left at all is refused below.
            cleaned = phrase_lists(value, blank_key="an intent label must not be empty", no_phrases=None)
            if not cleaned:
                raise ValueError("intents needs at least one label with at least one non-empty example phrase")
            return cleaned

    config: Config

    def __init__(self, config=None) -> None:
        super().__init__(config)
        self._centroids: dict[int, dict[str, list[float]]] = {}
        self._lock = threading.Lock()

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        out = self._classify(inp, ctx)
        intent = out.metadata.get("intent")
        out.next_agent_id = self.config.routes.get(intent) if intent is not None else None
        return out

    def _classify(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        mode = self.config.mode
        llm = ctx.llm
        warning = None
        if mode == "llm" and llm is None:
            raise AgentSkipped("mode 'llm' but no LLM endpoint configured")
        if mode in ("llm", "auto") and llm is not None:
            try:
                return self._by_llm(llm, inp.query)
            except LLMError as exc:
                if mode == "llm":
                    raise
                warning = f"LLM classification failed, used embeddings: {exc}"
        if ctx.tools is None:
            raise AgentSkipped("no embedding tools in this context")
        out = self._by_centroid(inp.query, ctx.tools)
        if warning:
            out.metadata["intent_warning"] = warning
        return out

    # -- embeddings ---------------------------------------------------------------------------------------
    def centroids(self, tools) -> dict[str, list[float]]:
        with self._lock:
            if (cached := self._centroids.get(id(tools))) is not None:
                return cached
            key = json.dumps(self.config.intents, sort_keys=True)
            try:
                with _shared_lock:
                    shared = _shared.setdefault(tools, {})
                    found = shared.get(key)
            except TypeError:  # a toolbox that cannot be weakly referenced: per-instance cache only
                shared, found = None, None
            if found is None:
                labels = list(self.config.intents)
                phrases = [p for label in labels for p in self.config.intents[label]]
                vectors = tools.embed(phrases)
                found, i = {}, 0
                for label in labels:
                    n = len(self.config.intents[label])
                    group = [_unit(v) for v in vectors[i : i + n]]
                    i += n
                    found[label] = _unit([sum(col) / n for col in zip(*group)])
                if shared is not None:
                    with _shared_lock:
                        shared[key] = found
            self._centroids[id(tools)] = found
            return found

    def _by_centroid(self, query: str, tools) -> PreSearchOutput:
        centroids = self.centroids(tools)
        vector = _unit(tools.embed([query])[0])
        scores = {label: round(_dot(vector, c), 4) for label, c in centroids.items()}
        best = max(scores, key=scores.__getitem__)
        confidence = scores[best]
        intent = best if confidence >= self.config.min_confidence else self.config.fallback_intent
        return PreSearchOutput(
            query=query,
            metadata={
                "intent": intent,
                "intent_confidence": confidence,
                "intent_scores": scores,
                "intent_method": "embedding",
            },
        )

    # -- LLM ------------------------------------------------------------------------------------------------
    def _messages(self, llm, query: str, reply_tokens: int) -> list[dict[str, str]]:
        """The prompt with as many example queries per intent as the model's context holds (8, else fewer)."""
        for examples_shown in EXAMPLES_SHOWN:
            labels = "\n".join(
                f"- {label}: " + "; ".join(json.dumps(e, ensure_ascii=False) for e in examples[:examples_shown])
                for label, examples in self.config.intents.items()
            )
            system = (
                "You classify search queries by intent. The intents, each with example queries:\n"
                f"{labels}\n"
                f'If none fits, use "{self.config.fallback_intent}". Reply with JSON only: '
                '{"intent": "<one intent label>", "confidence": <0 to 1>}'
            )
            messages = [{"role": "system", "content": system}, {"role": "user", "content": query}]
            if fit_texts(llm, messages, [], reply_tokens).fits:
                return messages
        require_fit(llm, messages, reply_tokens)  # not even the labels alone: LLMError says so
        return messages

    def _by_llm(self, llm, query: str) -> PreSearchOutput:
        labels = [*self.config.intents, *([] if self.config.fallback_intent in self.config.intents
                                          else [self.config.fallback_intent])]
        reply_tokens = REPLY_BASE_TOKENS + max(estimate_tokens(json.dumps(label)) for label in labels)
        messages = self._messages(llm, query, reply_tokens)
        schema = {"type": "object", "required": ["intent", "confidence"],
                  "properties": {"intent": {"enum": labels}, "confidence": {"type": "number"}}}
        data = llm.complete_json(messages, timeout_s=self.config.llm_timeout_s, max_tokens=reply_tokens,
                                 json_schema=schema)
        if not isinstance(data, dict) or not isinstance(data.get("intent"), str):
            raise LLMError(f"intent reply has no 'intent': {str(data)[:200]!r}")
        label = data["intent"].strip()
        try:
            confidence = max(0.0, min(1.0, float(data.get("confidence", 1.0))))
        except (TypeError, ValueError):
            confidence = 0.0
        if label not in self.config.intents or confidence < self.config.min_confidence:
            label = self.config.fallback_intent
        return PreSearchOutput(
            query=query,
            metadata={"intent": label, "intent_confidence": round(confidence, 4), "intent_method": "llm"},
        )
