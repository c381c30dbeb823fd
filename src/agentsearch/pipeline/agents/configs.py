"""Agent config rows: a user's configs, and the set of them each collection runs (``collection_agents``).

Every function takes the caller's session, so a check and its change are one transaction (replacing a collection's
set runs under the collection's row lock, which its caller holds). Who may read or change what is decided before:
a config is its user's (``agentsearch.pipeline.security.access.Access.owned``), a collection's set is its editors'.

Usage::

    with db.session() as s:
        configs_of(s, user_id)                                            # oldest first
        linkable_stages(s, collection_id, user_id, [config_id, ...])      # {config_id: "pre_search", ...}
        configs_by_id(s, [config_id, ...])                                # {config_id: AgentConfigRow}
        replace_collection_agents(s, collection_id, [CollectionAgent(...), ...])
        collection_agents(s, collection_id)                               # [(CollectionAgent, AgentConfigRow)]
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.tables.agents import AgentConfigRow, CollectionAgentRow


def configs_of(s: Session, user_id: uuid.UUID) -> list[AgentConfigRow]:
    """The user's agent configs, oldest first."""
    return list(s.scalars(select(AgentConfigRow).where(AgentConfigRow.user_id == user_id)
                          .order_by(AgentConfigRow.created_at)))


def linkable_stages(s: Session, collection_id: uuid.UUID, user_id: uuid.UUID,
                    config_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Of these configs, those the user may put in the collection's set, each with its stage: its own, and those
    the set already runs (another editor's, in a team's collection). Any other config is as unknown as a missing
    one."""
    linked = select(CollectionAgentRow.agent_config_id).where(CollectionAgentRow.collection_id == collection_id)
    rows = s.execute(select(AgentConfigRow.id, AgentConfigRow.trigger_stage)
                     .where(AgentConfigRow.id.in_(list(config_ids)),
                            or_(AgentConfigRow.user_id == user_id, AgentConfigRow.id.in_(linked))))
    return dict(rows.tuples().all())


def configs_by_id(s: Session, config_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, AgentConfigRow]:
    return {row.id: row for row in s.scalars(select(AgentConfigRow).where(AgentConfigRow.id.in_(list(config_ids))))}


def replace_collection_agents(s: Session, collection_id: uuid.UUID, links: list[CollectionAgentRow]) -> None:
    """The collection's set replaced whole: what the set ran before is deleted, ``links`` inserted."""
    s.execute(delete(CollectionAgentRow).where(CollectionAgentRow.collection_id == collection_id))
    s.add_all(links)


def collection_agents(s: Session, collection_id: uuid.UUID) -> list[tuple[CollectionAgentRow, AgentConfigRow]]:
    """The collection's set: each link with its config, in no particular order."""
    rows = s.execute(select(CollectionAgentRow, AgentConfigRow)
                     .join(AgentConfigRow, AgentConfigRow.id == CollectionAgentRow.agent_config_id)
                     .where(CollectionAgentRow.collection_id == collection_id))
    return list(rows.tuples().all())
