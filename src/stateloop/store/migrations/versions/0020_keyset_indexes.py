"""Indexes for list pages read in SQL (paging.py): agents, blocks, runs, identities,
groups, archives and folders on ``(created_at, id)``, and an agent's runs on
``(agent_id, created_at, id)``.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_LISTED = ("identities", "groups", "archives", "folders")


def upgrade() -> None:
    op.create_index("ix_agents_created", "agents", ["created_at", "id"])
    op.create_index("ix_blocks_created", "blocks", ["created_at", "id"])
    op.create_index("ix_runs_created", "runs", ["created_at", "id"])
    for table in _LISTED:
        op.create_index(f"ix_{table}_created", table, ["created_at", "id"])
    op.drop_index("ix_runs_agent_created", table_name="runs")
    op.create_index("ix_runs_agent_created", "runs", ["agent_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_runs_agent_created", table_name="runs")
    op.create_index("ix_runs_agent_created", "runs", ["agent_id", "created_at"])
    for table in _LISTED:
        op.drop_index(f"ix_{table}_created", table_name=table)
    op.drop_index("ix_runs_created", table_name="runs")
    op.drop_index("ix_blocks_created", table_name="blocks")
    op.drop_index("ix_agents_created", table_name="agents")
