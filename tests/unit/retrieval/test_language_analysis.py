"""Language-aware keyword analysis: detection by script and model, per-language analysers, segmentation, the
fallback for languages without a stemmer, bad input (emoji, symbols, right-to-left, mixed scripts), the chunk's
language at ingest, and the translator's targets and the fused search queries."""

from __future__ import annotations

import subprocess
import sys
import unicodedata

import pytest

from agentsearch.pipeline.agents.base import AgentContext, AgentSkipped, PreSearchInput, Stage
from agentsearch.pipeline.agents.builtin.translator import Translator
from agentsearch.pipeline.ingestion.indexing import chunk_keywords, index_documents
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer, bm25_text, index_form
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.language import detect_language
from agentsearch.pipeline.retrieval.language_route import language_route
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.stored_chunks import Hit
from agentsearch.pipeline.retrieval.translations import Translations
from tests.support.fake_llm import FakeLLM

AUTO = KeywordAnalyzer("auto")


@pytest.mark.parametrize("text, code", [
    ("Wie viele Sacks erzielte Jared Allen in seiner Karriere?", "de"),
    ("How many sacks did Jared Allen have in his career?", "en"),
    ("Сколько мешков было у Джареда Аллена за карьеру?", "ru"),
    ("كم عدد الإقالات التي حققها جاريد آلن في مسيرته؟", "ar"),
    ("जेरेड एलन ने अपने करियर में कितने सैक किए?", "hi"),
    ("杰瑞德·艾伦在职业生涯中有多少次擒杀？", "zh"),
    ("東京都に住んでいます。", "ja"),
    ("ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำ", "th"),
    ("한국어 문장을 분석합니다", "ko"),
    ("ＷＩＮＤ　ｔｕｒｂｉｎｅｓ need maintenance", "en"),  # full-width letters are Latin letters
])
def test_the_language_is_read_from_the_script_and_the_text(text, code):
    assert detect_language(text).code == code


@pytest.mark.parametrize("text", ["🙂🎉🚀", "✓ ★ → ⊕", "2025 — 42 %", "   "])
def test_text_without_letters_is_undetermined_and_keeps_its_digits_only(text):
    assert detect_language(text).code == "und"
    terms = AUTO.terms(text)
    assert all(t.isdigit() for t in terms)


def test_english_is_analysed_as_before():
    fixed = KeywordAnalyzer("english")
    text = "Wind turbines need maintenance; the blades were inspected in 2025."
    assert fixed.analyze(text) == AUTO.analyze(text) == "wind turbin need mainten blade inspect 2025"


def test_snowball_languages_stem_their_own_words():
    code, analysed = AUTO.analyze_detected("Die Windturbinen brauchen regelmäßige Wartungen")
    assert code == "de" and analysed.split() == AUTO.terms_as("de", "die Windturbine brauchen regelmäßig Wartung")
    assert KeywordAnalyzer("de").analyze("Wartungen") == KeywordAnalyzer("german").analyze("Wartung")


def test_hindi_words_keep_their_vowel_signs():
    # A plain \w+ cuts Devanagari at every vowel sign: "नमस्ते" became "नमस", "त".
    terms = AUTO.terms("नमस्ते दुनिया, भारत की राजधानी दिल्ली है")
    assert len(terms) == 7
    for term in terms:
        assert not unicodedata.combining(term[0]) and unicodedata.category(term[0]).startswith("L")
        assert term == unicodedata.normalize("NFC", term)


def test_japanese_without_a_dictionary_is_read_in_character_pairs(monkeypatch):
    """An image built without unidic-lite: Japanese text and questions both become bigrams, and still meet."""
    from agentsearch.pipeline.retrieval import analyzer

    monkeypatch.setattr(analyzer, "japanese_dictionary", lambda: False)
    terms = AUTO.terms("東京都に住んでいます")
    assert "東京" in terms and "京都" in terms and "住む" not in terms
    assert all(len(t) == 2 for t in terms)
    assert set(AUTO.terms("東京に住む")) & set(terms)


def test_chinese_japanese_and_thai_are_segmented_into_words():
    assert {"超级", "足球", "比赛"} <= set(AUTO.terms("超级碗50是一场美式足球比赛"))
    assert {"東京", "住む"} <= set(AUTO.terms("東京都に住んでいます"))
    assert {"ภาษาไทย", "ภาษา"} <= set(AUTO.terms("ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำ"))
    # The question and the passage meet on the same words.
    question = set(AUTO.terms("哪支球队赢得了超级碗？"))
    passage = set(AUTO.terms("丹佛野马队赢得了第50届超级碗。"))
    assert {"超级", "赢得"} <= question & passage


def test_right_to_left_text_is_analysed_with_or_without_vowel_points():
    pointed = AUTO.terms("مَرْحَبًا بِالعَالَم")
    plain = AUTO.terms("مرحبا بالعالم")
    assert pointed == plain and len(plain) == 2
    assert AUTO.terms("שָׁלוֹם עוֹלָם") == AUTO.terms("שלום עולם") == ["שלום", "עולם"]  # Hebrew: no stemmer


@pytest.mark.parametrize("text", [
    "ሰላም ለዓለም ምን አዲስ ነገር አለ",        # Amharic: no stemmer, no segmenter
    "გამარჯობა მსოფლიო",                   # Georgian
    "Xin chào thế giới, hôm nay trời đẹp",  # Vietnamese: Latin letters, no stemmer
    "안녕하세요 세계",                        # Korean: Hangul bigrams
])
def test_a_language_without_an_analyser_still_gives_whole_readable_terms(text):
    terms = AUTO.terms(text)
    assert terms and all(t.strip() and t == unicodedata.normalize("NFC", t) for t in terms)
    assert all(any(c.isalpha() for c in t) for t in terms)
    assert AUTO.terms(text) == AUTO.terms(f"  {text}!!")  # punctuation is not a term


def test_mixed_scripts_in_one_query_meet_each_scripts_terms():
    mixed = AUTO.terms("Tesla Model 3 的价格是多少")
    assert {"tesla", "model", "3", "价格"} <= set(mixed)
    assert set(AUTO.terms("特斯拉的价格")) & set(mixed) == {"的", "价格"}
    russian = AUTO.terms("Как зовут Jared Allen?")
    assert "allen" in russian and AUTO.terms_as("ru", "зовут")[0] in russian


def test_a_text_of_stop_words_only_is_not_empty():
    assert AUTO.terms("to be or not to be") == ["to", "be", "or", "not", "to", "be"]


def test_the_query_is_read_as_the_collections_languages_of_its_script():
    terms, used = AUTO.query_terms("Wer führte die Panthers an?", ["en", "de", "zh"])
    assert used == ["de", "en"] and "panth" in terms and "panther" in terms
    # A short English query misread as another language is read as the collection's language.
    assert AUTO.query_terms("Jared Allen sacks", ["en"])[1] == ["en"]
    assert AUTO.query_terms("超级碗", ["en", "de", "zh"])[1] == ["zh"]
    # A fixed analyser reads everything as its one language.
    assert KeywordAnalyzer("english").query_terms("Wer führte?", ["de"])[1] == ["en"]


def test_unknown_languages_are_refused_by_name():
    with pytest.raises(ValueError, match="klingon"):
        KeywordAnalyzer("klingon")


def test_segmenters_and_the_language_model_load_only_when_a_text_needs_them():
    code = (
        "import sys\n"
        "from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer\n"
        "a = KeywordAnalyzer('auto')\n"
        "a.terms('नमस्ते दुनिया'); a.terms('Привет')\n"
        "heavy = ('jieba', 'pythainlp', 'fugashi')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "a.terms('超级碗')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "['jieba']"]


# --- ingest ------------------------------------------------------------------------------------------------------

def test_each_chunk_of_a_mixed_document_gets_its_own_language():
    english = "Wind turbines convert the kinetic energy of wind into electricity. " * 8
    german = "Windkraftanlagen wandeln die Bewegungsenergie des Windes in elektrischen Strom um. " * 20
    chinese = "风力发电机把风的动能转换成电能。" * 30
    chunks = index_documents([("mixed", "Wind", f"{english}{german}{chinese}", {"source": "x"})],
                             lambda texts: [[1.0, 0.0] for _ in texts], AUTO)
    languages = [c.metadata["language"] for c in chunks]
    assert languages[0] == "en" and "de" in languages and languages[-1] == "zh"
    assert all(c.metadata["source"] == "x" for c in chunks)
    assert all(c.keywords.strip() for c in chunks)


def test_a_documents_own_language_wins_and_emoji_only_text_is_undetermined():
    assert chunk_keywords(AUTO, "", "Die Turbinen", {"language": "German"})[0] == "de"
    german = "Die Turbinen werden jedes Jahr von den Technikern gewartet."
    assert chunk_keywords(AUTO, "", german, {"language": "xx-unknown"})[0] == "de"
    assert chunk_keywords(AUTO, "", "🙂🎉🚀", {}) == ("und", "")


# --- the route across languages ----------------------------------------------------------------------------------

class LanguageTools:
    def __init__(self, languages: dict[str, int], llm=None) -> None:
        self._languages, self.llm = languages, llm

    def collection_languages(self, collection_id: str) -> dict[str, int]:
        return self._languages


def run_translator(query: str, language: str, tools, config: dict | None = None):
    ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id="c1", tools=tools)
    return Translator(config or {}).run(PreSearchInput(query=query, collection_id="c1",
                                                       metadata={"language": language}), ctx)


TABLE = {"Wer gewann den Super Bowl 50?": {"en": "Who won Super Bowl 50?", "zh": "谁赢得了第50届超级碗？"}}


def test_the_translator_translates_into_the_collections_main_languages():
    with FakeLLM(default=FakeLLM.translation(TABLE)) as server:
        llm = LLMClient(base_url=server.base_url, model="fake")
        out = run_translator("Wer gewann den Super Bowl 50?", "de", LanguageTools({"en": 50, "de": 40, "zh": 30}, llm))
        assert out.query == "Who won Super Bowl 50?"
        assert out.metadata["translations"] == {"en": "Who won Super Bowl 50?", "zh": "谁赢得了第50届超级碗？"}
        assert out.metadata["original_query"] == "Wer gewann den Super Bowl 50?"
        assert len(server.requests) == 2  # German is one of the collection's: not translated into itself
        # A language below main_share of the chunks is not a target.
        few = run_translator("Wer gewann den Super Bowl 50?", "de", LanguageTools({"en": 95, "zh": 5}, llm))
        assert "translations" not in few.metadata and few.metadata["translated_to"] == "en"
    with pytest.raises(AgentSkipped, match="already in the target language 'de'"):
        run_translator("Wer gewann?", "de", LanguageTools({"de": 10}, llm=None))


def test_the_search_fuses_the_original_with_each_translation():
    state = JobState(job_id="j", collection_id="c", query="Who won Super Bowl 50? champion", original_query="q",
                     metadata={"original_query": "Wer gewann den Super Bowl 50?", "translated_from": "de",
                               "translated_to": "en", "translation_method": "llm",
                               "translations": {"en": "Who won Super Bowl 50?", "zh": "谁赢得了第50届超级碗？"}})
    translations = Translations.of_translator(state.metadata, state.query)
    # The current query (a later agent may have expanded it) stands for its language's translation.
    assert translations is not None and translations.original == "Wer gewann den Super Bowl 50?"
    assert translations.by_language == {"en": "Who won Super Bowl 50? champion", "zh": "谁赢得了第50届超级碗？"}
    plain = JobState(job_id="j", collection_id="c", query="solar", original_query="solar",
                     metadata={"original_query": "sollar"})  # the spell checker's, not a translation
    assert Translations.of_translator(plain.metadata, plain.query) is None


def test_without_a_translation_the_route_says_it_stayed_monolingual():
    route = language_route({"query": "de"}, {"en": 100}, None)
    assert route["route"] == "monolingual" and "no translation ran" in route["reason"]
    assert language_route({"query": "de"}, {"en": 100}, {"en": "..."})["route"] == "translated"
    assert language_route({"query": "en"}, {"en": 100, "de": 3}, None)["route"] == "same"


class RecordingStore:
    """Milvus stand-in: one English and one Chinese chunk; records which searches ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def languages(self, name):
        return {"en": 1, "zh": 1}

    def dense_search(self, name, vector, limit, **_):
        self.calls.append("dense")
        return [Hit(id="en#0", document_id="en", title="", text="Tea grows in Zhejiang.", score=0.9, metadata={})]

    def keyword_search(self, name, analyzed, limit, **_):
        self.calls.append(f"keyword:{analyzed}")
        return [Hit(id="zh#0", document_id="zh", title="", text="龙井茶产于浙江。", score=3.0, metadata={})]

    def vectors(self, name, ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        return {}


def test_a_query_in_a_script_the_embedding_model_cannot_read_is_ranked_by_keywords():
    store = RecordingStore()
    retriever = Retriever(lambda texts: [[1.0, 0.0] for _ in texts], store, KeywordAnalyzer("auto"))
    result = retriever.search("c", "龙井茶产于哪里", SearchConfig(top_k=2), model="all-MiniLM-L6-v2")
    assert [d.id for d in result.documents] == ["zh"] and "dense" not in store.calls
    assert "does not read han script" in result.metrics["semantic_skipped"]
    assert result.metrics["languages"]["analysed_as"] == ["zh"]
    # A Latin-script query, or a model not known to be Latin-only, keeps both retrievers.
    store.calls.clear()
    retriever.search("c", "Where does Longjing tea grow?", SearchConfig(top_k=2), model="all-MiniLM-L6-v2")
    assert "dense" in store.calls
    store.calls.clear()
    retriever.search("c", "龙井茶产于哪里", SearchConfig(top_k=2), model="some-multilingual-model")
    assert "dense" in store.calls


def test_terms_milvus_would_cut_are_stored_whole_as_a_stand_in():
    hindi = AUTO.terms_as("hi", "दुनिया")[0]
    stand_in = index_form(hindi)
    assert stand_in != hindi and stand_in.isascii() and stand_in.isalpha() and len(stand_in) == 18
    assert index_form(AUTO.terms_as("hi", "दुनिया")[0]) == stand_in  # the same at ingest and at query time
    assert index_form(AUTO.terms_as("hi", "भारत")[0]) != stand_in
    for kept in ("turbin", "москв", "价格", "عالم", "λόγος"):
        assert index_form(kept) == kept
    code, analysed = AUTO.analyze_detected("भारत की राजधानी दिल्ली है")
    assert code == "hi" and analysed == bm25_text(AUTO.terms_as("hi", "भारत की राजधानी दिल्ली है"))


def test_a_failed_language_read_is_not_kept_for_the_next_search():
    class FlakyStore(RecordingStore):
        def __init__(self) -> None:
            super().__init__()
            self.reads = 0

        def languages(self, name):
            self.reads += 1
            if self.reads == 1:
                raise ConnectionError("Milvus is restarting")
            return super().languages(name)

    store = FlakyStore()
    retriever = Retriever(lambda texts: [[1.0, 0.0] for _ in texts], store, KeywordAnalyzer("auto"))
    assert retriever.collection_languages("c") == {}
    assert retriever.collection_languages("c") == {"en": 1, "zh": 1}
    assert retriever.collection_languages("c") == {"en": 1, "zh": 1} and store.reads == 2  # then kept


def test_a_searchs_languages_are_of_the_chunks_its_filter_keeps():
    class FilteringStore(RecordingStore):
        def __init__(self) -> None:
            super().__init__()
            self.filters: list[str] = []

        def languages(self, name, filter_expr=""):
            self.filters.append(filter_expr)
            # A restricted document in Romanian: the filter of a searcher outside its group leaves it out.
            return {"en": 1} if filter_expr else {"en": 1, "ro": 1}

    store = FilteringStore()
    retriever = Retriever(lambda texts: [[1.0, 0.0] for _ in texts], store, KeywordAnalyzer("auto"))
    outside = 'not exists metadata["_access_groups"]'
    assert retriever.collection_languages("c", 1, outside) == {"en": 1}
    assert retriever.collection_languages("c", 1) == {"en": 1, "ro": 1}
    assert retriever.collection_languages("c", 1, outside) == {"en": 1} and store.filters == [outside, ""]  # kept
