"""Identities, and their links to agents and blocks.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "identities",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("identifier_key", sa.String, nullable=False),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("identity_type", sa.String, nullable=False),
        sa.Column("project_id", sa.String),
        sa.Column("properties", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_identities_identifier_key", "identities", ["identifier_key"])
    for other, table in (("agent", "agents"), ("block", "blocks")):
        op.create_table(
            f"identities_{table}",
            sa.Column("identity_id", sa.String,
                      sa.ForeignKey("identities.id", ondelete="CASCADE"), primary_key=True),
            sa.Column(f"{other}_id", sa.String,
                      sa.ForeignKey(f"{table}.id", ondelete="CASCADE"), primary_key=True),
        )
        op.create_index(f"ix_identities_{table}_{other}", f"identities_{table}",
                        [f"{other}_id"])


def downgrade() -> None:
    op.drop_table("identities_blocks")
    op.drop_table("identities_agents")
    op.drop_table("identities")
