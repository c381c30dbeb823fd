"""The service's agent toolbox (``agentsearch.pipeline.agents.base.Toolbox``), handed to agents as ``ctx.tools``.

Agents stay free of clients and connections: they ask the toolbox. Everything here is per process and lazy.

The runner hands each agent the toolbox bound to the job's user (``for_user``): every method that reads a
collection (search, epoch, collection_texts, vocabulary, acronyms) refuses one that user does not own, with the
words used for a collection that does not exist; the texts, vocabulary, acronyms and languages it reads are of the
documents that user finds (its document groups). An unbound toolbox reads no collection at all. Registered tools
(``registered_tool``) and the operator's egress policy (``egress_policy``) are the same for every user. A job with
a metadata filter gets the toolbox bound to it too (``with_filter``): every ``search`` applies it.

Usage (inside an agent's ``run``)::

    tools = ctx.tools                                        # AgentTools in a job
    docs = tools.search(ctx.collection_id, "turbine maintenance", top_k=5, strategy="keyword")  # the job's filter holds
    vectors = tools.embed(["a phrase", "another"])
    vectors = tools.embed_known([query, *sentences], documents)   # stored sentence vectors read, the rest embedded
    counts = tools.vocabulary(ctx.collection_id)            # {word: count} of the collection's text
    tools.collection_languages(ctx.collection_id)           # {"en": 812, "de": 40}: chunks per language
    acronyms = tools.acronyms(ctx.collection_id)            # {"PPA": "power purchase agreement", ...}
    if ctx.llm is not None:                                  # tools.llm, or None without one configured
        reply = ctx.llm.complete([{"role": "user", "content": "..."}], timeout_s=10)
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter, OrderedDict
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from redis.exceptions import RedisError
from sqlalchemy import exists, select

from agentsearch.pipeline.agents.base import Gate
from agentsearch.pipeline.agents.references import UserResources, collection_missing
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.breakers import ADMIT_ALL
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.platform.llm import LLMClient
from agentsearch.pipeline.platform.tables.collections import (
    CollectionRow,
    DocumentGroupRow,
    DocumentRow,
    milvus_collection_name,
)
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.retrieval.sentence_vectors import KnownVectors, stored_for
from agentsearch.pipeline.security.document_access import (
    access_filter,
    held_tokens,
    team_groups_held,
    token,
    visible_documents,
)
from agentsearch.pipeline.security.registered_tools import RegisteredTool
from agentsearch.pipeline.text import words
from agentsearch.pipeline.text.acronyms import mine_acronyms

if TYPE_CHECKING:
    from agentsearch.pipeline.platform.breakers import BreakerBoard
    from agentsearch.pipeline.platform.cache import ResultCache
    from agentsearch.pipeline.platform.db import Database
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.retrieval.embedder import TextEmbedder
    from agentsearch.pipeline.retrieval.retriever import Retriever
    from agentsearch.pipeline.retrieval.vector_store import VectorStore

LEXICON_TTL_S = 24 * 3600
LEXICONS_KEPT = 16


class _Recent:
    """The last ``size`` values put, by key; safe across a thread-pool worker's threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            return None

    def put(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class ToolboxServices(Protocol):
    """The clients the toolbox reads, each on first use (``agentsearch.pipeline.services.Services`` is one): a part
    replaced after the toolbox was made (a test's fake) is the one it reads."""

    @property
    def settings(self) -> Settings: ...

    @property
    def db(self) -> Database: ...

    @property
    def embedder(self) -> TextEmbedder: ...

    @property
    def retriever(self) -> Retriever: ...

    @property
    def vector_store(self) -> VectorStore: ...

    @property
    def breakers(self) -> BreakerBoard: ...

    @property
    def result_cache(self) -> ResultCache: ...


class AgentTools:
    def __init__(self, services: ToolboxServices, user_id: str | None = None, _root: AgentTools | None = None,
                 search_filter: MetadataFilter | None = None, access_tokens: frozenset[str] | None = None) -> None:
        self._services = services
        self._root = _root or self
        self.user_id = user_id
        self.search_filter = search_filter
        # The job's user's document groups at submission; None: read from the database when needed.
        self.access_tokens = access_tokens
        self._restricted: dict[str, bool] = {}  # collection id -> holds a restricted document, for one agent call
        self._resources = UserResources(services.db, user_id) if user_id is not None else None
        self._owned: dict[str, CollectionRow] = {}  # collection id -> row, for one agent call
        if _root is None:
            self._lexicons = _Recent(LEXICONS_KEPT)  # (kind, collection id, epoch) -> lexicon, for the process

    def for_user(self, user_id: str | None) -> AgentTools:
        """This toolbox for one agent call of one user's job: collections are that user's only."""
        return AgentTools(self._services, str(user_id) if user_id is not None else None, _root=self._root)

    def with_filter(self, search_filter: dict | MetadataFilter) -> AgentTools:
        """This toolbox with every ``search`` restricted by a job's metadata filter."""
        return AgentTools(self._services, self.user_id, _root=self._root,
                          search_filter=MetadataFilter.model_validate(search_filter), access_tokens=self.access_tokens)

    def with_access(self, tokens: list[str] | frozenset[str]) -> AgentTools:
        """This toolbox reading team collections as a holder of ``tokens`` (the job's document groups): a search of
        one with a restricted document applies their filter, its lexicon is of the documents they find."""
        return AgentTools(self._services, self.user_id, _root=self._root, search_filter=self.search_filter,
                          access_tokens=frozenset(tokens))

    @property
    def llm(self) -> LLMClient | None:
        return self._root._llm

    @cached_property
    def _llm(self) -> LLMClient | None:
        return LLMClient.from_settings(self._services.settings)

    @property
    def egress_policy(self) -> EgressPolicy:
        """The operator's allowlist (AGENTSEARCH_EGRESS_ALLOW) for calls made on a user's behalf."""
        return self._root._egress_policy

    @cached_property
    def _egress_policy(self) -> EgressPolicy:
        return self._services.settings.egress_policy()

    def registered_tool(self, kind: str, name: str) -> RegisteredTool:
        """The tool an operator registered under ``name``; ``MissingResource`` if there is none (any more)."""
        return UserResources(self._services.db, self.user_id).registered_tool(kind, name)

    def owned_collection(self, collection_id: str) -> CollectionRow:
        """The collection if the bound user owns it; ``MissingResource`` ("collection ... not found") if not."""
        key = str(collection_id)
        if key not in self._owned:
            if self._resources is None:
                raise collection_missing(collection_id)
            self._owned[key] = self._resources.owned_collection(key)
        return self._owned[key]

    def breaker(self, name: str, fail_max: int, reset_timeout_s: float) -> Gate:
        """A circuit breaker shared by every worker through Redis, for an agent's own dependency (an endpoint)."""
        try:
            return self._services.breakers.get(f"tool:{name}", fail_max, reset_timeout_s)
        except RedisError:
            return ADMIT_ALL

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._services.embedder.embed(texts)

    def embed_known(self, texts: list[str], documents: list[Document]) -> list[list[float]]:
        """``embed``, reading first what is already known: the sentence vectors stored with these documents'
        chunks at ingest (documents of collections the user owns only) and the query's cached embedding."""
        owned = []
        for doc in documents:
            collection = doc.metadata.get("collection_id")
            try:
                if collection:
                    self.owned_collection(str(collection))
                    owned.append(doc)
            except Exception:  # noqa: BLE001 - not the user's (or gone): its texts are embedded, not read
                continue
        services = self._services
        stored = stored_for(services.vector_store, owned, milvus_collection_name)
        known = KnownVectors(self.embed, stored,
                             lambda text: services.retriever.cached_embedding(text, services.settings.embedding_model))
        return known.embed(texts)

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        collection = self.owned_collection(collection_id)  # first: it refuses a collection the user does not own
        epoch = collection.index_epoch
        config = SearchConfig(strategy=strategy, top_k=top_k, fusion=self._services.settings.search_fusion,
                              filter=self._filter_for(collection))
        result = self._services.retriever.search(
            milvus_collection_name(collection_id), query, config, epoch=epoch,
            model=self._services.settings.embedding_model,
        )
        return result.documents

    def epoch(self, collection_id: str) -> int:
        return self.owned_collection(collection_id).index_epoch

    def collection_languages(self, collection_id: str) -> dict[str, int]:
        """Chunks per detected language (``{"en": 812, "de": 40}``, most first) among those the job's filter keeps
        (its document groups' too), read once per index epoch and filter."""
        epoch = self.epoch(collection_id)  # first: it refuses a collection the user does not own
        return self._services.retriever.collection_languages(
            milvus_collection_name(collection_id), epoch,
            filter_expr=self.search_filter if self.search_filter is not None else "")

    def collection_texts(self, collection_id: str) -> list[str]:
        """The indexed text of the collection's documents the user finds (its document groups)."""
        collection = self.owned_collection(collection_id)
        with self._services.db.session() as s:
            query = select(DocumentRow.title, DocumentRow.text).where(
                DocumentRow.collection_id == uuid.UUID(collection_id), DocumentRow.status == "indexed")
            rows = s.execute(visible_documents(query, collection, self._tokens(s))).all()
        return [f"{title}. {text}" for title, text in rows]

    def _tokens(self, s) -> frozenset[str]:
        if self.access_tokens is not None:
            return self.access_tokens
        return held_tokens(s, self.user_id) if self.user_id is not None else frozenset()

    def _holds_restricted(self, collection: CollectionRow) -> bool:
        """Whether some document of the team collection is restricted to document groups (asked once per call)."""
        key = str(collection.id)
        if collection.team_id is None:
            return False
        if key not in self._restricted:
            with self._services.db.session() as s:
                self._restricted[key] = bool(s.scalar(select(exists().where(
                    DocumentGroupRow.document_id == DocumentRow.id, DocumentRow.collection_id == collection.id))))
        return self._restricted[key]

    def _filter_for(self, collection: CollectionRow) -> MetadataFilter | None:
        """The job's filter, joined to the document groups' where the collection holds a restricted document: any
        collection an agent searches (its own config's too, not only the job's) finds what the user may find."""
        if not self._holds_restricted(collection):
            return self.search_filter
        with self._services.db.session() as s:
            clause = access_filter(token(collection.team_id, g)
                                   for g in team_groups_held(self._tokens(s), collection.team_id))
        # Joined as built nodes, not re-read JSON: the job's filter may already hold the same clause (its own
        # collection), and twice it only costs a second check, never the filter language's bounds.
        return clause if self.search_filter is None else MetadataFilter(and_=[clause, self.search_filter])

    def _lexicon_scope(self, collection: CollectionRow) -> str:
        """Whose lexicon of the collection this is: every reader's (``""``), or, where some document is restricted
        to document groups, the holders' of the user's groups there: a word of a document the user does not find
        is never corrected towards nor expanded (``agentsearch.pipeline.security.document_access``)."""
        if not self._holds_restricted(collection):
            return ""
        with self._services.db.session() as s:
            return "groups:" + ",".join(team_groups_held(self._tokens(s), collection.team_id))

    def vocabulary(self, collection_id: str) -> dict[str, int]:
        """Word counts of the collection's indexed text, cached per index epoch (in Redis and in the process)."""
        return self._lexicon(collection_id, "vocabulary",
                             lambda texts: dict(Counter(w for t in texts for w in words(t))))

    def acronyms(self, collection_id: str) -> dict[str, str]:
        """Acronym definitions mined from the collection's text, cached per index epoch (in Redis and in the process).
        The dict is shared: read it, never change it (as for ``vocabulary``)."""
        return self._lexicon(collection_id, "acronyms", mine_acronyms)

    def _lexicon(self, collection_id: str, kind: str, build) -> dict:
        # Shared by every user in Redis (per collection, epoch and document groups held), so the ownership check
        # comes first.
        collection = self.owned_collection(collection_id)
        epoch, scope = collection.index_epoch, self._lexicon_scope(collection)
        # Kept in the process too: an epoch's lexicon never changes, and reading SciFact's 18,000-word vocabulary
        # back from Redis and parsing it cost every job 10-85 ms (counting it again from the rows, 0.3-0.5 s).
        kept = self._root._lexicons
        if (value := kept.get((kind, collection_id, epoch, scope))) is not None:
            return value
        cache = self._services.result_cache
        key = cache.key("lexicon", kind, collection_id, str(epoch), *([scope] if scope else []))
        if (cached := cache.get(key)) is not None:
            value = json.loads(cached)
        else:
            value = build(self.collection_texts(collection_id))
            cache.set(key, json.dumps(value), LEXICON_TTL_S)
        kept.put((kind, collection_id, epoch, scope), value)
        return value
