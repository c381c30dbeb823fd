"""Long documents cut down to what bears on the query before an answer is written from them.

- ``extractive_compress``: the sentences that share the most stemmed terms with the query, with a bonus for those
  carrying names, numbers or dates, read in their original order, until ``max_chars``; a document with no sentence
  about the query keeps its lead.
- ``Compressor``: the LLM (told to keep proper nouns, dates, figures and key statements, which answers cite, and to
  drop navigation, boilerplate and unrelated content) when one is given, else extractive. An LLM reply that is
  empty, cut at its token limit (about ``max_chars / 2`` tokens), longer than the document, or holds a number the
  document does not (an invented figure) is replaced by the extractive version. A document longer than the model's
  context is sent from its beginning, as much as fits.
- ``compress_documents``: a batch two at a time by default (``concurrency``), which bounds the calls one job makes
  to the LLM endpoint at once; order kept; each document records how it was compressed in
  ``metadata["compressed"]``.

Usage::

    compressor = Compressor(KeywordAnalyzer(), max_chars=600, min_chars=1200, llm=None)
    documents, records = compress_documents("solar output 2025", documents, compressor, concurrency=2)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from agentsearch.pipeline.agentic.signals import coverage, has_specifics, numbers_in
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.llm import LLMClient, LLMError
from agentsearch.pipeline.platform.prompt_budget import fit
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import split_sentences

SPECIFICS_BONUS = 0.25
MIN_REPLY_TOKENS = 128

_SYSTEM = (
    "Compress the document to the content relevant to the query. Preserve exactly: proper nouns, dates, technical "
    "specifications, numbers and key statements. Remove navigation, advertising, boilerplate and anything "
    "unrelated to the query. Use short Markdown list items grouped by theme, no tables. Do not add anything the "
    "document does not say. Reply with the compressed text only."
)


class CompressionRecord(BaseModel):
    document_id: str
    method: str  # llm | extractive | unchanged
    from_chars: int
    to_chars: int
    error: str | None = None


def extractive_compress(analyzer: KeywordAnalyzer, query: str, text: str, max_chars: int) -> str:
    sentences = split_sentences(text)
    if not sentences:
        return text[:max_chars]
    scored = []
    for i, sentence in enumerate(sentences):
        overlap = coverage(analyzer, query, sentence)
        if overlap > 0:
            scored.append((overlap + (SPECIFICS_BONUS if has_specifics(sentence) else 0.0), i))
    if not scored:
        scored = [(0.0, i) for i in range(len(sentences))]  # nothing about the query: the lead stands in
        scored.sort(key=lambda s: s[1])
    else:
        scored.sort(key=lambda s: (-s[0], s[1]))
    chosen: list[int] = []
    used = 0
    for _, i in scored:
        length = len(sentences[i]) + (1 if chosen else 0)
        if chosen and used + length > max_chars:
            continue
        chosen.append(i)
        used += length
    return " ".join(sentences[i] for i in sorted(chosen))


class Compressor:
    def __init__(self, analyzer: KeywordAnalyzer, max_chars: int = 600, min_chars: int = 1200,
                 llm: LLMClient | None = None, timeout_s: float = 20.0) -> None:
        self.analyzer, self.max_chars, self.min_chars = analyzer, max_chars, min_chars
        self.llm, self.timeout_s = llm, timeout_s

    def compress(self, query: str, doc: Document) -> tuple[Document, CompressionRecord]:
        size = len(doc.text)
        if size < self.min_chars:
            return doc, CompressionRecord(document_id=doc.id, method="unchanged", from_chars=size, to_chars=size)
        text, method, error = None, "extractive", None
        if self.llm is not None:
            text, error = self._llm(query, doc)
            method = "llm" if text is not None else "extractive"
        if text is None:
            text = extractive_compress(self.analyzer, query, doc.text, self.max_chars)
        record = CompressionRecord(document_id=doc.id, method=method, from_chars=size, to_chars=len(text), error=error)
        compressed = doc.model_copy(update={"text": text, "metadata": {
            **doc.metadata, "compressed": record.model_dump(exclude={"document_id"})}})
        return compressed, record

    def _llm(self, query: str, doc: Document) -> tuple[str | None, str | None]:
        llm = self.llm
        assert llm is not None  # asked only of a compressor given an LLM
        reply_tokens = max(MIN_REPLY_TOKENS, self.max_chars // 2)
        head = f"Query: {query}\n\nDocument: {doc.title}\n"
        system = {"role": "system", "content": _SYSTEM}
        # A document longer than the model's context is compressed from its beginning, as much as fits.
        fitted = fit(llm, [system, {"role": "user", "content": head}], [doc.text], reply_tokens)
        if not fitted:
            return None, "the document does not fit the model's context, extractive used"
        try:
            reply = llm.reply([system, {"role": "user", "content": head + fitted[0]}], timeout_s=self.timeout_s,
                                   max_tokens=reply_tokens)
        except LLMError as exc:
            return None, f"compression call failed, extractive used: {exc}"
        if reply.truncated:
            return None, f"compression reply cut at max_tokens ({reply_tokens}), extractive used"
        text = reply.text.strip()
        if not text or len(text) >= len(doc.text):
            return None, f"compression reply unusable ({len(text)} characters), extractive used"
        invented = numbers_in(text) - numbers_in(doc.text)
        if invented:
            return None, f"compression reply has figures the document lacks ({', '.join(sorted(invented)[:5])}), " \
                         "extractive used"
        return text, None


def compress_documents(query: str, documents: list[Document], compressor: Compressor,
                       concurrency: int = 2) -> tuple[list[Document], list[CompressionRecord]]:
    if not documents:
        return [], []
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="compress") as pool:
        results = list(pool.map(lambda d: compressor.compress(query, d), documents))
    return [d for d, _ in results], [r for _, r in results]
