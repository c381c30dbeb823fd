"""The offline answer: the sentences of the retrieved documents that best answer the query, each cited.

A sentence's score adds four signals (``WEIGHTS_EMBED`` / ``WEIGHTS_LEXICAL``):

- **lexical**: the share of the query's terms it holds, each weighted by its rarity among the candidate sentences
  (BM25's inverse document frequency, in Lucene's form that stays positive: a word most sentences hold, such as a
  function word of a language with no stop-word list, counts for little). Terms are the keyword search's own: each
  document is analysed as the language ingestion detected for it (``metadata.language``) and the query as its own
  language and the documents' languages of its script (``KeywordAnalyzer.query_terms``). A query term of four
  letters or more is also held by a longer term that contains it: inflection a stemmer leaves ("منطق" in
  "منطقتان"; "tasks" in "subtasks" is the price) and affixes of languages with no stemmer at all.
- **semantic**: the embedding cosine of query and sentence, only where the embedding model learnt the query's
  language (``agentsearch.pipeline.retrieval.language.embedding_learnt``): MiniLM's cosines of Arabic or German
  sentences are noise that outweighed the words (docs/evaluation.md, "Answers in every language").
- **kind**: whether it holds the kind of thing the question asks for (``question_kind``).
- **retrieval**: its document's search score, relative to the first document's.

Titles are no candidates: a heading, a slide title, a list number or a table's header line
(``agentsearch.pipeline.text.titles``) stays the part's title (its ``location``), never a sentence of the answer,
and a list number opening a sentence is not quoted.

**How long** (``choose_sentences``): the best sentence always; each next of the best ``max_sentences`` joins only
when it adds something the question asks for:

- it holds at least one of the question's terms (a sentence holding none is there on its meaning or its
  document's rank alone, and says nothing the question named), or it is the sentence right after the first in the
  same paragraph (not the next bullet, row or paragraph), which goes on about what the first named ("Most Western
  countries have now banned it" after the sentence on corporal punishment: the line after the one that matches,
  which no lexical signal finds);
- and, from another document than the first sentence's, it holds a question term no sentence chosen before it
  holds, or scores at least ``STRONG`` of the first sentence's score (a second answer as good as the first): a
  sentence of a slide on revenue sharing only "euros" with a question the first sentence already answers with
  "euros" in it adds nothing. The first sentence's own document is the one the search and the answer agree on, so
  its other sentences holding a question term join as before (the sentence after the one that names the game is
  the one that says who won it);
- and, when its document's search score is under ``FAR_BELOW`` of the first document's, it scores at least
  ``STRONG`` of the first sentence's (a sentence of a document the search put far below needs a strong reason).

The chosen are read in source order.

Usage::

    answer = extractive_answer("When did revenue grow?", documents, max_sentences=3, with_cot=True)
    answer.text      # "Q4 2025 revenue reached $412 million [1]. ..."
    scored, info = score_sentences("When did revenue grow?", documents, embed=embed, language="auto",
                                   embedding_model="all-MiniLM-L6-v2")
    scored[0].text, scored[0].score, info["scoring"]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agentsearch.pipeline.documents import CotStep, Document
from agentsearch.pipeline.job.answer.question_kind import capitals_say_little, holds_kind, question_kind
from agentsearch.pipeline.job.answer.result import DEFAULT_MAX_SENTENCES, NO_RESULTS, NO_TEXT, Answer, Embed, sources_of
from agentsearch.pipeline.retrieval.language import detect_language, embedding_learnt
from agentsearch.pipeline.text import STOPWORDS, whole_sentences, words
from agentsearch.pipeline.text.spans import sentence_spans
from agentsearch.pipeline.text.titles import is_title, without_list_marker


@lru_cache(maxsize=4)
def _analyzer(language: str):
    from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer

    try:
        return KeywordAnalyzer(language)
    except ValueError:
        return KeywordAnalyzer("english")


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# The answer's sentences are the text's whole sentences: each cited, each scored (and embedded) on its own.
answer_sentences = whole_sentences

# The weights of a sentence's score. Term coverage leads; meaning (when embeddings are available) next; the
# retrieval score of the sentence's document carries real weight, since the retriever saw the whole passage.
# Chosen on the XQuAD en/de/es questions at hand; changing them moves the gold-span rate by about a point.
WEIGHTS_EMBED = {"lexical": 0.42, "semantic": 0.28, "kind": 0.12, "retrieval": 0.18}
WEIGHTS_LEXICAL = {"lexical": 0.65, "semantic": 0.0, "kind": 0.13, "retrieval": 0.22}
# A query term this long or longer is also held by a longer term containing it; shorter ones would meet pieces of
# unrelated words.
MIN_CONTAINED = 4
# A document the search scored under this share of the first's is far below it; a sentence of it joins the answer
# only with a score of at least ``STRONG`` of the first sentence's (not fitted: half and four fifths, stated).
FAR_BELOW = 0.5
STRONG = 0.8


@dataclass
class ScoredSentence:
    """One candidate sentence of the answer, with its score and the signals that made it."""

    doc_index: int
    sent_index: int
    text: str
    score: float = 0.0
    lexical: float = 0.0
    semantic: float | None = None
    kind: bool = False
    retrieval: float = 0.0
    terms: frozenset[str] = frozenset()  # the question's terms it holds
    opens_paragraph: bool = False  # a line break before it in its document: a new paragraph, bullet or row


def _language_of(document: Document, analyzer) -> str:
    """The language a document is analysed as: the one ingestion detected for it, detected now if it has none."""
    if not analyzer.automatic:
        return analyzer.code
    stored = document.metadata.get("language")
    return stored if isinstance(stored, str) and stored else analyzer.language_of(document.text)


def _holds(term: str, terms: set[str]) -> bool:
    return term in terms or (len(term) >= MIN_CONTAINED and any(term in t for t in terms if len(t) > len(term)))


def score_sentences(query: str, documents: list[Document], embed: Embed | None = None, language: str = "english",
                    embedding_model: str | None = None) -> tuple[list[ScoredSentence], dict[str, Any]]:
    """Every sentence of ``documents`` (a sentence in two documents once, from the better), best first, and
    ``info``: how they were scored (``scoring``, ``semantic_skipped`` or ``embedding_error``, ``question_kind``).

    ``language`` is the keyword analysis setting (``auto`` or a fixed language); ``embedding_model`` names the
    model behind ``embed``, whose cosines are left out for a query in a language it did not learn (None: a model
    taken to know every language)."""
    analyzer = _analyzer(language)
    languages = [_language_of(doc, analyzer) for doc in documents]
    terms, read_as = analyzer.query_terms(query, languages)
    query_terms = set(terms)
    query_words = set(words(query))
    kind = question_kind(query)
    german = capitals_say_little(query)
    info: dict[str, Any] = {"scoring": "lexical", "question_kind": kind}

    candidates: list[ScoredSentence] = []
    held: list[set[str]] = []
    seen: set[str] = set()
    for doc_index, doc in enumerate(documents):
        spans = sentence_spans(doc.text)
        for sent_index, (start, _, sentence) in enumerate(spans):
            key = " ".join(words(sentence))
            # The same sentence in two documents is cited once, from the better one; a title is no sentence.
            if not key or key in seen or is_title(sentence):
                continue
            seen.add(key)
            sentence_terms = set(analyzer.terms_as(languages[doc_index], sentence))
            opens = sent_index > 0 and "\n" in doc.text[spans[sent_index - 1].end:start]
            candidates.append(ScoredSentence(doc_index, sent_index, sentence, opens_paragraph=opens))
            held.append({t for t in query_terms if _holds(t, sentence_terms)})
    if not candidates:
        return [], info

    # Rarer query terms say more about where the answer is.
    n = len(candidates)
    weight = {}
    for term in query_terms:
        df = sum(term in h for h in held)
        weight[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    total_weight = sum(weight.values()) or 1.0

    semantic: list[float] | None = None
    # The language the query is read as (its automatic analysis's first): a short English question misread as
    # Dutch is read as its documents' English.
    query_language = read_as[0] if analyzer.automatic else detect_language(query).code
    if embed is not None and not embedding_learnt(embedding_model, query_language):
        info["semantic_skipped"] = f"the embedding model {embedding_model} was not trained on {query_language}"
    elif embed is not None:
        try:
            vectors = embed([query] + [c.text for c in candidates])
            semantic = [max(0.0, _cosine(vectors[0], v)) for v in vectors[1:]]
            info["scoring"] = "embedding+lexical"
        except Exception as exc:  # noqa: BLE001 - the lexical score still works; say why it was used
            info["embedding_error"] = f"{type(exc).__name__}: {exc}"
    weights = WEIGHTS_EMBED if semantic is not None else WEIGHTS_LEXICAL
    top_score = max((d.score for d in documents), default=0.0)

    for i, cand in enumerate(candidates):
        cand.terms = frozenset(held[i])
        cand.lexical = sum(weight[t] for t in held[i]) / total_weight
        cand.semantic = semantic[i] if semantic is not None else None
        cand.kind = cand.lexical > 0 and holds_kind(cand.text, kind, query_words, german)
        cand.retrieval = documents[cand.doc_index].score / top_score if top_score > 0 else 0.0
        cand.score = (weights["lexical"] * cand.lexical + weights["semantic"] * (cand.semantic or 0.0)
                      + weights["kind"] * cand.kind + weights["retrieval"] * cand.retrieval)
    return sorted(candidates, key=lambda c: (-c.score, c.doc_index, c.sent_index)), info


def extractive_answer(query: str, documents: list[Document], max_sentences: int = DEFAULT_MAX_SENTENCES,
                      with_cot: bool = False, embed: Embed | None = None, language: str = "english",
                      embedding_model: str | None = None) -> Answer:
    sources = sources_of(documents)
    steps: list[CotStep] = []
    if not documents:
        if with_cot:
            steps.append(CotStep(step=1, thought="The search returned no documents, so there is nothing to cite."))
        return Answer(NO_RESULTS, sources, steps, info={"scoring": "none"})

    scored, info = score_sentences(query, documents, embed=embed, language=language, embedding_model=embedding_model)
    kind = info["question_kind"]
    # Read in document rank order, then sentence order, so the answer flows like the sources.
    chosen = sorted(choose_sentences(scored, max_sentences), key=lambda c: (c.doc_index, c.sent_index))
    parts = [cite(without_list_marker(c.text), c.doc_index + 1) for c in chosen] or [NO_TEXT]
    if with_cot:
        query_words = set(words(query))
        shown = sorted({w for w in query_words if (w not in STOPWORDS and len(w) > 2) or any(ch.isdigit() for ch in w)})
        steps = [
            CotStep(
                step=1,
                thought=f"Retrieved {len(documents)} documents; looked for sentences that cover the query terms "
                f"{', '.join(shown) or '(none)'}"
                + (f" and hold the kind of answer asked for ({kind})" if kind else "") + ".",
            ),
            CotStep(
                step=2,
                thought=f"Chose the {len(chosen)} best-scoring sentences ({info['scoring']} scoring) that add "
                f"something the question asks, and kept them in source order.",
                evidence=[documents[c.doc_index].id for c in chosen],
            ),
        ]
    return Answer(" ".join(parts), sources, steps, info=info)


def choose_sentences(scored: list[ScoredSentence], max_sentences: int) -> list[ScoredSentence]:
    """The sentences of the answer among ``scored`` (best first): the first, and each next of the best
    ``max_sentences`` that holds a question term (or follows the first in its paragraph); from another document,
    adds one the chosen do not hold or scores at least ``STRONG`` of the first's; and, from a document far below the
    first, scores so (the module's rule)."""
    if not scored:
        return []
    first = scored[0]
    chosen = [first]
    held = set(first.terms)
    for candidate in scored[1:max_sentences]:
        strong = candidate.score >= STRONG * first.score
        follows_first = (candidate.doc_index == first.doc_index and candidate.sent_index == first.sent_index + 1
                         and not candidate.opens_paragraph)
        if candidate.lexical <= 0 and not follows_first:
            continue  # none of the question's terms: it adds nothing the question asks
        if candidate.doc_index != first.doc_index and not strong and candidate.terms <= held:
            continue  # another document's sentence with only terms an earlier sentence already answers with
        if candidate.retrieval < FAR_BELOW and not strong:
            continue  # a document the search put far below, without a strong reason
        chosen.append(candidate)
        held |= candidate.terms
    return chosen


def cite(sentence: str, n: int) -> str:
    """``"Body."`` -> ``"Body [n]."``: the citation goes before the sentence's end mark, which is kept."""
    body = sentence.rstrip()
    end = body[-1] if body[-1] in ".!?" else "."
    body = body[:-1] if body[-1] in ".!?" else body
    return f"{body} [{n}]{end}"
