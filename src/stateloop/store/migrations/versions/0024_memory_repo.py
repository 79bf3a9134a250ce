"""Memory repositories: each agent's git objects, the head of its branch, and its commits
with the files each changed (memory_repo.py).

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def _agent(primary_key: bool) -> sa.Column:
    return sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                     primary_key=primary_key, nullable=False)


def upgrade() -> None:
    op.create_table(
        "memory_heads",
        _agent(True),
        sa.Column("sha", sa.String),
        sa.Column("files", sa.JSON),
    )
    op.create_table(
        "memory_objects",
        _agent(True),
        sa.Column("sha", sa.String, primary_key=True),
        sa.Column("type", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "memory_commits",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        _agent(False),
        sa.Column("sha", sa.String, nullable=False),
        sa.Column("parent_sha", sa.String),
        sa.Column("author_type", sa.String, nullable=False),
        sa.Column("author_id", sa.String, nullable=False),
        sa.Column("author_name", sa.String),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("changes", sa.JSON, nullable=False),
    )
    op.create_index("ix_memory_commits_agent", "memory_commits", ["agent_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_memory_commits_agent", table_name="memory_commits")
    op.drop_table("memory_commits")
    op.drop_table("memory_objects")
    op.drop_table("memory_heads")
