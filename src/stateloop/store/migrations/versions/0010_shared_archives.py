"""Archival memory lives in archives that agents share, as in Letta: an ``archives`` table,
``archives_agents`` (which agents reach which archive), and passages that belong to an
archive instead of an agent.

Every existing agent gets one archive that it owns (``archive-<the agent's uuid>``, named
"NAME's Archive", Letta's name for an agent's default archive) holding its passages.
Downgrading gives each passage back to its archive's owner (or else any agent attached);
passages of archives no agent uses have nowhere to go and are dropped.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)
_ARCHIVE_OF = ("CASE WHEN a.id LIKE 'agent-%' THEN 'archive-' || substr(a.id, 7) "
               "ELSE 'archive-' || a.id END")
_BODY = "p.text, p.embedding, p.embedding_model, p.embedding_dim, p.tags, p.metadata, p.created_at"
# The agent a passage goes back to: its archive's owner first, else the first attached.
_AGENT_OF = ("(SELECT x.agent_id FROM archives_agents x WHERE x.archive_id = p.archive_id "
             "ORDER BY x.is_owner DESC, x.created_at, x.agent_id LIMIT 1)")


def _passages(name: str, owner: str, parent: str) -> None:
    op.create_table(
        name,
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String, nullable=False, unique=True),
        sa.Column(owner, sa.String, sa.ForeignKey(f"{parent}.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", sa.LargeBinary),
        sa.Column("embedding_model", sa.String),
        sa.Column("embedding_dim", sa.Integer),
        sa.Column("tags", JSON, nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )


def upgrade() -> None:
    op.create_table(
        "archives",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("vector_db_provider", sa.String, nullable=False),
        sa.Column("embedding_config", JSON),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_archives_name", "archives", ["name"])
    op.create_table(
        "archives_agents",
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("archive_id", sa.String, sa.ForeignKey("archives.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("is_owner", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_archives_agents_archive", "archives_agents", ["archive_id"])
    op.execute(f"INSERT INTO archives (id, name, vector_db_provider, metadata, created_at, "
               f"updated_at) SELECT {_ARCHIVE_OF}, a.name || '''s Archive', 'native', '{{}}', "
               "a.created_at, a.created_at FROM agents a")
    op.execute(f"INSERT INTO archives_agents (agent_id, archive_id, is_owner, created_at) "
               f"SELECT a.id, {_ARCHIVE_OF}, true, a.created_at FROM agents a")
    op.drop_index("ix_passages_agent_seq", table_name="passages")
    if op.get_bind().dialect.name == "sqlite":  # no DROP COLUMN with a foreign key: rebuild
        _passages("_passages_new", "archive_id", "archives")
        op.execute(f"INSERT INTO _passages_new (seq, id, archive_id, text, embedding, "
                   f"embedding_model, embedding_dim, tags, metadata, created_at) "
                   f"SELECT p.seq, p.id, (SELECT {_ARCHIVE_OF} FROM agents a "
                   f"WHERE a.id = p.agent_id), {_BODY} FROM passages p")
        op.drop_table("passages")
        op.rename_table("_passages_new", "passages")
    else:
        op.add_column("passages", sa.Column("archive_id", sa.String))
        op.execute(f"UPDATE passages p SET archive_id = {_ARCHIVE_OF} FROM agents a "
                   "WHERE a.id = p.agent_id")
        op.alter_column("passages", "archive_id", nullable=False)
        op.create_foreign_key(None, "passages", "archives", ["archive_id"], ["id"],
                              ondelete="CASCADE")
        op.drop_column("passages", "agent_id")
    op.create_index("ix_passages_archive_seq", "passages", ["archive_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_passages_archive_seq", table_name="passages")
    op.execute("DELETE FROM passages WHERE NOT EXISTS (SELECT 1 FROM archives_agents x "
               "WHERE x.archive_id = passages.archive_id)")
    if op.get_bind().dialect.name == "sqlite":
        _passages("_passages_old", "agent_id", "agents")
        op.execute(f"INSERT INTO _passages_old (seq, id, agent_id, text, embedding, "
                   f"embedding_model, embedding_dim, tags, metadata, created_at) "
                   f"SELECT p.seq, p.id, {_AGENT_OF}, {_BODY} FROM passages p")
        op.drop_table("passages")
        op.rename_table("_passages_old", "passages")
    else:
        op.add_column("passages", sa.Column("agent_id", sa.String))
        op.execute(f"UPDATE passages p SET agent_id = {_AGENT_OF}")
        op.alter_column("passages", "agent_id", nullable=False)
        op.create_foreign_key(None, "passages", "agents", ["agent_id"], ["id"],
                              ondelete="CASCADE")
        op.drop_column("passages", "archive_id")
    op.create_index("ix_passages_agent_seq", "passages", ["agent_id", "seq"])
    op.drop_index("ix_archives_agents_archive", table_name="archives_agents")
    op.drop_table("archives_agents")
    op.drop_index("ix_archives_name", table_name="archives")
    op.drop_table("archives")
