"""The post-search catalogue on real text: reranker, fact_checker, pii_redactor, external_enricher, relevance_filter.

Agents get a small fake toolbox: ``embed`` is the real MiniLM embedder (loaded once for the module), ``search`` ranks
an in-memory list of documents by cosine. LLM variants talk HTTP to a local OpenAI-compatible server
(``tests.support.fake_llm``); the external enricher talks HTTP to a local server started by the test, registered as
an operator registers an endpoint and handed over through the toolbox (``tests.support.toolbox``).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import fakeredis
import numpy as np
import pytest
from pydantic import ValidationError

from pipeline.agents.base import AgentContext, AgentSkipped, Document, PostSearchInput, Stage
from pipeline.agents.builtin.external_enricher import ExternalEnricher, parse_path, resolve_path
from pipeline.agents.builtin.fact_checker import FactChecker, quantities
from pipeline.agents.builtin.pii_redactor import PiiRedactor, iban_valid, luhn_valid
from pipeline.agents.builtin.relevance_filter import RelevanceFilter
from pipeline.agents.builtin.reranker import Reranker, proximity_score, smallest_window
from pipeline.agents.references import CollectionReference, UnresolvedReference, collection_missing
from pipeline.platform.breakers import AgentBreaker
from pipeline.platform.llm import LLMClient
from pipeline.retrieval.analyzer import KeywordAnalyzer
from pipeline.retrieval.embedder import Embedder
from pipeline.retrieval.sentence_vectors import chunk_units
from pipeline.security.egress import EgressPolicy
from pipeline.security.registered_tools import RegisteredTool
from tests.support.fake_llm import FakeLLM
from tests.support.toolbox import RegisteredToolbox

REPO = Path(__file__).resolve().parents[3]
SAMPLE_LINES = (REPO / "examples" / "sample_corpus.jsonl").read_text().splitlines()
CORPUS = {d["id"]: Document(**d) for d in map(json.loads, SAMPLE_LINES)}
POST = AgentContext(pipeline_stage=Stage.POST_SEARCH)


class CachedEmbedder:
    """The real embedder, remembering vectors by text: the tests embed the same passages many times."""

    def __init__(self) -> None:
        self._embedder = Embedder("all-MiniLM-L6-v2")
        self._vectors: dict[str, list[float]] = {}

    def embed(self, texts: list[str]) -> list[list[float]]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        self._vectors.update(zip(todo, self._embedder.embed(todo)))
        return [self._vectors[t] for t in texts]


@pytest.fixture(scope="module")
def embedder() -> CachedEmbedder:
    return CachedEmbedder()


class FakeTools:
    """What ``ctx.tools`` offers agents, over in-memory documents: real embeddings, cosine search, an optional LLM."""

    def __init__(self, embedder: CachedEmbedder, documents: list[Document] = (), llm: LLMClient | None = None,
                 owned: tuple[str, ...] | None = None) -> None:
        self._embedder = embedder
        self.documents = list(documents)
        self.llm = llm
        self.searches: list[tuple[str, str, int, str]] = []
        self._vectors = None
        # The collections the job's user owns (AgentTools bound to a user): the trusted one unless told otherwise.
        self.owned = set(owned) if owned is not None else {TRUSTED_ID}

    def owned_collection(self, collection_id: str) -> str:
        if collection_id not in self.owned:
            raise collection_missing(collection_id)
        return collection_id

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts)

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        self.owned_collection(collection_id)  # as AgentTools does
        self.searches.append((collection_id, query, top_k, strategy))
        if self._vectors is None:
            self._vectors = np.asarray(self.embed([f"{d.title}. {d.text}" for d in self.documents]))
        sims = self._vectors @ np.asarray(self.embed([query])[0])
        return [self.documents[i].model_copy(update={"score": float(sims[i])}) for i in np.argsort(-sims)[:top_k]]


def ctx_with(tools) -> AgentContext:
    return AgentContext(pipeline_stage=Stage.POST_SEARCH, tools=tools)


def run(agent, documents, query="q", ctx=POST):
    return agent.run(PostSearchInput(documents=documents, query=query), ctx)


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server


# --- pii_redactor -------------------------------------------------------------------------------------------------

VALID_CARD, INVALID_CARD = "4111 1111 1111 1111", "4111 1111 1111 1112"
VALID_IBAN, INVALID_IBAN = "GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 33"

REFUND_NOTE = (
    f"Refund for order 88231 was issued to card {VALID_CARD} on 2025-03-14. The earlier attempt with "
    f"{INVALID_CARD} was declined, and the tracking number 7421 0093 1187 4412 (order 88231) is unchanged."
)
SUPPORT_TICKET = (
    "Customer Maria Lopez (maria.lopez@helios-energy.example) called from (415) 555-2671 and later from "
    "+44 20 7946 0958 about invoice 2025-0042. Her SSN 536-22-8714 was on file by mistake. The login came from "
    "203.0.113.42 and 2001:db8::8a2e:370:7334. Refunds go to IBAN GB82 WEST 1234 5698 7654 32. MARIA LOPEZ "
    "confirmed the request on 12:30:45 via version 1.2.3 of the app."
)
SUPPORT_TICKET_MASKED = (
    "Customer [NAME] ([EMAIL]) called from [PHONE] and later from "
    "[PHONE] about invoice 2025-0042. Her SSN [SSN] was on file by mistake. The login came from "
    "[IP] and [IP]. Refunds go to IBAN [IBAN]. [NAME] "
    "confirmed the request on 12:30:45 via version 1.2.3 of the app."
)
SUPPORT_TICKET_REMOVED = (
    "Customer () called from and later from "
    "about invoice 2025-0042. Her SSN was on file by mistake. The login came from "
    "and. Refunds go to IBAN. "
    "confirmed the request on 12:30:45 via version 1.2.3 of the app."
)
RAW_VALUES = ["Maria Lopez", "maria.lopez@helios-energy.example", "(415) 555-2671", "+44 20 7946 0958",
              "536-22-8714", "203.0.113.42", "2001:db8::8a2e:370:7334", VALID_IBAN, "MARIA LOPEZ"]


def test_checksums_used_by_the_pii_redactor():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert luhn_valid("378282246310005")  # an Amex test number
    assert iban_valid("GB82WEST12345698765432") and iban_valid("DE89370400440532013000")
    assert not iban_valid("GB82WEST12345698765433") and not iban_valid("DE89370400440532013001")


def test_pii_redactor_removes_a_luhn_valid_card_and_keeps_a_luhn_invalid_digit_string():
    doc = Document(id="refund", title="Refund note", text=REFUND_NOTE)
    out = run(PiiRedactor(), [doc])
    text = out.documents[0].text
    assert VALID_CARD not in text and "card [CARD] on 2025-03-14" in text
    assert INVALID_CARD in text  # fails the Luhn check: not a card number
    assert "7421 0093 1187 4412" in text  # a 16-digit tracking number that is not Luhn-valid either
    assert out.documents[0].metadata["pii_redacted"] == {"card": 1}
    assert out.metadata["pii_redacted"]["card"] == 1


def test_pii_redactor_redacts_a_valid_iban_and_keeps_an_invalid_one():
    text = (f"Pay the invoice to {VALID_IBAN} (not {INVALID_IBAN}, which has a typo). "
            "The German account DE89370400440532013000 is also ours; DE89370400440532013001 is not an IBAN.")
    out = run(PiiRedactor(), [Document(id="d", text=text)])
    assert out.documents[0].text == (
        f"Pay the invoice to [IBAN] (not {INVALID_IBAN}, which has a typo). "
        "The German account [IBAN] is also ours; DE89370400440532013001 is not an IBAN."
    )
    assert out.metadata["pii_redacted"]["iban"] == 2


def test_pii_redactor_mask_mode_on_a_support_ticket():
    ticket = Document(id="t", title="Ticket from Maria Lopez", text=SUPPORT_TICKET)
    out = run(PiiRedactor({"names": ["Maria Lopez"]}), [ticket])
    doc = out.documents[0]
    assert doc.text == SUPPORT_TICKET_MASKED
    assert doc.title == "Ticket from [NAME]"
    assert doc.metadata["pii_redacted"] == {"email": 1, "phone": 2, "iban": 1, "ssn": 1, "ip": 2, "name": 3}
    assert out.metadata["pii_redacted"] == {"email": 1, "phone": 2, "card": 0, "iban": 1, "ssn": 1, "ip": 2, "name": 3}
    assert out.metadata["pii_documents_redacted"] == 1


def test_pii_redactor_remove_mode_leaves_no_trace_and_tidy_spacing():
    out = run(PiiRedactor({"mode": "remove", "names": ["Maria Lopez"]}), [Document(id="t", text=SUPPORT_TICKET)])
    assert out.documents[0].text == SUPPORT_TICKET_REMOVED
    assert "  " not in out.documents[0].text


def test_pii_redactor_hash_mode_is_stable_salted_and_never_shows_the_value():
    other = Document(id="t2", text="Follow-up sent to Maria.Lopez@helios-energy.example by the billing team.")
    agent = PiiRedactor({"mode": "hash", "salt": "s3cret", "names": ["Maria Lopez"]})
    out = run(agent, [Document(id="t1", text=SUPPORT_TICKET), other])
    first, second = out.documents[0].text, out.documents[1].text
    email_hashes = re.findall(r"\[EMAIL:([0-9a-f]{6})\]", first) + re.findall(r"\[EMAIL:([0-9a-f]{6})\]", second)
    assert len(email_hashes) == 2 and email_hashes[0] == email_hashes[1]  # one address, one hash, any letter case
    names = re.findall(r"\[NAME:([0-9a-f]{6})\]", first)
    assert len(names) == 2 and names[0] == names[1]  # "Maria Lopez" and "MARIA LOPEZ"
    assert len(set(re.findall(r"\[PHONE:([0-9a-f]{6})\]", first))) == 2  # two different numbers
    # Same input, same salt: same text; another salt: other hashes.
    assert run(agent, [Document(id="t1", text=SUPPORT_TICKET)]).documents[0].text == first
    resalted = run(PiiRedactor({"mode": "hash", "salt": "other", "names": ["Maria Lopez"]}),
                   [Document(id="t1", text=SUPPORT_TICKET)]).documents[0].text
    assert resalted != first and len(resalted.split()) == len(first.split())
    dumped = json.dumps([d.model_dump() for d in out.documents]) + json.dumps(out.metadata)
    for value in RAW_VALUES:
        assert value not in dumped


def test_pii_redactor_counts_per_type_and_redacts_metadata_strings_but_not_the_values():
    docs = [
        Document(id="a", text="Write to ops@northwind.example or hr@northwind.example today.",
                 metadata={"author": "ops@northwind.example", "collection_id": "c-1",
                           "quotes": [{"q": "call 212-555-0199"}], "published": "2024-04-25", "pages": 3}),
        Document(id="b", text="Server 10.20.30.40 answered; 10.20.30.400 is not an address."),
        Document(id="c", text="Nothing personal here: revenue was $349 million, up 14% from $306 million."),
    ]
    out = run(PiiRedactor(), docs)
    a, b, c = out.documents
    assert a.text == "Write to [EMAIL] or [EMAIL] today."
    assert a.metadata["author"] == "[EMAIL]" and a.metadata["quotes"] == [{"q": "call [PHONE]"}]
    assert a.metadata["collection_id"] == "c-1" and a.metadata["published"] == "2024-04-25" and a.metadata["pages"] == 3
    assert a.metadata["pii_redacted"] == {"email": 3, "phone": 1}
    assert b.text == "Server [IP] answered; 10.20.30.400 is not an address."
    assert c == docs[2] and "pii_redacted" not in c.metadata
    assert out.metadata["pii_redacted"] == {"email": 3, "phone": 1, "card": 0, "iban": 0, "ssn": 0, "ip": 1, "name": 0}
    assert out.metadata["pii_documents_redacted"] == 2


def test_pii_redactor_leaves_invalid_look_alikes_and_the_sample_corpus_alone():
    look_alikes = ("SSNs 666-12-3456, 000-12-3456, 912-34-5678 and 123-00-4567 are never issued. Times like 12:30:45, "
                   "dates like 2024-04-25, versions like 1.2.3, 999.10.10.10 and the number 555-123-4567 (exchange "
                   "starting with 1) stay.")
    out = run(PiiRedactor(), [Document(id="x", text=look_alikes), *CORPUS.values()])
    assert out.documents[0].text == look_alikes
    assert out.documents[1:] == list(CORPUS.values())
    assert sum(out.metadata["pii_redacted"].values()) == 0


def test_pii_redactor_only_redacts_the_types_switched_on():
    text = "Mail maria.lopez@helios-energy.example or call (415) 555-2671."
    out = run(PiiRedactor({"types": ["phone"]}), [Document(id="d", text=text)])
    assert out.documents[0].text == "Mail maria.lopez@helios-energy.example or call [PHONE]."
    assert out.metadata["pii_redacted"] == {"phone": 1}


@pytest.mark.parametrize("config", [{"mode": "blur"}, {"types": ["passport"]}, {"names": ["  "]}, {"hash_chars": 2},
                                    {"salt": 1}, {"mask": True}])
def test_pii_redactor_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        PiiRedactor(config)


# --- reranker -----------------------------------------------------------------------------------------------------

HARROW_QUERY = "When did the Harrow Ridge solar farm enter commercial operation?"
# The search order had the document that answers (Q3 2024: "entered commercial operation on 12 September 2024")
# last, behind documents that mention Harrow Ridge without saying when it started, and unrelated ones.
HARROW_CANDIDATES = ["nw-2024-q1", "nw-2024-q4", "energy-finance-glossary", "nw-2024-q2", "nw-2024-q3"]


def search_order(ids: list[str]) -> list[Document]:
    return [CORPUS[i].model_copy(update={"score": round(0.9 - 0.05 * k, 2)}) for k, i in enumerate(ids)]


def test_reranker_puts_the_document_that_answers_first(embedder):
    out = run(Reranker(), search_order(HARROW_CANDIDATES), HARROW_QUERY, ctx_with(FakeTools(embedder)))
    ids = [d.id for d in out.documents]
    assert ids[0] == "nw-2024-q3"
    assert set(ids) == set(HARROW_CANDIDATES)
    scores = [d.score for d in out.documents]
    assert scores == sorted(scores, reverse=True) and 0.0 <= scores[-1] <= scores[0] <= 1.0
    top = out.documents[0].metadata["rerank"]
    assert top["original_rank"] == 5 and top["original_score"] == 0.7 and top["score"] == out.documents[0].score
    assert all(0.0 <= top[k] <= 1.0 for k in ("dense", "bm25", "proximity"))
    assert top["bm25"] == 1.0  # the best BM25 of the candidates is the unit
    summary = out.metadata["rerank"]
    assert summary["method"] == "offline" and summary["dense"] == "ok"
    assert summary["weights"] == {"dense": 0.5, "bm25": 0.3, "proximity": 0.2}
    assert summary["order"] == ids and summary["moved"] >= 2


class KnownTools(FakeTools):
    """A toolbox with ``embed_known``, as a job's: texts whose vectors ingestion stored are read, not embedded."""

    def __init__(self, embedder: CachedEmbedder) -> None:
        super().__init__(embedder)
        self.asked: list[tuple[list[str], list[str]]] = []

    def embed_known(self, texts: list[str], documents: list[Document]) -> list[list[float]]:
        self.asked.append((list(texts), [d.id for d in documents]))
        return self.embed(texts)


def test_reranker_reads_known_vectors_of_whole_sentences_and_titles_and_ranks_as_with_embed(embedder):
    tools = KnownTools(embedder)
    documents = search_order(HARROW_CANDIDATES)
    out = run(Reranker(), documents, HARROW_QUERY, ctx_with(tools))
    plain = run(Reranker(), documents, HARROW_QUERY, ctx_with(FakeTools(embedder)))
    assert [d.id for d in out.documents] == [d.id for d in plain.documents]
    assert out.metadata["rerank"]["dense"] == "ok"
    [(texts, ids)] = tools.asked  # one call for every document
    assert ids == HARROW_CANDIDATES and texts[0] == HARROW_QUERY
    # What it asks for is what ingestion stores: each document's whole sentences and its title.
    stored = {u for d in documents for u in chunk_units(d.title, d.text)}
    assert set(texts[1:]) <= stored


def test_reranker_without_a_toolbox_ranks_by_bm25_and_proximity_and_says_so():
    out = run(Reranker(), search_order(HARROW_CANDIDATES), HARROW_QUERY)
    assert out.documents[0].id == "nw-2024-q3"
    summary = out.metadata["rerank"]
    assert summary["dense"].startswith("unavailable: no agent toolbox")
    assert summary["weights"] == {"bm25": 0.6, "proximity": 0.4}
    assert "dense" not in out.documents[0].metadata["rerank"]


def test_reranker_weights_decide(embedder):
    # Lexically, the glossary's definitions match "capacity factor" best; only BM25 weighted, the glossary wins.
    query = "What is a capacity factor?"
    ids = ["nw-2024-q3", "nw-kestrel-storage", "energy-finance-glossary"]
    only_bm25 = run(Reranker({"dense_weight": 0, "proximity_weight": 0}), search_order(ids), query)
    assert only_bm25.documents[0].id == "energy-finance-glossary"
    assert only_bm25.metadata["rerank"]["weights"] == {"bm25": 1.0}


def test_reranker_proximity_prefers_query_terms_close_together():
    analyzer = KeywordAnalyzer()
    query = analyzer.terms("battery storage project")
    close = analyzer.terms("Northwind approved the battery storage project at Kestrel Point in 2024.")
    apart = analyzer.terms("The battery supplier was chosen in March. Grid storage prices fell. A new project "
                           "office opened in Aberdeen.")
    assert smallest_window(close, set(query)) == (3, 3)
    assert smallest_window(apart, set(query))[1] > 3
    assert proximity_score(query, close) == 1.0
    assert 0 < proximity_score(query, apart) < proximity_score(query, close)
    assert proximity_score(query, analyzer.terms("Wind turbines need maintenance.")) == 0.0


def test_reranker_llm_listwise_orders_by_the_reply(embedder, fake_llm):
    fake_llm.script("Here is the ranking:\n```json\n[3, 1]\n```")
    tools = FakeTools(embedder, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    ids, query = ["nw-2024-q1", "nw-kestrel-storage", "nw-hr-flexible-work"], "battery storage at Kestrel Point"
    offline = [d.id for d in run(Reranker(), search_order(ids), query, ctx_with(FakeTools(embedder))).documents]
    assert offline[0] == "nw-kestrel-storage"
    out = run(Reranker({"mode": "llm", "llm_top_n": 3}), search_order(ids), query, ctx_with(tools))
    # The LLM saw the offline ranking as numbered passages (each its best passage, title first) and the query.
    request = fake_llm.requests[0]
    assert request["model"] == "fake" and request["messages"][0]["role"] == "system"
    prompt = request["messages"][-1]["content"]
    assert "Query: battery storage at Kestrel Point" in prompt
    shown = re.findall(r"^\[(\d)\] (.*)$", prompt, re.MULTILINE)
    assert [n for n, _ in shown] == ["1", "2", "3"]
    assert all(line.startswith(f"{CORPUS[i].title}: ") for (_, line), i in zip(shown, offline))
    # The documents follow the reply: #3, #1, then the one it left out.
    assert [d.id for d in out.documents] == [offline[2], offline[0], offline[1]]
    summary = out.metadata["rerank"]
    assert summary["method"] == "llm" and summary["llm_missing"] == 1 and "llm_error" not in summary
    assert [d.score for d in out.documents] == [1.0, round(2 / 3, 6), round(1 / 3, 6)]
    assert out.documents[0].metadata["rerank"]["offline_rank"] == 3


@pytest.mark.parametrize("reply", ["The second passage is the most relevant one.", "[7, 9]", '{"best": "two"}', ""])
def test_reranker_keeps_the_offline_order_when_the_llm_reply_is_malformed(embedder, fake_llm, reply):
    fake_llm.script(reply)
    tools = FakeTools(embedder, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    documents = search_order(HARROW_CANDIDATES)
    offline = run(Reranker(), documents, HARROW_QUERY, ctx_with(FakeTools(embedder)))
    out = run(Reranker({"mode": "auto"}), documents, HARROW_QUERY, ctx_with(tools))
    assert len(fake_llm.requests) == 1
    assert [d.id for d in out.documents] == [d.id for d in offline.documents]
    assert [d.score for d in out.documents] == [d.score for d in offline.documents]
    assert out.metadata["rerank"]["method"] == "offline"
    assert "kept the offline order" in out.metadata["rerank"]["llm_error"]


def test_reranker_auto_without_an_llm_is_offline_and_llm_mode_says_what_is_missing(embedder):
    tools = FakeTools(embedder)
    auto = run(Reranker({"mode": "auto"}), search_order(HARROW_CANDIDATES), HARROW_QUERY, ctx_with(tools))
    assert auto.metadata["rerank"]["method"] == "offline" and "llm_error" not in auto.metadata["rerank"]
    forced = run(Reranker({"mode": "llm"}), search_order(HARROW_CANDIDATES), HARROW_QUERY, ctx_with(tools))
    assert forced.metadata["rerank"]["llm_error"].startswith("no LLM endpoint configured")
    assert [d.id for d in forced.documents] == [d.id for d in auto.documents]


@pytest.mark.parametrize("config", [{"dense_weight": 0, "bm25_weight": 0, "proximity_weight": 0}, {"bm25_weight": -1},
                                    {"language": "klingon"}, {"mode": "magic"}, {"passage_sentences": 0}])
def test_reranker_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        Reranker(config)


def test_reranker_passes_an_empty_list_through():
    assert run(Reranker(), [], "q").documents == []


# --- fact_checker ---------------------------------------------------------------------------------------------

TRUSTED_ID = "7d1c2f4e-5b6a-4c3d-9e8f-0a1b2c3d4e5f"  # the trusted collection
TRUSTED = [CORPUS[i] for i in ("nw-2024-q3", "nw-2024-q4", "nw-2025-q4", "nw-safety-2024", "nw-kestrel-storage")]
AGREES = Document(
    id="wire-agrees", title="Northwind closes 2024 with double-digit growth", score=0.8,
    text="Northwind Energy said fourth-quarter 2024 revenue was $349 million, up 14% from $306 million a year "
         "earlier. Full-year 2024 revenue came to $1,226 million, an increase of 12% over 2023.",
)
CONTRADICTS = Document(
    id="blog-contradicts", title="Northwind beats every expectation", score=0.7,
    text="Northwind Energy said fourth-quarter 2024 revenue was $412 million, up 35% from $306 million a year "
         "earlier. Full-year 2024 revenue came to $1.6 billion, an increase of 30% over 2023.",
)
HALF_RIGHT = Document(
    id="digest-mixed", title="Energy digest", score=0.6,
    text="Full-year 2024 revenue at Northwind came to $1.226 billion, an increase of 12% over 2023. "
         "Turbine availability averaged 91.2% in the third quarter of 2024, compared with 96.9% a year earlier.",
)


def test_quantities_normalise_scales_and_keep_years_as_context():
    analyzer = KeywordAnalyzer()
    a = quantities("Revenue totaled $1.226 billion in 2024, up 12%.", analyzer)
    b = quantities("Revenue totaled $1,226 million in 2024, up 12 percent.", analyzer)
    assert [(q.kind, q.value) for q in a] == [("amount", 1.226e9), ("year", 2024.0), ("percent", 12.0)]
    assert [(q.kind, q.value) for q in b] == [("amount", 1.226e9), ("year", 2024.0), ("percent", 12.0)]
    assert "revenu" in a[0].context


def test_fact_checker_marks_agreeing_numbers_supported_and_contradicting_ones_unsupported(embedder):
    tools = FakeTools(embedder, TRUSTED)
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [AGREES, CONTRADICTS], "Northwind 2024 revenue",
              ctx_with(tools))
    agrees, contradicts = (d.metadata["fact_check"] for d in out.documents)
    assert agrees["status"] == "supported" and agrees["support"] >= 0.6
    assert [c["status"] for c in agrees["claims"]] == ["supported", "supported"]
    assert agrees["claims"][0]["numbers"]["agree"] == ["$349 million", "14%", "$306 million"]
    assert agrees["claims"][0]["evidence"] == {
        "document_id": "nw-2024-q4",
        "sentence": "Fourth-quarter 2024 revenue was $349 million, up 14% from $306 million in Q4 2023.",
    }
    assert contradicts["status"] == "unsupported" and contradicts["support"] == 0.0
    assert [c["status"] for c in contradicts["claims"]] == ["contradicted", "contradicted"]
    assert contradicts["claims"][0]["numbers"]["contradict"] == ["$412 million", "35%"]
    assert contradicts["claims"][1]["numbers"]["contradict"] == ["$1.6 billion", "30%"]
    assert out.metadata["fact_check"] == {"checked": 2, "supported": 1, "mixed": 0, "unsupported": 1,
                                          "trusted_collection_id": TRUSTED_ID}
    # Every claim was looked up in the trusted collection, not the searched one.
    assert tools.searches and {s[0] for s in tools.searches} == {TRUSTED_ID}


def test_fact_checker_mixed_document_and_drop_unsupported(embedder):
    tools = FakeTools(embedder, TRUSTED)
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID, "drop_unsupported": True}),
              [AGREES, CONTRADICTS, HALF_RIGHT], "Northwind 2024", ctx_with(tools))
    assert [d.id for d in out.documents] == ["wire-agrees", "digest-mixed"]
    mixed = out.documents[1].metadata["fact_check"]
    assert mixed["status"] == "mixed"
    assert [c["status"] for c in mixed["claims"]] == ["supported", "contradicted"]
    assert mixed["claims"][1]["numbers"] == {"agree": ["96.9%"], "contradict": ["91.2%"]}
    assert 0 < mixed["support"] < out.documents[0].metadata["fact_check"]["support"]
    assert out.metadata["fact_check"]["dropped"] == ["blog-contradicts"]


def test_fact_checker_finds_no_support_for_claims_the_trusted_collection_does_not_make(embedder):
    offtopic = Document(id="recipe", title="Sourdough basics",
                        text="A sourdough starter needs equal weights of flour and water, fed every 12 hours. "
                             "Bakers in San Francisco popularised the style in 1849.")
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [offtopic], "bread",
              ctx_with(FakeTools(embedder, TRUSTED)))
    report = out.documents[0].metadata["fact_check"]
    assert report["status"] == "unsupported"
    assert all(c["status"] == "unsupported" and c["support"] < 0.6 for c in report["claims"])


def test_fact_checker_llm_entailment_replaces_the_offline_verdicts(embedder, fake_llm):
    fake_llm.script('[{"claim": 1, "verdict": "supported"}, {"claim": 2, "verdict": "contradicted"}]')
    tools = FakeTools(embedder, TRUSTED, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID, "mode": "llm"}), [AGREES], "q", ctx_with(tools))
    report = out.documents[0].metadata["fact_check"]
    assert report["method"] == "llm" and report["status"] == "mixed" and report["support"] == 0.5
    assert [(c["status"], c["offline_status"]) for c in report["claims"]] == [("supported", "supported"),
                                                                              ("contradicted", "supported")]
    prompt = fake_llm.requests[0]["messages"][-1]["content"]
    assert "Claim 1: Northwind Energy said fourth-quarter 2024 revenue was $349 million" in prompt
    assert "Fourth-quarter 2024 revenue was $349 million, up 14% from $306 million in Q4 2023." in prompt


def test_fact_checker_keeps_offline_verdicts_when_the_llm_reply_is_malformed(embedder, fake_llm):
    fake_llm.script("Both claims look plausible to me.", '[{"claim": 5, "verdict": "maybe"}]')
    tools = FakeTools(embedder, TRUSTED, llm=LLMClient(base_url=fake_llm.base_url, model="fake"))
    out = run(FactChecker({"trusted_collection_id": TRUSTED_ID, "mode": "auto"}), [AGREES, CONTRADICTS], "q",
              ctx_with(tools))
    agrees, contradicts = (d.metadata["fact_check"] for d in out.documents)
    assert len(fake_llm.requests) == 2
    assert (agrees["status"], contradicts["status"]) == ("supported", "unsupported")
    assert agrees["method"] == contradicts["method"] == "offline"
    assert "not JSON" in agrees["llm_error"] and "no usable verdict" in contradicts["llm_error"]


def test_fact_checker_skips_without_a_trusted_collection_or_a_toolbox(embedder):
    with pytest.raises(AgentSkipped, match="trusted_collection_id"):
        run(FactChecker(), [AGREES], "q", ctx_with(FakeTools(embedder, TRUSTED)))
    with pytest.raises(AgentSkipped, match="toolbox"):
        run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [AGREES], "q")


def test_fact_checker_refuses_a_trusted_collection_the_jobs_user_does_not_own_before_searching(embedder):
    tools = FakeTools(embedder, TRUSTED, owned=("0f0f0f0f-0000-4000-8000-000000000000",))
    with pytest.raises(UnresolvedReference) as caught:
        run(FactChecker({"trusted_collection_id": TRUSTED_ID}), [AGREES], "q", ctx_with(tools))
    assert str(caught.value) == f"trusted_collection_id: collection {TRUSTED_ID} not found"
    assert tools.searches == []  # nothing was read from it
    assert FactChecker.references == {"trusted_collection_id": CollectionReference()}


@pytest.mark.parametrize("config", [{"max_claims": 0}, {"support_threshold": 0.3, "context_threshold": 0.5},
                                    {"strategy": "fuzzy"}, {"trusted": "x"}, {"trusted_collection_id": "trusted-ir"}])
def test_fact_checker_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        FactChecker(config)


# --- relevance_filter -----------------------------------------------------------------------------------------

LONG_TEXT = CORPUS["grid-integration-basics"].text


def test_relevance_filter_drops_low_quality_domain_old_and_short_documents_with_reasons():
    docs = [
        Document(id="blog", text=LONG_TEXT, score=0.9, metadata={"url": "https://medium.com/@someone/grid-tips-1a2b",
                                                                 "published": "2025-05-01"}),
        Document(id="sub", text=LONG_TEXT, score=0.8, metadata={"url": "https://Blog.HackerNoon.com./ai-grid"}),
        Document(id="lookalike", text=LONG_TEXT, score=0.8, metadata={"url": "https://notmedium.com/grid"}),
        Document(id="old", text=LONG_TEXT, score=0.85, metadata={"published": "2022-03-01"}),
        Document(id="short", text="Grid integration is hard.", score=0.95, metadata={"published": "2025-05-01"}),
        Document(id="fresh", text=LONG_TEXT, score=0.7, metadata={"url": "https://www.iea.org/reports/grid",
                                                                  "published": "2025-04-20T09:30:00Z"}),
        Document(id="undated", text=LONG_TEXT, score=0.6),
    ]
    agent = RelevanceFilter({"max_age_days": 365, "reference_date": "2025-06-30", "min_words": 20})
    out = run(agent, docs)
    assert [d.id for d in out.documents] == ["lookalike", "fresh", "undated"]
    assert out.metadata["filtered"] == [
        {"document_id": "blog", "reason": "low_quality_domain", "detail": "medium.com"},
        {"document_id": "sub", "reason": "low_quality_domain", "detail": "hackernoon.com"},
        {"document_id": "old", "reason": "too_old", "detail": "published 2022-03-01, 1217 days ago (max 365)"},
        {"document_id": "short", "reason": "too_short", "detail": "4 words (min 20)"},
    ]
    assert out.metadata["filtered_counts"] == {"low_quality_domain": 2, "too_old": 1, "too_short": 1}


def test_relevance_filter_min_score_undated_and_defaults():
    docs = [Document(id="high", text=LONG_TEXT, score=0.8), Document(id="low", text=LONG_TEXT, score=0.2,
                                                                      metadata={"url": "dev.to/post"})]
    out = run(RelevanceFilter({"min_score": 0.5, "max_age_days": 30, "keep_undated": False}), docs)
    assert out.documents == []
    assert out.metadata["filtered"] == [
        {"document_id": "high", "reason": "undated", "detail": "no usable metadata.published"},
        {"document_id": "low", "reason": "min_score", "detail": "score 0.2000 below 0.5"},
    ]
    # Defaults: the blocked-domain list applies (also to a URL without a scheme); no score or age rule.
    out = run(RelevanceFilter(), docs)
    assert [d.id for d in out.documents] == ["high"]
    assert out.metadata["filtered"][0]["reason"] == "low_quality_domain"


@pytest.mark.parametrize("config", [{"max_age_days": -1}, {"blocked_domains": ["https://medium.com/"]},
                                    {"min_words": -5}, {"reference_date": "yesterday"}, {"domains": []}])
def test_relevance_filter_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        RelevanceFilter(config)


# --- external_enricher ----------------------------------------------------------------------------------------

COMPANIES = {
    "nw": {"company": {"name": "Northwind Energy", "industry": "Utilities", "tags": ["wind", "solar"],
                       "size": {"employees": 1840}}},
    "helios": {"company": {"name": "Helios", "industry": "Solar", "tags": [], "size": {}}},
}


class CompanyServer:
    """A local JSON API: /companies/<id> (slow-* sleeps 1.5 s, stuck-* until the server closes, boom is a 500,
    deep-<n> a reply nested n objects deep, unknown ids are 404), /down/<id> always 500."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                server.requests.append(self.path)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                path = urlsplit(self.path).path
                kind, _, key = path.strip("/").partition("/")
                if kind == "down" or key == "boom":
                    return self._send(500, {"error": "internal"})
                if key.startswith("slow-"):
                    server._stop.wait(1.5)
                    key = key[len("slow-"):]
                if key.startswith("stuck-"):
                    server._stop.wait()
                    return
                if key == "garbage":
                    return self._send(200, b"<html>not json</html>")
                if key.startswith("deep-"):
                    depth = int(key[len("deep-"):])
                    return self._send(200, b'{"company": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}")
                if key not in COMPANIES:
                    return self._send(404, {"error": "unknown company"})
                return self._send(200, COMPANIES[key])

            def _send(self, status: int, payload) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def company_api():
    server = CompanyServer()
    yield server
    server.close()


MAPPING = {"industry": "$.company.industry", "first_tag": "$.company.tags[0]",
           "employees": "$.company.size.employees", "company": "$.company.name"}


COMPANY_PATH = "/companies/{metadata.company}?q={query}&doc={document_id}"


def endpoint(api: CompanyServer, path: str = COMPANY_PATH, name: str = "companies", allow_internal: bool = True,
             **options) -> RegisteredTool:
    """The endpoint as an operator registers it; the test server is on 127.0.0.1, so --allow-internal."""
    return RegisteredTool(name=name, kind="http", url=api.url + path, allow_internal=allow_internal, **options)


def enricher(name: str = "companies", **config) -> ExternalEnricher:
    return ExternalEnricher({"endpoint": name, "mapping": MAPPING, **config})


def tools_for(*endpoints: RegisteredTool, **extra) -> AgentContext:
    return ctx_with(RegisteredToolbox(endpoints, **extra))


def company_doc(doc_id: str, company: str | None) -> Document:
    metadata = {"company": company} if company else {}
    return Document(id=doc_id, title=doc_id, text="A company profile.", metadata=metadata)


def test_json_paths():
    data = {"a": {"b c": [{"d": 1}, {"d": 2}]}, "list": [10, 20, 30]}
    assert resolve_path(data, parse_path("$.a['b c'][1].d")) == 2
    assert resolve_path(data, parse_path('$.list[-1]')) == 30
    assert resolve_path(data, parse_path("$")) == data
    assert repr(resolve_path(data, parse_path("$.list[3]"))) == "MISSING"
    assert repr(resolve_path(data, parse_path("$.a.x"))) == "MISSING"
    for bad in ("a.b", "$.a..b", "$[x]"):
        with pytest.raises(ValueError):
            parse_path(bad)


def test_external_enricher_maps_reply_paths_into_metadata(company_api):
    docs = [company_doc("d1", "nw"), company_doc("d2", "helios")]
    ctx = tools_for(endpoint(company_api, headers={"X-Api-Key": "k-123"}))
    out = run(enricher(), docs, "wind & solar/2025?", ctx)
    assert ctx.tools.lookups == [("http", "companies")]
    d1, d2 = out.documents
    assert {k: d1.metadata[k] for k in MAPPING} == {"industry": "Utilities", "first_tag": "wind", "employees": 1840,
                                                    "company": "Northwind Energy"}
    assert "enrichment_error" not in d1.metadata and "enrichment_missing" not in d1.metadata
    # A path the reply lacks leaves the key out and is listed; the mapped rest is there (the "company" key replaced).
    assert d2.metadata["industry"] == "Solar" and "first_tag" not in d2.metadata and "employees" not in d2.metadata
    assert d2.metadata["enrichment_missing"] == ["$.company.tags[0]", "$.company.size.employees"]
    # Placeholders are URL-encoded: the query cannot add parameters or path segments.
    path, _, query = company_api.requests[0].partition("?")
    assert path == "/companies/nw"
    assert parse_qs(query) == {"q": ["wind & solar/2025?"], "doc": ["d1"]}
    assert "wind%20%26%20solar%2F2025%3F" in query
    assert company_api.headers[0]["x-api-key"] == "k-123"  # the registered header
    # The summary names the registered endpoint, not its URL (the operator's).
    assert out.metadata["enrichment"] == {
        "enriched": 2, "failed": 0, "not_attempted": 0, "requests": 2, "endpoint": "companies", "breaker": "closed",
        "breaker_scope": "process"}


@pytest.mark.parametrize(
    ("doc_id", "segment"),
    [("..", "%2E%2E"), (".", "%2E"), ("v1.2", "v1%2E2"), ("a/b?c#d%2F", "a%2Fb%3Fc%23d%252F")],
)
def test_external_enricher_keeps_a_value_inside_its_own_path_segment(company_api, doc_id, segment):
    """A dot segment is resolved by the client before it sends: with the id '..' the enricher asked for
    /details, outside the operator's /companies/."""
    ctx = tools_for(endpoint(company_api, path="/companies/{document_id}/details"))
    run(enricher(), [company_doc(doc_id, None)], "q", ctx)
    assert company_api.requests == [f"/companies/{segment}/details"]  # the path as it arrived, undecoded


def test_external_enricher_refuses_a_reply_nested_past_the_limit_per_document(company_api):
    """What is mapped from a reply joins the document's metadata; nested thousands deep, the parse raised
    RecursionError out of the agent, and a hundred deep it went into metadata that later steps walk recursively."""
    docs = [company_doc("d1", "deep-100"), company_doc("d2", "deep-3000"), company_doc("d3", "nw")]
    out = run(enricher(mapping={"profile": "$.company"}), docs, "q", tools_for(endpoint(company_api)))
    too_deep, far_too_deep, fine = out.documents
    for doc in (too_deep, far_too_deep):
        assert doc.metadata["enrichment_error"] == "reply nests deeper than 64 levels of arrays and objects"
        assert "profile" not in doc.metadata
    assert fine.metadata["profile"] == COMPANIES["nw"]["company"] and "enrichment_error" not in fine.metadata
    assert out.metadata["enrichment"]["failed"] == 2 and out.metadata["enrichment"]["enriched"] == 1


def test_external_enricher_an_internal_endpoint_is_refused_at_connect_without_the_operators_allowance(company_api):
    docs = [company_doc("d1", "nw"), company_doc("d2", "helios")]
    out = run(enricher(), docs, "q", tools_for(endpoint(company_api, allow_internal=False)))
    for doc in out.documents:
        assert doc.metadata["enrichment_error"].startswith("egress refused: 127.0.0.1 is a loopback address")
        assert "industry" not in doc.metadata
    assert company_api.requests == []  # no request reached the endpoint
    assert out.metadata["enrichment"] | {"breaker": None} == {
        "enriched": 0, "failed": 0, "not_attempted": 2, "requests": 0, "endpoint": "companies", "breaker": None,
        "breaker_scope": "process"}
    # The operator's allowlist (AGENTSEARCH_EGRESS_ALLOW) opens it as --allow-internal does; the refusals above did
    # not count against the endpoint's breaker.
    allowed = tools_for(endpoint(company_api, allow_internal=False), egress_policy=EgressPolicy.parse(["127.0.0.0/8"]))
    out = run(enricher(), docs, "q", allowed)
    assert [d.metadata.get("industry") for d in out.documents] == ["Utilities", "Solar"]
    assert out.metadata["enrichment"]["breaker"] == "closed"


def test_external_enricher_an_unregistered_or_removed_endpoint_is_the_agents_error(company_api):
    with pytest.raises(UnresolvedReference, match="endpoint: no http tool named 'companies' is registered; "
                                                  "operators register tools"):
        run(enricher(), [company_doc("d1", "nw")], "q", tools_for())
    assert company_api.requests == []


def test_external_enricher_times_out_a_slow_document_and_enriches_the_others(company_api):
    docs = [company_doc("slow", "stuck-nw"), company_doc("fast", "nw")]
    started = time.monotonic()
    out = run(enricher(timeout_s=0.3), docs, "q", tools_for(endpoint(company_api)))
    assert time.monotonic() - started < 10  # the reply that never comes was not waited for
    slow, fast = out.documents
    assert slow.metadata["enrichment_error"].startswith("timeout after 0.3 s")
    assert "industry" not in slow.metadata
    assert fast.metadata["industry"] == "Utilities"
    assert out.metadata["enrichment"]["failed"] == 1 and out.metadata["enrichment"]["enriched"] == 1


def test_external_enricher_records_500_404_non_json_and_missing_placeholders_per_document(company_api):
    docs = [company_doc("a", "boom"), company_doc("b", "nobody"), company_doc("c", "garbage"),
            company_doc("d", None), company_doc("e", "nw")]
    out = run(enricher(), docs, "q", tools_for(endpoint(company_api)))
    errors = [d.metadata.get("enrichment_error") for d in out.documents]
    assert errors[0] == "HTTP 500"
    assert errors[1] == "HTTP 404"
    assert errors[2].startswith("reply is not JSON")
    assert errors[3] == "document has no metadata.company for the URL"
    assert errors[4] is None and out.documents[4].metadata["industry"] == "Utilities"
    assert len(company_api.requests) == 4  # no request for the document that could not fill the URL
    assert out.metadata["enrichment"]["failed"] == 4 and out.metadata["enrichment"]["enriched"] == 1


def test_external_enricher_breaker_opens_after_fail_max_failures_and_stops_calling(company_api):
    agent = enricher("down", fail_max=3, reset_timeout_s=60)
    ctx = tools_for(endpoint(company_api, "/down/{document_id}", "down"), endpoint(company_api))
    docs = [company_doc(f"d{i}", "nw") for i in range(6)]
    out = run(agent, docs, "q", ctx)
    assert len(company_api.requests) == 3  # the endpoint saw fail_max requests, then none
    errors = [d.metadata["enrichment_error"] for d in out.documents]
    assert errors[:3] == ["HTTP 500"] * 3
    assert all(e.startswith("circuit open for") for e in errors[3:])
    assert out.metadata["enrichment"] == {
        "enriched": 0, "failed": 3, "not_attempted": 3, "requests": 3, "endpoint": "down", "breaker": "open",
        "breaker_scope": "process"}
    # A second run (another agent instance, same endpoint and limits) still finds the circuit open.
    again = run(ExternalEnricher(agent.config), docs[:2], "q", ctx)
    assert len(company_api.requests) == 3
    assert all(d.metadata["enrichment_error"].startswith("circuit open") for d in again.documents)
    # The other endpoint of the same server has its own breaker.
    assert run(enricher(), [company_doc("x", "nw")], "q", ctx).documents[0].metadata["industry"] == "Utilities"


def test_external_enricher_uses_a_shared_breaker_when_the_toolbox_offers_one(company_api):
    made = []

    class ToolsWithBreaker(RegisteredToolbox):
        redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())

        def breaker(self, name, fail_max, reset_timeout_s):
            made.append((name, fail_max, reset_timeout_s))
            return AgentBreaker(name, self.redis, fail_max, reset_timeout_s)

    agent = enricher("down", fail_max=2)
    tools = ToolsWithBreaker([endpoint(company_api, "/down/{document_id}", "down")])
    out = run(agent, [company_doc(f"d{i}", "nw") for i in range(4)], ctx=ctx_with(tools))
    assert len(company_api.requests) == 2
    assert made and made[0][0].startswith("external_enricher:") and made[0][1:] == (2, 60.0)
    assert out.metadata["enrichment"]["breaker_scope"] == "shared" and out.metadata["enrichment"]["breaker"] == "open"


def test_external_enricher_one_users_failures_do_not_open_the_endpoint_for_another_user(company_api):
    # User A sets a timeout no reply can meet and a one-failure circuit held for an hour. The breakers live in one
    # Redis, as every worker's do (state by name, whatever limits a caller brings).
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    tools = RegisteredToolbox([endpoint(company_api, COMPANY_PATH.replace("{metadata.company}", "slow-nw"))],
                              breaker=lambda name, fail_max, reset_s: AgentBreaker(name, redis_client, fail_max,
                                                                                   reset_s))
    a = AgentContext(pipeline_stage=Stage.POST_SEARCH, user_id="user-a", tools=tools)
    b = AgentContext(pipeline_stage=Stage.POST_SEARCH, user_id="user-b", tools=tools)
    hostile = enricher(timeout_s=0.05, fail_max=1, reset_timeout_s=3600)
    out = run(hostile, [company_doc("d1", "nw"), company_doc("d2", "nw")], "q", a)
    assert out.metadata["enrichment"]["breaker"] == "open"
    assert out.documents[1].metadata["enrichment_error"].startswith("circuit open")
    # User B's enricher on the same endpoint still calls it.
    out = run(enricher(timeout_s=3.0), [company_doc("d3", "nw")], "q", b)
    assert out.documents[0].metadata["industry"] == "Utilities"
    assert out.metadata["enrichment"]["breaker"] == "closed" and out.metadata["enrichment"]["breaker_scope"] == "shared"


def test_external_enricher_max_documents_and_skip_without_an_endpoint(company_api):
    out = run(enricher(max_documents=2), [company_doc(f"d{i}", "nw") for i in range(3)], "q",
              tools_for(endpoint(company_api)))
    assert [("industry" in d.metadata) for d in out.documents] == [True, True, False]
    assert len(company_api.requests) == 2
    with pytest.raises(AgentSkipped, match="endpoint"):
        run(ExternalEnricher(), [company_doc("d", "nw")])


@pytest.mark.parametrize("config", [
    {"endpoint": "crm", "mapping": {"x": "company.name"}},                  # not a JSON path
    {"endpoint": "crm"},                                                     # nothing mapped
    {"endpoint": "crm", "mapping": MAPPING, "timeout_s": 30, "total_timeout_s": 10},
    {"endpoint": "crm", "mapping": MAPPING, "method": "POST"},
    {"endpoint": "", "mapping": MAPPING},
])
def test_external_enricher_refuses_bad_config(config):
    with pytest.raises(ValidationError):
        ExternalEnricher(config)


@pytest.mark.parametrize(("field", "value"), [
    ("url_template", "http://127.0.0.1:6379/{document_id}"),
    ("url_template", "http://169.254.169.254/latest/meta-data/{document_id}"),
    ("headers", {"Authorization": "Bearer x"}),
    ("url_template", None),
])
def test_external_enricher_refuses_a_raw_url_or_headers_naming_the_field(field, value):
    with pytest.raises(ValidationError) as caught:
        ExternalEnricher({"endpoint": "crm", "mapping": MAPPING, field: value})
    (error,) = caught.value.errors()
    assert error["loc"] == (field,) and "operators register tools (`agentsearch tools add`)" in error["msg"]


@pytest.mark.parametrize(("url", "message"), [
    ("http://{metadata.host}/x", "host"),                # the host is fixed
    ("ftp://example.org/{document_id}", "http"),
    ("http://example.org/{doc}", "unknown placeholder"),
])
def test_an_endpoint_with_a_bad_url_template_cannot_be_registered(url, message):
    with pytest.raises(ValidationError, match=message):
        RegisteredTool(name="crm", kind="http", url=url)


def test_every_post_search_agent_builds_with_its_defaults():
    for cls in (Reranker, FactChecker, PiiRedactor, ExternalEnricher, RelevanceFilter):
        agent = cls()
        assert agent.stage == Stage.POST_SEARCH and agent.default_timeout_s > 0 and agent.cache_ttl_s > 0
        assert "Usage::" in sys.modules[cls.__module__].__doc__
