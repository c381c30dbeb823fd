"""Several languages in one collection, on the real stack: English, German and Chinese documents answer questions
in their own language; text with no analyser, only emoji, right-to-left text and mixed scripts are indexed and
searchable or said plainly; each chunk's language is in its metadata and filterable. And the route across
languages: with an LLM (the local fake server) the translated queries are fused with the original; without one the
search says it stayed monolingual."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from agentsearch.pipeline.agents.base import AgentContext, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.translator import Translator
from agentsearch.pipeline.ingestion.indexing import index_documents
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.platform.tables.collections import milvus_collection_name
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.embedder import Embedder
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.translations import Translations
from agentsearch.pipeline.retrieval.vector_store import VectorStore
from tests.integration.conftest import search
from tests.support.fake_llm import FakeLLM

DOCUMENTS = [
    {"id": "en-turbines", "title": "Wind turbine maintenance",
     "text": "Wind turbines need their gearboxes inspected every six months. Technicians replace the lubricating oil "
             "and check the blades for cracks caused by lightning strikes."},
    {"id": "en-bees", "title": "Honey bee colonies",
     "text": "A honey bee colony has one queen, thousands of workers and a few hundred drones. Workers collect "
             "nectar and pollen and build the wax comb."},
    {"id": "de-bahn", "title": "Die Deutsche Bahn",
     "text": "Die Deutsche Bahn betreibt das größte Schienennetz Europas. Viele Züge hatten im Winter Verspätungen, "
             "weil Weichen einfroren und Oberleitungen rissen."},
    {"id": "de-brot", "title": "Brotkultur in Deutschland",
     "text": "In Deutschland gibt es mehr als dreitausend Brotsorten. Bäcker backen Roggenbrot, Vollkornbrot und "
             "Brezeln jeden Morgen frisch."},
    {"id": "zh-tea", "title": "中国茶文化",
     "text": "中国是茶的故乡。绿茶主要产于浙江和安徽，龙井茶是最有名的绿茶之一。人们用开水泡茶，并且讲究茶具。"},
    {"id": "zh-rail", "title": "中国高速铁路",
     "text": "中国高速铁路网是世界上最长的高铁网络。复兴号列车的最高运营速度达到每小时三百五十公里。"},
    # Bad input: a language with no analyser (Amharic), right-to-left (Arabic, pointed), only emoji, mixed scripts.
    {"id": "am-coffee", "title": "ቡና", "text": "ቡና በኢትዮጵያ ውስጥ ታዋቂ መጠጥ ነው። የቡና ሥነ ሥርዓት ለእንግዶች ይዘጋጃል።"},
    {"id": "ar-desert", "title": "الصحراء الكبرى",
     "text": "الصَّحْرَاءُ الكُبْرَى هي أكبر صحراء حارة في العالم وتمتد عبر شمال أفريقيا."},
    {"id": "emoji-only", "title": "🎉", "text": "🙂🎉🚀 ✓ ★ → ⊕"},
    {"id": "mixed-phone", "title": "Phone review",
     "text": "Das neue Smartphone 价格 ist hoch, aber die Kamera mit 5000 mAh Akku überzeugt."},
]


def ingest(http, collection_id: str) -> None:
    accepted = http.post(f"/v1/collections/{collection_id}/documents", json={"documents": DOCUMENTS})
    assert accepted.status_code == 202, accepted.text
    deadline = time.monotonic() + 120
    while (counts := http.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        assert time.monotonic() < deadline, counts
        time.sleep(0.2)
    assert counts == {"pending": 0, "indexed": len(DOCUMENTS), "failed": 0}


@pytest.fixture(scope="module")
def mixed(stack) -> str:
    with stack.http() as http:
        created = http.post("/v1/collections", json={"name": f"mixed-{uuid.uuid4().hex[:6]}"})
        assert created.status_code == 201, created.text
        ingest(http, created.json()["id"])
        return created.json()["id"]


def top(stack, collection_id: str, query: str, **extra) -> tuple[list[str], dict]:
    with stack.http() as http:
        job = search(http, collection_id, query, agents=[], use_cache=False, **extra)
    assert job["status"] == "succeeded", job["error"]
    return [s["document_id"] for s in job["response"]["sources"]], job["response"]["metadata"]["search"]


@pytest.mark.parametrize("query, expected, language", [
    ("How often are the gearboxes of wind turbines inspected?", "en-turbines", "en"),
    ("Warum hatten die Züge im Winter Verspätungen?", "de-bahn", "de"),
    ("龙井茶产于哪里？", "zh-tea", "zh"),
    ("复兴号列车的最高速度是多少？", "zh-rail", "zh"),
])
def test_a_question_in_each_language_finds_its_document(stack, mixed, query, expected, language):
    found, metrics = top(stack, mixed, query, search={"strategy": "keyword"})
    assert found[0] == expected, found
    # The default search too (its embedding model is English-only, so only the keyword side knows Chinese).
    found, metrics = top(stack, mixed, query)
    assert expected in found[:2], found
    assert metrics["languages"]["query"] == language
    assert set(metrics["languages"]["collection"]) >= {"en", "de", "zh"}
    assert metrics["language_route"]["route"] == "same"


def test_the_answer_weighs_an_english_only_models_cosines_for_english_questions_only(stack, mixed):
    with stack.http() as http:
        german = search(http, mixed, "Warum hatten die Züge im Winter Verspätungen?", agents=[], use_cache=False)
        english = search(http, mixed, "How often are the gearboxes of wind turbines inspected?", agents=[],
                         use_cache=False)
    assert german["status"] == english["status"] == "succeeded"
    answer = german["response"]["metadata"]["answer"]
    assert answer["scoring"] == "lexical", answer
    assert answer["semantic_skipped"] == "the embedding model all-MiniLM-L6-v2 was not trained on de"
    assert "weil Weichen einfroren" in german["response"]["answer"]
    assert english["response"]["metadata"]["answer"]["scoring"] == "embedding+lexical"
    assert "every six months" in english["response"]["answer"]


def test_each_chunk_carries_its_language_and_a_filter_reads_it(stack, mixed):
    found, _ = top(stack, mixed, "Brot Bahn Bäcker Züge", filter={"eq": {"key": "language", "value": "de"}})
    assert set(found) <= {"de-bahn", "de-brot", "mixed-phone"} and {"de-bahn", "de-brot"} <= set(found)
    # Read back from Milvus: every chunk's language, the emoji-only one undetermined (it is still indexed).
    store = VectorStore(stack.env["AGENTSEARCH_MILVUS_URI"])
    try:
        counts = store.languages(milvus_collection_name(mixed))
    finally:
        store.close()
    assert counts == {"de": 3, "en": 2, "zh": 2, "am": 1, "ar": 1, "und": 1}


def test_bad_input_is_indexed_and_searchable_or_said_plainly(stack, mixed):
    # No analyser for Amharic: its words are terms as they are.
    assert top(stack, mixed, "ቡና ሥነ ሥርዓት", search={"strategy": "keyword"})[0][0] == "am-coffee"
    # Right-to-left, asked without the vowel points the document has.
    assert top(stack, mixed, "أكبر صحراء في العالم", search={"strategy": "keyword"})[0][0] == "ar-desert"
    # Mixed scripts in one query meet each script's terms.
    assert top(stack, mixed, "Smartphone 价格 Akku", search={"strategy": "keyword"})[0][0] == "mixed-phone"
    # A query of emoji only: no keyword terms, said so; the search by meaning still answers.
    found, metrics = top(stack, mixed, "🙂🎉🚀")
    assert found and any("no words to match by keyword" in w for w in metrics["warnings"])
    assert metrics["languages"]["query"] == "und"


def test_without_an_llm_a_question_in_another_language_says_it_stayed_monolingual(stack, mixed):
    _found, metrics = top(stack, mixed, "Сколько скорость поезда Фусин?")
    route = metrics["language_route"]
    assert route["route"] == "monolingual" and route["query_language"] == "ru"
    assert "no translation ran" in route["reason"]


# --- the translated route, in process: Milvus Lite, the real embedder and analyser, the fake LLM over HTTP -------

TRANSLATIONS = {
    "Wie oft werden die Getriebe von Windturbinen geprüft?": {
        "en": "How often are the gearboxes of wind turbines inspected?",
        "zh": "风力涡轮机的齿轮箱多久检查一次？",
    },
}


def test_with_an_llm_the_translations_are_searched_and_fused_with_the_original(tmp_path):
    store = VectorStore(str(tmp_path / "milvus.db"))
    embedder, analyzer = Embedder("all-MiniLM-L6-v2"), KeywordAnalyzer("auto")
    # No German here: the German question must cross to the English and Chinese documents.
    docs = [d for d in DOCUMENTS if d["id"] in ("en-turbines", "en-bees", "zh-tea", "zh-rail")]
    store.ensure_collection("c_multi", embedder.dimension)
    store.upsert("c_multi", index_documents([(d["id"], d["title"], d["text"], {}) for d in docs], embedder.embed,
                                             analyzer))
    retriever = Retriever(embedder.embed, store, analyzer)

    class Tools:
        def __init__(self, llm) -> None:
            self.llm = llm

        def collection_languages(self, collection_id: str) -> dict[str, int]:
            return retriever.collection_languages("c_multi")

    question = "Wie oft werden die Getriebe von Windturbinen geprüft?"
    with FakeLLM(default=FakeLLM.translation(TRANSLATIONS)) as server:
        ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id="c1",
                           tools=Tools(LLMClient(base_url=server.base_url, model="fake")))
        out = Translator().run(PreSearchInput(query=question, metadata={"language": "de"}), ctx)
    assert out.metadata["translations"] == TRANSLATIONS[question]
    state = JobState(job_id="j", collection_id="c1", query=out.query, original_query=question,
                     metadata={"language": "de", **out.metadata})
    translations = Translations.of_translator(state.metadata, state.query)
    assert translations is not None
    # The model is named, as a job's search names it: what it reads decides which signals each query gets.
    fused = retriever.search("c_multi", translations.original, SearchConfig(top_k=3), model="all-MiniLM-L6-v2",
                             translations=translations)
    assert fused.documents[0].id == "en-turbines"
    assert fused.metrics["language_route"]["route"] == "translated"
    assert [q["language"] for q in fused.metrics["fused_queries"]] == [None, "en", "zh"]
    # The same question without the translations: the route says so.
    alone = retriever.search("c_multi", question, SearchConfig(top_k=3), model="all-MiniLM-L6-v2")
    assert alone.metrics["language_route"]["route"] == "monolingual"
    store.close()
    assert json.dumps(fused.metrics)  # the metrics go into the job's JSON response as they are
