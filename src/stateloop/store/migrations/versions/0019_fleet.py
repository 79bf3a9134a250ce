"""Turns of agent threads across processes (fleet.py): tickets in arrival order, and each
agent's version, bumped whenever a run or an edit may have changed it.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fleet_tickets",
        # BIGINT on PostgreSQL (a sequence that never wraps); INTEGER PRIMARY KEY on SQLite.
        sa.Column("ticket", sa.BigInteger().with_variant(sa.Integer, "sqlite"),
                  primary_key=True, autoincrement=True),
        sa.Column("agent_id", sa.String, nullable=False),
        sa.Column("conversation_id", sa.String),
        sa.Column("owner", sa.String, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_fleet_tickets_thread", "fleet_tickets",
                    ["agent_id", "conversation_id", "ticket"])
    op.create_index("ix_fleet_tickets_owner", "fleet_tickets", ["owner"])
    op.create_table(
        "fleet_versions",
        sa.Column("agent_id", sa.String, primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fleet_versions")
    op.drop_table("fleet_tickets")
