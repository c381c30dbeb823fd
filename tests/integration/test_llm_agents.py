"""The LLM paths of the agents and of the iterative loop against a real model: llama.cpp's ``llama-server`` with
SmolLM2-135M-Instruct (``agentsearch.devstack.llm_server``), a weak model that writes prose around JSON, repeats the
question and runs on until its token limit.

Each test lets the model say whatever it says and checks what the project does with it: a reply that is used is
well-formed (JSON of the asked shape, a query that is a query), and one that is not is replaced by the agent's
offline or no-op path with the reason recorded. The structured-output requests are checked on every reply: asked
with a JSON schema, the server's grammar makes the reply parse. The agents run all at once (``outcomes``), as a
worker's threads would, so the server's four slots answer them together; each test checks one.

A second server of one 512-token slot shows the budgets: a prompt of long documents sent as it is is refused (400,
past the context), the same documents through the agents fit (``/props`` said 512; the reply's prompt tokens leave
room for its ``max_tokens``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from agentsearch.devstack.llm_server import LLMServer
from agentsearch.pipeline.agentic.refine import MAX_QUERY_CHARS, LLMRefiner
from agentsearch.pipeline.agentic.scoring import Evaluation
from agentsearch.pipeline.agentic.sufficiency import LLMGrader, OfflineGrader
from agentsearch.pipeline.agents.base import AgentContext, Document, PostSearchInput, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.fact_checker import FactChecker
from agentsearch.pipeline.agents.builtin.intent_classifier import IntentClassifier
from agentsearch.pipeline.agents.builtin.llm_prompt import LlmPrompt
from agentsearch.pipeline.agents.builtin.query_contextualizer import QueryContextualizer, contextualize
from agentsearch.pipeline.agents.builtin.query_expander import QueryExpander
from agentsearch.pipeline.agents.builtin.translator import Translator
from agentsearch.pipeline.platform.llm import LLMClient, LLMError, LLMReply
from agentsearch.pipeline.platform.prompt_budget import MARGIN_TOKENS, fit_texts
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import words
from tests.integration.conftest import SAMPLE_CORPUS

pytestmark = pytest.mark.integration

CORPUS = [Document(id=d["id"], title=d["title"], text=d["text"])
          for d in map(json.loads, SAMPLE_CORPUS.read_text().splitlines()) if d]
TRUSTED_ID = "7d1f6c3e-2b1a-4f7e-9a51-0c2d3e4f5a6b"
SMALL_CTX = 512
SPANISH = "¿Cuáles fueron los ingresos de Northwind Energy en el cuarto trimestre de 2025?"
REVENUE = [{"role": "user", "content": "What was Northwind Energy's revenue in Q4 2025?"},
           {"role": "assistant", "content": "Q4 2025 revenue reached $412 million [1]."}]


class Recording(LLMClient):
    """The project's client, keeping each reply and what was asked with it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[dict, LLMReply | LLMError]] = []

    def reply(self, messages, timeout_s=20.0, temperature=0.0, max_tokens=None, json_schema=None) -> LLMReply:
        asked = {"messages": messages, "max_tokens": max_tokens, "json_schema": json_schema}
        try:
            got = super().reply(messages, timeout_s, temperature, max_tokens, json_schema)
        except LLMError as exc:
            self.calls.append((asked, exc))
            raise
        self.calls.append((asked, got))
        return got

    def structured_replies_parse(self) -> None:
        """Every reply asked for by JSON schema that ran to its end is JSON holding the schema's required keys."""
        for asked, got in self.calls:
            if asked["json_schema"] is None or isinstance(got, LLMError) or got.truncated:
                continue
            data = json.loads(got.text)  # the grammar's reply: JSON as it is, no prose around it
            assert set(asked["json_schema"].get("required", [])) <= set(data), got.text


class WordTools:
    """``ctx.tools`` over the sample corpus: keyword search, bag-of-words vectors, the vocabulary and the LLM."""

    def __init__(self, llm: LLMClient | None) -> None:
        self.llm = llm

    def owned_collection(self, collection_id: str) -> str:
        return collection_id

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        terms = set(words(query))
        scored = sorted(((len(terms & set(words(f"{d.title} {d.text}"))), d) for d in CORPUS), key=lambda s: -s[0])
        return [d.model_copy(update={"score": float(n)}) for n, d in scored[:top_k] if n]

    def vocabulary(self, collection_id: str) -> dict[str, int]:
        return Counter(w for d in CORPUS for w in words(f"{d.title} {d.text}"))

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * 64
            for word in words(text):
                vector[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 64] += 1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            vectors.append([x / norm for x in vector])
        return vectors


def pre_ctx(llm, history=None) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id="c1", tools=WordTools(llm),
                        conversation_history=history)


@pytest.fixture(scope="module")
def small_server(tmp_path_factory):
    """One slot of 512 tokens: a request's prompt and reply must fit in it together."""
    with LLMServer(tmp_path_factory.mktemp("small-llm"), ctx_size=SMALL_CTX, parallel=1) as server:
        yield server


@pytest.fixture
def small(small_server) -> Recording:
    client = Recording(small_server.url, small_server.model)
    yield client
    client.structured_replies_parse()


# --- the agents, all at once: the server's four slots answer them together -------------------------------------

QUERY = "What was Northwind Energy's revenue in Q4 2025, and how did it compare with 2024?"
INTENTS = {"finance": ["What was the revenue?", "EBITDA in Q3"], "hr": ["parental leave policy"]}
DEPARTMENT = {"type": "object", "properties": {"department": {"type": "string", "maxLength": 40}},
              "required": ["department"]}


def revenue_docs() -> list[Document]:
    return [d for d in CORPUS if "revenue" in d.text.lower()][:3]


def off_topic() -> list[tuple[Document, Evaluation]]:
    return [(d, Evaluation(document_id=d.id, overall=1.5, reasoning="about another topic"))
            for d in CORPUS if "revenue" not in d.text.lower()][:2]


# Nine requests for four slots on a shared machine: the last ones wait their turn, as jobs' agents do.
WAIT_S = 90.0
SLOW = {"llm_timeout_s": WAIT_S}
CLAIMS = Document(id="claims", title="Quarterly update",
                  text="Northwind Energy reported fourth-quarter 2025 revenue of $412 million. "
                       "The Kestrel Point battery stores 400 MWh for the grid.")

SCENARIOS = {
    "translator": lambda llm: Translator({"target_language": "en", **SLOW}).run(
        PreSearchInput(query=SPANISH, metadata={"language": "es"}), pre_ctx(llm)),
    "expander": lambda llm: QueryExpander({"max_terms": 3, **SLOW}).run(
        PreSearchInput(query="offshore wind turbine maintenance", collection_id="c1"), pre_ctx(llm)),
    "contextualizer": lambda llm: QueryContextualizer({"mode": "auto", **SLOW}).run(
        PreSearchInput(query="and in 2024?"), pre_ctx(llm, REVENUE)),
    "intent": lambda llm: IntentClassifier({"intents": INTENTS, "min_confidence": 0.0, **SLOW}).run(
        PreSearchInput(query="How high was revenue in 2025?"), pre_ctx(llm)),
    "llm_prompt_json": lambda llm: LlmPrompt({
        "template": "Which department handles this question? {query}", "parse_json": True, "json_schema": DEPARTMENT,
        "metadata_key": "routing", "max_tokens": 32, **SLOW}).run(
        PreSearchInput(query="Can I take unpaid leave?"), pre_ctx(llm)),
    # Four tokens are too few for a rewritten query: the reply is cut, and a cut query is never the query.
    "llm_prompt_cut": lambda llm: LlmPrompt({
        "template": "Rewrite as a detailed search query: {query}", "output": "both", "metadata_key": "rewrite",
        "max_tokens": 4, **SLOW}).run(PreSearchInput(query="unpaid leave"), pre_ctx(llm)),
    "grade": lambda llm: LLMGrader(llm, OfflineGrader(KeywordAnalyzer()), timeout_s=WAIT_S, max_follow_ups=2).grade(
        QUERY, revenue_docs()[:2]),
    "refine": lambda llm: LLMRefiner(llm, timeout_s=WAIT_S).refine(QUERY, QUERY, revenue_docs()[:1], off_topic()),
    "fact_check": lambda llm: FactChecker({"trusted_collection_id": TRUSTED_ID, "mode": "llm", "max_claims": 2,
                                           **SLOW}).run(
        PostSearchInput(documents=[CLAIMS], query="Northwind revenue"),
        AgentContext(pipeline_stage=Stage.POST_SEARCH, tools=WordTools(llm))),
}


@pytest.fixture(scope="module")
def outcomes(llm_server) -> dict[str, SimpleNamespace]:
    """Each scenario run once, all at once: its output or its error, and its client's calls."""

    def attempt(name: str) -> SimpleNamespace:
        client = Recording(llm_server.url, llm_server.model)
        try:
            return SimpleNamespace(out=SCENARIOS[name](client), error=None, llm=client)
        except Exception as exc:  # noqa: BLE001 - an LLMError is an outcome; anything else fails its own test
            return SimpleNamespace(out=None, error=exc, llm=client)

    with ThreadPoolExecutor(max_workers=len(SCENARIOS)) as pool:
        return dict(zip(SCENARIOS, pool.map(attempt, SCENARIOS)))


@pytest.fixture
def outcome(request, outcomes) -> SimpleNamespace:
    """The outcome the test names (``@pytest.mark.parametrize("outcome", [name], indirect=True)``)."""
    found = outcomes[request.param]
    if found.error is not None and not isinstance(found.error, LLMError):
        raise found.error
    found.llm.structured_replies_parse()
    return found


def scenario(name: str):
    return pytest.mark.parametrize("outcome", [name], indirect=True)


@scenario("translator")
def test_the_translator_gives_a_checked_translation_or_an_error_saying_why(outcome):
    if outcome.error is not None:
        # The run's error: an echo, another language, too short, no word, lost numbers, a reply cut short.
        assert re.search(r"repeats|copies|not 'en'|empty|characters|cut at|no word|numbers|JSON", str(outcome.error))
    else:
        out = outcome.out
        assert out.metadata["translated_to"] == "en" and out.metadata["original_query"] == SPANISH
        assert out.query.strip() and out.query != SPANISH and "2025" in out.query
    ((asked, _),) = outcome.llm.calls
    assert asked["json_schema"]["required"] == ["source_language", "translation"] and asked["max_tokens"] > 0


@scenario("expander")
def test_the_expander_adds_new_short_terms_or_falls_back_to_feedback(outcome):
    out, query = outcome.out, "offshore wind turbine maintenance"
    terms = out.metadata["expansion_terms"]
    assert out.query == f"{query} {' '.join(terms)}".strip()
    assert all(not re.search(rf"(?<!\w){re.escape(t.lower())}(?!\w)", query) and len(t.split()) <= 4 for t in terms)
    if out.metadata["expansion_method"] == "llm":
        assert 0 < len(terms) <= 3 and "expansion_warning" not in out.metadata
    else:
        assert out.metadata["expansion_method"] == "pseudo_relevance"
        assert out.metadata["expansion_warning"].startswith("LLM expansion failed")


@scenario("contextualizer")
def test_the_contextualizer_always_makes_the_follow_up_standalone(outcome):
    out = outcome.out
    # The model's rewrite, or the rules' when it handed the question back or wrote no query: never "and in 2024?".
    assert out.query != "and in 2024?" and out.metadata["contextualized"] is True
    if out.metadata["contextualization_method"] == "rules":
        assert out.metadata["contextualization_warning"].startswith("LLM rewrite failed")
        assert out.query == contextualize("and in 2024?", REVENUE)[0] == "Northwind Energy Q4 2024 revenue"
    else:
        assert out.metadata["contextualization_method"] == "llm"
        assert len(out.query) <= 2 * (len("and in 2024?") + len(REVENUE[0]["content"])) + 40


@scenario("intent")
def test_the_intent_is_one_of_the_configured_labels(outcome):
    out = outcome.out
    assert out.metadata["intent"] in {"finance", "hr", "general"}
    if out.metadata["intent_method"] == "llm":
        assert 0.0 <= out.metadata["intent_confidence"] <= 1.0
        ((asked, got),) = outcome.llm.calls
        assert asked["json_schema"]["properties"]["intent"]["enum"] == ["finance", "hr", "general"]
        assert json.loads(got.text)["intent"] in {"finance", "hr", "general"}
    else:  # a reply cut short (a confidence of endless digits): the centroids decided
        assert out.metadata["intent_method"] == "embedding" and out.metadata["intent_warning"]


@scenario("llm_prompt_json")
def test_llm_prompt_stores_the_schemas_json(outcome):
    if outcome.error is not None:
        assert "cut at max_tokens" in str(outcome.error)  # JSON that did not end is not stored
    else:
        assert isinstance(outcome.out.metadata["routing"]["department"], str)


@scenario("llm_prompt_cut")
def test_llm_prompt_never_makes_a_cut_reply_the_query(outcome):
    ((_, got),) = outcome.llm.calls
    if outcome.error is not None:
        assert ("cut at max_tokens" in str(outcome.error) and got.truncated) or not got.text.strip()
    else:
        assert not got.truncated and outcome.out.query == outcome.out.metadata["rewrite"]


@scenario("grade")
def test_the_grade_is_the_models_or_the_offline_one_with_the_reason(outcome):
    grade = outcome.out
    if grade.method == "llm":
        assert grade.error is None and len(grade.follow_up_queries) <= 2
        assert all(q.strip() and q.lower() != QUERY.lower() for q in grade.follow_up_queries)
        assert not (grade.sufficient and grade.follow_up_queries)
    else:
        assert grade.error and "offline grade used" in grade.error


@scenario("refine")
def test_the_refined_query_is_new_or_the_original_with_the_reason(outcome):
    refinement = outcome.out
    if refinement.method == "llm":
        assert refinement.error is None and refinement.query.strip().lower() != QUERY.lower()
        assert len(refinement.query) <= MAX_QUERY_CHARS and not outcome.llm.calls[0][1].truncated
    else:
        assert refinement.method == "unchanged" and refinement.query == QUERY and refinement.error


@scenario("fact_check")
def test_fact_checking_takes_the_models_verdicts_or_keeps_the_offline_ones(outcome):
    report = outcome.out.documents[0].metadata["fact_check"]
    assert report["status"] in ("supported", "unsupported", "mixed")
    if report["method"] == "llm":
        assert "llm_error" not in report
        assert all(c["status"] in ("supported", "contradicted", "unsupported") for c in report["claims"])
    else:
        assert report["llm_error"].endswith("offline verdicts kept")


# --- budgets: one slot of 512 tokens --------------------------------------------------------------------------------

LONG_DOCS = [d.model_copy(update={"text": " ".join([d.text] * 3)}) for d in CORPUS[:6]]


def assert_fitted(client: Recording) -> None:
    """Every request was answered (none refused for its length) and its prompt left room for its reply."""
    assert client.calls
    for asked, got in client.calls:
        assert not (isinstance(got, LLMError) and got.status == 400), str(got)
        if isinstance(got, LLMReply) and got.prompt_tokens:
            assert got.prompt_tokens + (asked["max_tokens"] or 0) <= SMALL_CTX


def test_an_unbudgeted_prompt_is_refused_where_the_budgeted_one_fits(small):
    assert small.context_tokens() == SMALL_CTX  # from /props
    sources = "\n\n".join(f"[{n}] {d.title}\n{d.text}" for n, d in enumerate(LONG_DOCS, 1))
    raw = LLMClient(small.base_url, small.model)
    with pytest.raises(LLMError) as refused:
        raw.complete([{"role": "user", "content": f"Query: {QUERY}\n\nResults:\n\n{sources}"}], timeout_s=30,
                     max_tokens=64)
    assert refused.value.status == 400 and not refused.value.transient

    grade = LLMGrader(small, OfflineGrader(KeywordAnalyzer()), timeout_s=30).grade(QUERY, LONG_DOCS)
    assert_fitted(small)
    if grade.method == "llm":
        assert "to fit a 512-token context" in grade.budget
    else:  # a reply it could not use: the offline grade, saying why (never a prompt refused for its length)
        assert "offline grade used" in grade.error


def test_the_answer_steps_helper_fits_sources_by_the_servers_own_count(small):
    fixed = [{"role": "system", "content": "Answer from the numbered sources."},
             {"role": "user", "content": f"Question: {QUERY}"}]
    texts = [f"[{n}] {d.title}\n{d.text}" for n, d in enumerate(LONG_DOCS, 1)]
    fitted = fit_texts(small, fixed, texts, reply_tokens=128)
    assert fitted.fits and fitted.changed and fitted.context_tokens == SMALL_CTX
    assert all(t.startswith(f"[{n}] ") for n, t in enumerate(fitted.texts, 1))  # a prefix, numbers kept
    assert sum(small.count_tokens(t) for t in fitted.texts) <= fitted.available_tokens
    prompt = "\n".join(m["content"] for m in fixed) + "\n\n" + "\n\n".join(fitted.texts)
    # The template's own tokens are in the margin: the whole prompt, the reply and the template fit.
    assert small.count_tokens(prompt) + 128 + MARGIN_TOKENS <= SMALL_CTX


def test_a_documents_template_fits_the_small_slot(small):
    ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, tools=WordTools(small), retrieved_documents=LONG_DOCS)
    out = LlmPrompt({"template": "Sources:\n{documents}\n\nName their topic in three words.", "max_tokens": 24}
                    ).run(PreSearchInput(query="q"), ctx)
    assert isinstance(out.metadata["llm_prompt"], str)
    assert_fitted(small)
