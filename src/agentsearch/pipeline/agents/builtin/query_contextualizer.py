"""Pre-search: turn a follow-up question into a standalone query, from the conversation it belongs to.

A job that continues a conversation (``conversation_id`` or ``history`` on ``POST /v1/search``) carries the earlier
turns in ``ctx.conversation_history`` as chat messages (``{"role": "user" | "assistant", "content": ...}``, oldest
first). The contextualizer rewrites the job's query so that it can be searched alone: "and in 2024?" after "What was
Northwind's Q4 2025 revenue?" becomes "Northwind Q4 2024 revenue".

Offline (``mode: "offline"``, or ``"auto"`` without an LLM endpoint) the rewrite follows fixed rules over the words
of the questions (``Subject``):

- a question's parts are its **names** (runs of capitalised words, possessives stripped: "Northwind Energy",
  "Kestrel Point"), **years**, **quarters** ("Q4", "fourth quarter", "H1"), **months**, other **numbers** and its
  **key terms** (the remaining words that are not stop words, question words or references back);
- the earlier user turns are folded into one subject, oldest first, each read as a follow-up of the ones before
  (the service stores each turn's standalone query, so the last one is usually complete already);
- the follow-up is **standalone**, and left exactly as asked, when it names something of its own, refers to nothing
  before it ("it", "they", "that company", "that year", a leading "and", "what about") and has at least
  ``min_content_words`` words of content (names, numbers, key terms);
- otherwise each kind of part the follow-up lacks is carried over from the subject: its names (a name in the
  follow-up replaces the earlier names; "it"/"its"/"that company" stand for the last name, or for the earlier key
  terms when the earlier question names nothing), its time (a year, a
  quarter, a month of the follow-up replaces the earlier one of that kind; time is carried only into an elliptical
  follow-up, or one that says "that year"/"then"/"the same quarter", since a new question about the same subject
  need not be about the same period), and its key terms when the follow-up brings none of its own ("and Contoso?").
  The result is a keyword query: names, quarter, month, year, numbers, key terms.

With an LLM configured (``mode: "llm"``, or ``"auto"`` with ``AGENTSEARCH_OPENAI_BASE_URL``) the LLM writes the
standalone query from the last ``max_turns`` turns instead (the most recent ones that fit the model's context); in
``auto`` a failing call, a reply without a query, one that hands back a question the rules see refer back, one that
reads like an earlier answer (a citation mark, most of its words from no question), or one that drops the question's
own names, figures or key terms (an earlier question handed back) falls back to the rules.

Without history the agent is ``skipped``. Its result is in metadata: ``standalone_query``, ``contextualized``,
``contextualization_method`` (``rules`` | ``llm`` | ``unchanged``), ``original_query`` and, for the rules, what was
``carried`` over.

Usage::

    agent = QueryContextualizer({"mode": "offline"})
    ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, conversation_history=[
        {"role": "user", "content": "What was Northwind's Q4 2025 revenue?"},
        {"role": "assistant", "content": "Q4 2025 revenue reached $412 million [1]."},
    ])
    out = agent.run(PreSearchInput(query="and in 2024?"), ctx)
    out.query                           # "Northwind Q4 2024 revenue"
    out.metadata["carried"]             # {"names": ["Northwind"], "quarter": "Q4", "terms": ["revenue"]}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from agentsearch.pipeline.platform.llm import LLMError, estimate_tokens
from agentsearch.pipeline.platform.prompt_budget import fit
from agentsearch.pipeline.text import STOPWORDS, words as text_words

REWRITE_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
REPLY_BASE_TOKENS = 64
MAX_GROWTH = 2  # a rewrite longer than twice the question and its longest predecessor is an answer, not a query
_CITATION = re.compile(r"\[\d+(?:[,\s\d-]*)\]")
_TOKEN = re.compile(r"[^\W\d_][\w&'’.-]*[\w]|[^\W\d_]|\d[\d.,]*%?|\$\d[\d.,]*")
_YEAR = re.compile(r"^(?:19|20)\d\d$")
_QUARTER = re.compile(r"^[QqHh][1-4]$")
_ORDINAL_QUARTERS = {"first": "Q1", "second": "Q2", "third": "Q3", "fourth": "Q4"}
_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)
_QUESTION_WORDS = frozenset(
    """what which who whom whose when where why how tell show give list find explain describe compare please
    much many long did does do was were is are be been has have had can could would should will shall may might
    get got know known""".split()
)
# Words that point back at an earlier turn: their presence makes a follow-up depend on the history.
_PRONOUNS = frozenset("it its it's they them their theirs he she his her him this that these those".split())
_BACK_PHRASES = re.compile(
    r"\b(?:th(?:at|e|is) (?:same )?(?:company|firm|project|one|business|organi[sz]ation|group|plant|farm|site)|"
    r"the same|same thing|as well|too)\b",
    re.IGNORECASE,
)
_TIME_BACK = re.compile(
    r"\b(?:that|the same|this) (?:year|quarter|period|month|time)\b|\bthen\b|\bback then\b", re.IGNORECASE
)
_ELLIPSIS_OPENER = re.compile(
    r"^\s*(?:and|or|but|also|so|what about|how about|and what about|and how about|same for|what of)\b", re.IGNORECASE
)
_FILLER = frozenset(
    """about also and or but so same then too well versus vs compared else other more further again year quarter
    period month time one thing things""".split()
)


@dataclass
class Subject:
    """What a question is about, by kind: names, time (year, quarter, month), other numbers and key terms."""

    names: list[str] = field(default_factory=list)
    year: str | None = None
    quarter: str | None = None
    month: str | None = None
    numbers: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    refers_back: bool = False  # a pronoun, "that company", a leading "and", "what about"
    time_back: bool = False  # "that year", "then", "the same quarter"

    @property
    def content_words(self) -> int:
        time = [t for t in (self.year, self.quarter, self.month) if t]
        return sum(len(n.split()) for n in self.names) + len(time) + len(self.numbers) + len(self.terms)

    def as_query(self) -> str:
        parts = [*self.names, *(t for t in (self.quarter, self.month, self.year) if t), *self.numbers, *self.terms]
        return " ".join(parts)


def _bare_words(text: str) -> set[str]:
    """The words of a text, possessives stripped ("Northwind's" is "northwind")."""
    return {re.sub(r"['’]s$", "", w) for w in text_words(text)}


def parse(question: str) -> Subject:
    """The parts of one question (``Subject``), by the rules in the module's docstring."""
    subject = Subject()
    text = question.strip()
    subject.refers_back = bool(_ELLIPSIS_OPENER.search(text) or _BACK_PHRASES.search(text))
    subject.time_back = bool(_TIME_BACK.search(text))
    tokens = [m.group(0) for m in _TOKEN.finditer(text)]
    i = 0
    while i < len(tokens):
        token = tokens[i].rstrip(".")
        bare = re.sub(r"['’]s$", "", token)
        lower = bare.lower()
        following = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
        if lower in _ORDINAL_QUARTERS and following.startswith("quarter"):
            subject.quarter = _ORDINAL_QUARTERS[lower]
            i += 2
            continue
        if "-" in lower and lower.split("-", 1)[0] in _ORDINAL_QUARTERS and lower.endswith("quarter"):
            subject.quarter = _ORDINAL_QUARTERS[lower.split("-", 1)[0]]
        elif _QUARTER.match(bare):
            subject.quarter = bare.upper()
        elif _YEAR.match(bare):
            subject.year = bare
        elif lower in _MONTHS and bare[:1].isupper():
            subject.month = bare.capitalize()
        elif bare[:1].isdigit() or bare[:1] == "$":
            subject.numbers.append(bare)
        elif lower in _PRONOUNS:
            subject.refers_back = True
        elif bare.isupper() and len(bare) > 1 and not (i + 1 < len(tokens) and _capitalised(tokens[i + 1])):
            # An acronym alone ("CEO", "EBITDA", "TRIR") names a measure more often than a subject: a key term.
            if bare not in subject.terms:
                subject.terms.append(bare)
        elif _is_name_start(tokens, i):
            name, i = _name_at(tokens, i)
            subject.names.append(name)
            continue
        elif (lower not in STOPWORDS and lower not in _QUESTION_WORDS and lower not in _FILLER and len(lower) > 1
              and lower not in subject.terms):
            subject.terms.append(lower)
        i += 1
    return subject


def _capitalised(token: str) -> bool:
    return token[:1].isupper() and token.lower() not in STOPWORDS and token.lower() not in _QUESTION_WORDS


def _is_name_start(tokens: list[str], i: int) -> bool:
    token = tokens[i]
    if not _capitalised(token) or token.lower().rstrip(".") in _MONTHS:
        return False
    if i > 0:
        return True
    # A sentence opens with a capital whatever the word: there it is a name only when it looks like one (a
    # possessive, an acronym, inner capitals) or a capitalised word follows it ("Northwind Energy reported ...").
    nxt = tokens[1] if len(tokens) > 1 else ""
    return bool(re.search(r"['’]s$", token) or any(c.isupper() for c in token[1:])
                or (_capitalised(nxt) and not _YEAR.match(nxt)))


def _name_at(tokens: list[str], i: int) -> tuple[str, int]:
    words = []
    while i < len(tokens) and _capitalised(tokens[i]) and not _QUARTER.match(tokens[i]) \
            and tokens[i].lower().rstrip(".") not in _MONTHS:
        word = tokens[i].rstrip(".")
        possessive = re.search(r"['’]s$", word)
        words.append(re.sub(r"['’]s$", "", word))
        i += 1
        if possessive:  # "Northwind's Q4 revenue": the possessive ends the name
            break
    return " ".join(words), i


def is_standalone(subject: Subject, min_content_words: int) -> bool:
    """The rule for a question that needs no history: a name of its own, no reference back, enough content."""
    return bool(subject.names) and not subject.refers_back and not subject.time_back \
        and subject.content_words >= min_content_words


def follow_up(previous: Subject, question: str, min_content_words: int = 3) -> tuple[Subject, dict]:
    """The standalone subject of ``question`` asked after ``previous``, and what was carried over."""
    current = parse(question)
    if is_standalone(current, min_content_words) or not (previous.names or previous.terms or previous.year
                                                         or previous.quarter):
        return current, {}
    carried: dict = {}
    elliptical = not current.terms or (current.refers_back and not current.terms)
    if not current.names and previous.names:
        # "it", "its", "that company" stand for the last name; a follow-up naming nothing keeps them all.
        current.names = previous.names[-1:] if current.refers_back and current.terms else list(previous.names)
        carried["names"] = list(current.names)
    elif current.refers_back and current.terms and not current.names and previous.terms:
        # "Does it ...?" after a question that names nothing: "it" is what that question was about, its key terms.
        current.terms = [*previous.terms, *(t for t in current.terms if t not in previous.terms)]
        carried["terms"] = list(previous.terms)
    if elliptical or current.time_back:
        for kind in ("quarter", "month", "year"):
            if getattr(current, kind) is None and getattr(previous, kind) is not None:
                setattr(current, kind, getattr(previous, kind))
                carried[kind] = getattr(previous, kind)
    if not current.terms and previous.terms:
        current.terms = list(previous.terms)
        carried["terms"] = list(previous.terms)
        if not current.numbers and previous.numbers:
            current.numbers = list(previous.numbers)
            carried["numbers"] = list(previous.numbers)
    return current, carried


def contextualize(question: str, history: list[dict[str, str]], min_content_words: int = 3
                  ) -> tuple[str, dict]:
    """The rules path as a function: the standalone query of ``question`` after the user turns of ``history``."""
    previous = Subject()
    for turn in history:
        if turn.get("role") == "user" and turn.get("content", "").strip():
            previous, _ = follow_up(previous, turn["content"], min_content_words)
    current, carried = follow_up(previous, question, min_content_words)
    if not carried:
        return question, {}
    return current.as_query() or question, carried


class QueryContextualizer(PreSearchAgent):
    agent_id = "query_contextualizer"
    version = "1"
    description = (
        "Rewrites a follow-up question into a standalone query from the conversation's earlier turns: by rules "
        "(names, years, quarters, key terms carried over) or through the LLM."
    )
    default_timeout_s = 20.0
    cache_ttl_s = 24 * 3600  # the same question after the same turns is rewritten the same way

    class Config(AgentConfig):
        mode: Literal["offline", "llm", "auto"] = Field(
            "auto", description="offline: the rules; llm: the LLM; auto: the LLM when configured, else the rules."
        )
        max_turns: int = Field(
            6, ge=1, le=50, description="Earlier messages (user and assistant) read, the most recent ones."
        )
        min_content_words: int = Field(
            3, ge=1, le=20,
            description="A question naming something of its own with this many content words is left alone.",
        )
        use_answers: bool = Field(True, description="LLM path: show the LLM the earlier answers, not only questions.")
        max_answer_chars: int = Field(600, ge=0, le=8000, description="LLM path: each earlier answer cut to this.")
        llm_timeout_s: float = Field(10.0, gt=0, le=120)

    config: Config

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        history = [t for t in (ctx.conversation_history or []) if (t.get("content") or "").strip()]
        history = history[-self.config.max_turns:]
        if not any(t.get("role") == "user" for t in history):
            raise AgentSkipped("no conversation history: the query is searched as asked")
        llm, mode = ctx.llm, self.config.mode
        if mode == "llm" and llm is None:
            raise AgentSkipped("mode 'llm' but no LLM endpoint configured")
        metadata: dict = {"original_query": inp.query}
        if mode in ("llm", "auto") and llm is not None:
            try:
                query = self._by_llm(llm, inp.query, history)
                changed = query != inp.query.strip()
                if not changed and contextualize(inp.query, history, self.config.min_content_words)[1]:
                    # A small model often hands the question back as it came: the rules see a reference back.
                    raise LLMError("the rewrite repeats a question that refers back to the conversation")
                metadata.update(standalone_query=query, contextualized=changed,
                                contextualization_method="llm" if changed else "unchanged")
                return PreSearchOutput(query=query if changed else inp.query, metadata=metadata)
            except LLMError as exc:
                if mode == "llm":
                    raise
                metadata["contextualization_warning"] = f"LLM rewrite failed, used the rules: {exc}"
        query, carried = contextualize(inp.query, history, self.config.min_content_words)
        metadata.update(standalone_query=query, contextualized=bool(carried),
                        contextualization_method="rules" if carried else "unchanged", carried=carried)
        return PreSearchOutput(query=query, metadata=metadata)

    def _by_llm(self, llm, query: str, history: list[dict[str, str]]) -> str:
        """The LLM's standalone query; ``LLMError`` for a reply without one, or one too long to be a query."""
        lines = []
        for turn in history:
            if turn.get("role") == "user":
                lines.append(f"User: {turn['content'].strip()}")
            elif self.config.use_answers and self.config.max_answer_chars:
                lines.append(f"Assistant: {turn['content'].strip()[: self.config.max_answer_chars]}")
        system = (
            "You rewrite the last question of a conversation into a standalone search query for a document search "
            "engine. Resolve pronouns and references ('it', 'that company', 'and in 2024?') from the conversation, "
            "keep names, numbers, dates and the question's language. If the question is already standalone, return "
            'it unchanged. Reply with JSON only: {"query": "<the standalone query>"}'
        )
        last = f"\n\nLast question: {query.strip()}"
        longest_user = max((len(t["content"]) for t in history if t.get("role") == "user"), default=0)
        reply_tokens = REPLY_BASE_TOKENS + 2 * estimate_tokens(query)
        # The most recent turns matter most: they are fitted first and the oldest are left out.
        fitted = fit(llm, [{"role": "system", "content": system}, {"role": "user", "content": "Conversation:" + last}],
                     lines[::-1], reply_tokens, share="in_order")
        if not fitted:
            raise LLMError("the conversation does not fit the model's context beside the question")
        user = "Conversation:\n" + "\n".join(fitted[::-1]) + last
        data = llm.complete_json([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                 timeout_s=self.config.llm_timeout_s, max_tokens=reply_tokens,
                                 json_schema=REWRITE_SCHEMA)
        rewritten = data.get("query") if isinstance(data, dict) else None
        if not isinstance(rewritten, str) or not rewritten.strip():
            raise LLMError(f"rewrite reply has no query: {str(data)[:200]!r}")
        rewritten = " ".join(rewritten.split())
        if len(rewritten) > MAX_GROWTH * (len(query) + longest_user) + 40:
            raise LLMError(f"rewrite reply is {len(rewritten)} characters, not a search query: {rewritten[:200]!r}")
        asked = _bare_words(" ".join([query, *(t["content"] for t in history if t.get("role") == "user")]))
        said = _bare_words(rewritten)
        if _CITATION.search(rewritten) or len(said - asked) * 2 > len(said):
            # Most of its words come from the earlier answers, not from any question: an answer, not the question.
            raise LLMError(f"rewrite reply reads like an earlier answer, not the question: {rewritten[:200]!r}")
        own, lowered = parse(query), rewritten.lower()
        quarter_words = {own.quarter.lower(), *(w for w, q in _ORDINAL_QUARTERS.items() if q == own.quarter)} \
            if own.quarter else set()
        dropped = [w for w in (*own.names, own.year, own.month, *own.numbers, *own.terms)
                   if w and w.lower() not in lowered]
        if own.quarter and quarter_words and not any(w in lowered for w in quarter_words):
            dropped.append(own.quarter)
        if dropped:
            # An earlier question handed back, or the follow-up's own subject lost ("and its profit?" without it).
            raise LLMError(f"rewrite reply drops the question's own words {dropped}: {rewritten[:200]!r}")
        return rewritten
