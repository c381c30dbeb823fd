"""Documents only the right people find: the groups a user holds, the filter every search of its job applies, and
the checks on what was found before.

A team collection's document may be restricted to some of the team's groups (``access: {"groups": [...]}``); then
only the members of one of them find it. Groups belong to a team, so a group is named across the service by a
*token*, ``"<team id>:<group>"``: a job may search collections of several teams, and a group ``hr`` of one team
says nothing of another's.

- **In Milvus.** A restricted document's chunks carry their tokens in the metadata key ``_access_groups`` (written
  from the document's row at indexing, as any metadata) and, in a collection made since the field existed, as
  digests in the plain field ``access_groups`` (``agentsearch.pipeline.retrieval.access_field``), which the store
  writes the group clauses on: Milvus Lite evaluates it over the column, not by parsing each row's JSON. A job whose
  searched collections hold a restricted document searches with ``access_filter(tokens)`` joined to its own filter:
  a chunk without the key, or one sharing a token with the searcher. It is one filter in ``JobState.search``, so
  every search of the job applies it (each strategy, ``also_search``, each iteration). Where nothing searched is
  restricted there is no filter to pay for.
- **In the agents' reading.** The job carries its user's tokens (``JobState.access_tokens``): the toolbox applies
  their filter to any team collection an agent searches that holds a restricted document, and builds lexicons of
  the documents they find; they are part of the whole-job and agent cache keys, so two members share a cached
  result only when they hold the same groups.
- **In PostgreSQL.** ``document_groups`` holds each restricted document's groups, for listings and reads
  (``visible_documents``), and a job records the tokens it was run with (``jobs.access_groups``).
- **When read.** A job is read only by a member holding every token it was run with, and only while each of its
  sources is still visible to the reader (``job_visible``): a membership or a document's groups changed after the
  search count from the next request, as the rest of the access rules do.

A user's groups in a team are the groups an admin put it in (``team_groups``) and, for a user who signs in at the
identity provider, the team's groups named like a group of the provider's groups claim at its last sign-in (a group
some member was put in, or some document of the team is restricted to).

Usage::

    tokens = held_tokens(s, user_id)                        # frozenset({"5f0c...:hr"}), read on every call
    access = job_access(s, collection_ids, user_id)         # None: a user of no team over its own collections
    search["filter"] = access.applied(search.get("filter"))   # restricted when a searched document is
    query = visible_documents(select(DocumentRow), collection, tokens)
    groups = groups_for(collection, DocumentAccess(groups=["hr"]), ("body", "access"))   # 422 when personal
    set_document_groups(s, row, collection, groups)         # the row's groups and its chunks' metadata key
    job_visible(s, job, tokens)                             # False: the reader lacks a group, or a source moved
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr
from sqlalchemy import ColumnElement, Select, cast, delete, exists, func, select, union
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentGroupRow, DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.teams import TeamGroupMemberRow, TeamMemberRow
from agentsearch.pipeline.platform.tables.users import UserIdentityRow
from agentsearch.pipeline.refusal import Refusal, invalid
from agentsearch.pipeline.retrieval.access_field import ACCESS_KEY
from agentsearch.pipeline.retrieval.filters import MAX_DEPTH, MAX_IN_VALUES, MAX_NODES, MetadataFilter, filter_problems
from agentsearch.pipeline.security.key_limits import searched_collections

GROUP_NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,99}$")
MAX_DOCUMENT_GROUPS = 20
# The operators the access clause and the ``and`` joining it take of a filter's bound, at most.
ACCESS_NODES = 5


def token(team_id: uuid.UUID | str | None, group: str) -> str:
    return f"{team_id}:{group}"


def held_tokens(s: Session, user_id: uuid.UUID | str) -> frozenset[str]:
    """The tokens of every group the user holds, in every team it is a member of."""
    user_id = uuid.UUID(str(user_id))
    given = s.execute(select(TeamGroupMemberRow.team_id, TeamGroupMemberRow.name)
                      .join(TeamMemberRow, (TeamMemberRow.team_id == TeamGroupMemberRow.team_id)
                            & (TeamMemberRow.user_id == TeamGroupMemberRow.user_id))
                      .where(TeamGroupMemberRow.user_id == user_id)).all()
    tokens = {token(team_id, name) for team_id, name in given}
    claimed = sorted({group for groups in s.scalars(select(UserIdentityRow.groups)
                                                       .where(UserIdentityRow.user_id == user_id))
                      for group in groups or []})
    if claimed:
        # The provider's groups map to the groups of the same name in the teams the user is a member of: those
        # some member was put in, and those some document of the team is restricted to (a group may be the
        # provider's alone). Only names in use count, so a provider listing hundreds of groups adds a few tokens.
        teams = select(TeamMemberRow.team_id).where(TeamMemberRow.user_id == user_id)
        given_names = (select(TeamGroupMemberRow.team_id, TeamGroupMemberRow.name)
                       .where(TeamGroupMemberRow.team_id.in_(teams), TeamGroupMemberRow.name.in_(claimed)))
        document_names = (select(CollectionRow.team_id, DocumentGroupRow.name)
                          .join(DocumentRow, DocumentRow.id == DocumentGroupRow.document_id)
                          .join(CollectionRow, CollectionRow.id == DocumentRow.collection_id)
                          .where(CollectionRow.team_id.in_(teams), DocumentGroupRow.name.in_(claimed)))
        named: list[Any] = list(s.execute(union(given_names, document_names)))
        tokens |= {token(team_id, name) for team_id, name in named}
    return frozenset(tokens)


def team_groups_held(tokens: Iterable[str], team_id: uuid.UUID | str | None) -> list[str]:
    """The group names of one team among the tokens."""
    prefix = f"{team_id}:"
    return sorted(t[len(prefix):] for t in tokens if t.startswith(prefix))


def access_filter(tokens: Iterable[str]) -> MetadataFilter:
    """What a holder of ``tokens`` finds: chunks of unrestricted documents, and of documents sharing a token."""
    unrestricted: dict[str, Any] = {"not": {"exists": {"key": ACCESS_KEY}}}
    tokens = sorted(tokens)
    if not tokens:
        return MetadataFilter.model_validate(unrestricted)
    if len(tokens) > MAX_IN_VALUES:
        raise Refusal(422, f"the caller holds {len(tokens)} document groups; a search can hold at most "
                           f"{MAX_IN_VALUES}")
    return MetadataFilter.model_validate({"or": [unrestricted, {"in": {"key": ACCESS_KEY, "values": tokens}}]})


def restricted(job_filter: dict[str, Any] | None, tokens: Iterable[str]) -> dict[str, Any]:
    """The job's filter (as JSON, or None) joined to the access filter, as JSON: what ``JobState.search`` keeps.
    The join must fit the filter language's bounds, so a caller's filter over a team collection has one level and
    ``ACCESS_NODES`` operators less (said in the 422)."""
    clause = access_filter(tokens).as_json()
    if job_filter is None:
        return clause
    joined = {"and": [clause, job_filter]}
    if filter_problems(joined):
        raise invalid(("body", "filter"), f"a filter over a team collection may nest at most "
                                          f"{MAX_DEPTH - 1} levels and hold at most {MAX_NODES - ACCESS_NODES} "
                                          "operators: its document groups take the rest")
    return joined


def _group_name(name: str) -> str:
    if not GROUP_NAME.match(name):
        raise ValueError(f"invalid group name {name[:100]!r}: 1-100 letters, digits, '_', '.' or '-', starting with a "
                         "letter or digit")
    return name


GroupName = Annotated[StrictStr, AfterValidator(_group_name)]


class DocumentAccess(BaseModel):
    """Who finds a document, as sent with it (``access``): the members of any of ``groups``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: list[GroupName] = Field(min_length=1, max_length=MAX_DOCUMENT_GROUPS,
                                    description="Group names of the collection's team.")


def groups_for(collection: CollectionRow, access: DocumentAccess | None,
               loc: tuple[str | int, ...]) -> list[str] | None:
    """The group names a document is stored with (sorted, None for one every member finds); 422 at ``loc`` on a
    personal collection, which has no groups."""
    if access is None:
        return None
    if collection.team_id is None:
        raise invalid(loc, "access groups restrict a team collection's documents; this collection is personal")
    return sorted(set(access.groups))


def reserved_key_problem(metadata: dict[str, Any]) -> str | None:
    """Why a document's metadata as sent cannot be stored: the tokens' key is the service's."""
    if ACCESS_KEY in metadata:
        return f"the metadata key {ACCESS_KEY!r} is the service's own: restrict a document with access.groups"
    return None


def set_document_groups(s: Session, row: DocumentRow, collection: CollectionRow, groups: list[str] | None) -> None:
    """Restrict the document to ``groups`` (None: to nobody, found by every member): its ``document_groups`` rows
    now, its chunks' metadata when it is indexed next (the row's metadata carries the tokens there). The row is
    flushed already (its id is the groups' key)."""
    s.execute(delete(DocumentGroupRow).where(DocumentGroupRow.document_id == row.id))
    metadata = {k: v for k, v in (row.metadata_ or {}).items() if k != ACCESS_KEY}
    if groups:
        s.add_all(DocumentGroupRow(document_id=row.id, name=name) for name in groups)
        metadata[ACCESS_KEY] = [token(collection.team_id, name) for name in groups]
    row.metadata_ = metadata


def document_groups(s: Session, document_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    """The groups of each restricted document among ``document_ids`` (an unrestricted one is absent)."""
    groups: dict[uuid.UUID, list[str]] = {}
    for document_id, name in s.execute(select(DocumentGroupRow.document_id, DocumentGroupRow.name)
                                       .where(DocumentGroupRow.document_id.in_(list(document_ids)))
                                       .order_by(DocumentGroupRow.name)):
        groups.setdefault(document_id, []).append(name)
    return groups


def hidden_among(s: Session, rows: Iterable[DocumentRow], collection: CollectionRow,
                 tokens: Iterable[str]) -> list[str]:
    """The ids of the documents among ``rows`` a holder of ``tokens`` does not find: what it may not replace."""
    rows = list(rows)
    if collection.team_id is None or not rows:
        return []
    held = set(team_groups_held(tokens, collection.team_id))
    groups = document_groups(s, [row.id for row in rows])
    return [row.external_id for row in rows if row.id in groups and not held & set(groups[row.id])]


def refuse_hidden(s: Session, rows: Iterable[DocumentRow], collection: CollectionRow, tokens: Iterable[str]) -> None:
    """409 when the sender would replace a document it does not find: its content and groups are not the sender's
    to change, and a missing-id answer would be a lie the next listing contradicts."""
    hidden = hidden_among(s, rows, collection, tokens)
    if hidden:
        raise Refusal(409, f"document id {hidden[0]!r} is taken by a document restricted to groups you are not in; "
                           "send it under another id")


def shown_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """A document's metadata as a reader sees it: the tokens are the service's, its ``access`` says the groups."""
    return {k: v for k, v in (metadata or {}).items() if k != ACCESS_KEY}


def visible_documents(query: Select, collection: CollectionRow, tokens: Iterable[str]) -> Select:
    """``query`` over ``DocumentRow`` narrowed to the documents a holder of ``tokens`` finds in the collection."""
    if collection.team_id is None:
        return query
    restricted_doc = exists().where(DocumentGroupRow.document_id == DocumentRow.id)
    shared = exists().where(DocumentGroupRow.document_id == DocumentRow.id,
                            DocumentGroupRow.name.in_(team_groups_held(tokens, collection.team_id)))
    return query.where(~restricted_doc | shared)


@dataclass(frozen=True)
class JobAccess:
    """A job's document groups. ``held``: every token its user holds, what its agents read team collections as
    (their own config's too) and what the job records, so that only a holder of them all reads it; part of the
    whole-job and agent cache keys. ``searched``: the tokens its searches filter with, or None when none of the
    collections searched holds a restricted document (nothing to hide, no filter to pay for)."""

    held: list[str]
    searched: list[str] | None

    def applied(self, job_filter: dict[str, Any] | None) -> dict[str, Any] | None:
        """The job's filter as its searches apply it."""
        return restricted(job_filter, self.searched) if self.searched is not None else job_filter


def job_access(s: Session, collection_ids: Iterable[uuid.UUID | str], user_id: uuid.UUID | str,
               teams: Iterable[uuid.UUID | None] | None = None) -> JobAccess | None:
    """A job's document groups; None for a user of no team searching its personal collections, which reads no
    document with groups anywhere. The search filter is applied only where a searched document is restricted: on a
    collection made before the ``access_groups`` field it reads the metadata JSON, 20 times the search in Milvus
    Lite (BENCHMARKS.md), which a team that restricts nothing should not pay. A document restricted after this check
    is caught when the job is read (``job_visible``). ``teams``: the collections' teams, when the caller has read
    their rows in this transaction (a submission has: one round trip fewer)."""
    ids = [uuid.UUID(str(c)) for c in collection_ids]
    user_id = uuid.UUID(str(user_id))
    if teams is None:
        teams = s.scalars(select(CollectionRow.team_id)
                          .where(CollectionRow.id.in_(ids), CollectionRow.team_id.is_not(None)))
    team_ids = {str(team_id) for team_id in teams if team_id is not None}
    if not team_ids and not s.scalar(select(exists().where(TeamMemberRow.user_id == user_id))):
        return None
    held = sorted(held_tokens(s, user_id))
    if not team_ids or not s.scalar(select(exists().where(DocumentGroupRow.document_id == DocumentRow.id,
                                                          DocumentRow.collection_id.in_(ids)))):
        return JobAccess(held=held, searched=None)
    return JobAccess(held=held, searched=[t for t in held if t.split(":", 1)[0] in team_ids])


def groups_within(column: Any, tokens: Iterable[str], dialect: str) -> ColumnElement[bool]:
    """SQL for a JSON list of tokens (``jobs.access_groups``) that is null or holds none but ``tokens``: the jobs a
    holder of ``tokens`` may read by their groups, so a listing's ``total`` counts no job it would leave off."""
    tokens = sorted(tokens)
    if dialect == "postgresql":
        return column.is_(None) | column.op("<@")(cast(tokens, JSONB))
    held = func.json_each(column).table_valued("value")
    return column.is_(None) | ~exists(select(1).select_from(held).where(held.c.value.not_in(tokens)))


def job_visible(s: Session, job: JobRow, tokens: Iterable[str]) -> bool:
    """Whether a holder of ``tokens`` may read the job: it holds every token the job was run with, and none of the
    job's sources (while it runs, the documents its answer is written from) is now a document restricted to groups
    it does not hold."""
    if job.access_groups is None:
        return True
    tokens = frozenset(tokens)
    if not set(job.access_groups) <= tokens:
        return False
    if job.response is not None:
        sources = [src.get("document_id") for src in job.response.get("sources") or [] if isinstance(src, dict)]
    else:  # running: the documents its answer is being written from, once it has started (workflow.ANSWER)
        sources = [doc.get("id") for doc in (job.state or {}).get("documents") or [] if isinstance(doc, dict)]
    if not sources:
        return True
    searched = searched_collections(job) or frozenset({job.collection_id})
    # A source restricted to groups, none of which the reader holds: the job now shows what it may not find.
    restricted_rows = s.execute(select(DocumentRow.id, CollectionRow.team_id, DocumentGroupRow.name)
                                .join(CollectionRow, CollectionRow.id == DocumentRow.collection_id)
                                .join(DocumentGroupRow, DocumentGroupRow.document_id == DocumentRow.id)
                                .where(DocumentRow.collection_id.in_(list(searched)),
                                       DocumentRow.external_id.in_([str(d) for d in sources]))).all()
    held: dict[uuid.UUID, bool] = {}
    for document_id, team_id, name in restricted_rows:
        held[document_id] = held.get(document_id, False) or token(team_id, name) in tokens
    return all(held.values())
