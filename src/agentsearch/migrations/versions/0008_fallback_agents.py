"""fallback agents: a collection's agent may name a fallback config and be critical

Revision ID: 0008_fallback_agents
Revises: 0007_conversations
Create Date: 2026-11-24

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_fallback_agents"
down_revision: str | Sequence[str] | None = "0007_conversations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # In a batch: SQLite (the embedded mode's database) cannot add a foreign key to a table in place.
    with op.batch_alter_table("collection_agents") as batch:
        batch.add_column(sa.Column("fallback_agent_config_id", sa.Uuid(), nullable=True))
        # Removing the fallback's config leaves the agent without one, not the collection without the agent.
        batch.create_foreign_key("fk_collection_agents_fallback_agent_config_id", "agent_configs",
                                 ["fallback_agent_config_id"], ["id"], ondelete="SET NULL")
        # Existing rows keep today's behaviour: a failing agent is skipped.
        batch.add_column(sa.Column("critical", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("collection_agents") as batch:
        batch.drop_column("critical")
        batch.drop_constraint("fk_collection_agents_fallback_agent_config_id", type_="foreignkey")
        batch.drop_column("fallback_agent_config_id")
