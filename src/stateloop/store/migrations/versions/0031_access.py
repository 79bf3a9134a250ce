"""Access: the project of each agent, block, archive, folder, identity, group and message
batch; API keys made over the API (hashed); client-side access tokens; the audit log of
write requests; and the model tokens each project used each day.

Revision ID: 0031
Revises: 0030
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

# Tables whose rows belong to a project of their own (agents' are added first).
PROJECTED = ("blocks", "archives", "folders", "identities", "groups", "message_batches")


def upgrade() -> None:
    op.add_column("agents", sa.Column("project", sa.String, nullable=False,
                                      server_default="default"))
    op.create_index("ix_agents_project", "agents", ["project", "created_at", "id"])
    for table in PROJECTED:
        op.add_column(table, sa.Column("project", sa.String, nullable=False,
                                       server_default="default"))
        op.create_index(f"ix_{table}_project", table, ["project", "created_at", "id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("project", sa.String, nullable=False),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("digest", sa.String, nullable=False),
        sa.Column("created_by", sa.String, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float),
        sa.Column("revoked_at", sa.Float),
    )
    op.create_index("ix_api_keys_created", "api_keys", ["created_at", "id"])
    op.create_table(
        "access_tokens",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("digest", sa.String, nullable=False),
        sa.Column("hostname", sa.String, nullable=False),
        sa.Column("policy", sa.JSON, nullable=False),
        sa.Column("agent_ids", sa.JSON, nullable=False),
        sa.Column("project", sa.String, nullable=False),
        sa.Column("created_by", sa.String, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("ix_access_tokens_created", "access_tokens", ["created_at", "id"])
    op.create_index("ix_access_tokens_hostname", "access_tokens", ["hostname"])
    op.create_table(
        "audit_log",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("credential", sa.String, nullable=False),
        sa.Column("project", sa.String),
        sa.Column("method", sa.String, nullable=False),
        sa.Column("route", sa.String, nullable=False),
        sa.Column("path", sa.String, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
    )
    op.create_index("ix_audit_log_credential", "audit_log", ["credential", "seq"])
    op.create_table(
        "project_usage",
        sa.Column("project", sa.String, primary_key=True),
        sa.Column("day", sa.String, primary_key=True),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("runs", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("project_usage")
    op.drop_index("ix_agents_project", "agents")
    for table in PROJECTED:
        op.drop_index(f"ix_{table}_project", table)
        op.execute(f"ALTER TABLE {table} DROP COLUMN project")
    # In place (SQLite 3.35+): a copied table would cascade its messages away.
    op.execute("ALTER TABLE agents DROP COLUMN project")
    op.drop_index("ix_audit_log_credential", "audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_access_tokens_hostname", "access_tokens")
    op.drop_index("ix_access_tokens_created", "access_tokens")
    op.drop_table("access_tokens")
    op.drop_index("ix_api_keys_created", "api_keys")
    op.drop_table("api_keys")
