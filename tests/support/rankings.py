"""What a search ranks, compared across an index rebuilt from the same documents (``agentsearch reindex``, a
restore).

BM25 alone is made again exactly, so a keyword search (``KEYWORD``) must give the same scores and the same documents
in the same order (``same_keyword_ranking``), but for documents of exactly equal scores, which the index returns in
the order it holds them.
The int8 model quantises a batch's activations together, so a text's vector depends a little on the texts embedded
beside it: a rebuild, like a second ingest, does not make the vectors bit for bit (measured on the sample corpus:
cosine >= 0.993, a query's score within 0.015). The default search agrees (``agrees``) where its scores were more
than ``NOISE`` apart.

Usage::

    before = ranked(http, collection_id, ["question"], search=KEYWORD)
    assert same_keyword_ranking(before[0], ranked(http, collection_id, ["question"], search=KEYWORD)[0])
    assert agrees(default_before[0], default_after[0])
"""

from __future__ import annotations

import httpx

from tests.integration.conftest import search

KEYWORD = {"strategy": "keyword", "sentence_weight": 0}
NOISE = 0.05
TIED = 1e-9


def ranked(http: httpx.Client, collection_id: str, questions: list[str], top_k: int = 8,
           **options) -> list[list[tuple[str, float]]]:
    """The documents each question's job cites with their scores, in order (no agents, no cache: the search)."""
    answers = []
    for question in questions:
        job = search(http, collection_id, question, agents=[], use_cache=False, top_k=top_k, **options)
        assert job["status"] == "succeeded", job
        answers.append([(source["document_id"], source["score"]) for source in job["response"]["sources"]])
    return answers


def ids(ranking: list[tuple[str, float]]) -> list[str]:
    return [document for document, _ in ranking]


def agrees(before: list[tuple[str, float]], after: list[tuple[str, float]], noise: float = NOISE) -> bool:
    """``after`` ranks the documents as ``before`` did, but for runs of documents whose scores before were within
    ``noise`` of the next one's (in any order among themselves); the last run is left out, as it may go on past
    the ones shown."""
    start = 0
    for end in range(1, len(before)):
        if before[end - 1][1] - before[end][1] >= noise:
            if set(ids(after[start:end])) != set(ids(before[start:end])):
                return False
            start = end
    return True


def same_keyword_ranking(before: list[tuple[str, float]], after: list[tuple[str, float]]) -> bool:
    """The same scores, and the same documents in the same order but for exact ties."""
    return [round(score, 9) for _, score in after] == [round(score, 9) for _, score in before] \
        and agrees(before, after, TIED)
