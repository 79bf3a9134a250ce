"""Initial schema: agents, blocks, messages (+ FTS5 recall), runs, steps, passages, tools.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def _usage_columns() -> list[sa.Column]:
    return [sa.Column(name, sa.Integer, nullable=False) for name in (
        "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
        "cache_write_tokens")]


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("name", sa.String, nullable=False, unique=True),
        sa.Column("agent_type", sa.String, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("system", sa.Text, nullable=False),
        sa.Column("model", sa.String),
        sa.Column("llm_config", JSON, nullable=False),
        sa.Column("embedding_config", JSON, nullable=False),
        sa.Column("tool_rules", JSON, nullable=False),
        sa.Column("tool_names", JSON, nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("in_context_message_ids", JSON, nullable=False),
        sa.Column("message_buffer_autoclear", sa.Boolean, nullable=False),
        sa.Column("enable_sleeptime", sa.Boolean, nullable=False),
        sa.Column("timezone", sa.String),
        sa.Column("extra", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "agent_tags",
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("tag", sa.String, primary_key=True),
    )
    op.create_index("ix_agent_tags_tag", "agent_tags", ["tag"])
    op.create_table(
        "blocks",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("label", sa.String, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("limit", sa.Integer, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("read_only", sa.Boolean, nullable=False),
        sa.Column("hidden", sa.Boolean),
        sa.Column("preserve_on_migration", sa.Boolean, nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("extra", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "blocks_agents",
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("block_id", sa.String, sa.ForeignKey("blocks.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("label", sa.String, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.UniqueConstraint("agent_id", "label", name="uq_blocks_agents_label"),
    )
    op.create_index("ix_blocks_agents_block", "blocks_agents", ["block_id"])
    op.create_table(
        "messages",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String, nullable=False, unique=True),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("run_id", sa.String),
        sa.Column("step_id", sa.String),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("token_count", sa.Integer),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("tool_text", sa.Text),
        sa.Column("data", JSON, nullable=False),
        sqlite_autoincrement=True,  # seq never reused: recall and vector caches rely on it
    )
    op.create_index("ix_messages_agent_seq", "messages", ["agent_id", "seq"])
    op.create_index("ix_messages_run", "messages", ["run_id"])
    op.create_table(
        "runs",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("stop_reason", sa.String),
        sa.Column("error", sa.Text),
        *_usage_columns(),
        sa.Column("step_count", sa.Integer, nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("completed_at", sa.Float),
    )
    op.create_index("ix_runs_agent_created", "runs", ["agent_id", "created_at"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "steps",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("run_id", sa.String, sa.ForeignKey("runs.id", ondelete="CASCADE")),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("model", sa.String),
        sa.Column("provider", sa.String),
        *_usage_columns(),
        sa.Column("latency_ms", sa.Float),
        sa.Column("finish_reason", sa.String),
        sa.Column("error", sa.Text),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_steps_run", "steps", ["run_id", "step_index"])
    op.create_index("ix_steps_agent", "steps", ["agent_id"])
    op.create_table(
        "passages",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String, nullable=False, unique=True),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
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
    op.create_index("ix_passages_agent_seq", "passages", ["agent_id", "seq"])
    op.create_table(
        "tools",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("name", sa.String, nullable=False, unique=True),
        sa.Column("description", sa.Text),
        sa.Column("tool_type", sa.String, nullable=False),
        sa.Column("source_type", sa.String),
        sa.Column("source_code", sa.Text),
        sa.Column("binding", sa.String),
        sa.Column("json_schema", JSON, nullable=False),
        sa.Column("args_json_schema", JSON),
        sa.Column("return_char_limit", sa.Integer),
        sa.Column("default_requires_approval", sa.Boolean),
        sa.Column("enable_parallel_execution", sa.Boolean),
        sa.Column("tags", JSON, nullable=False),
        sa.Column("pip_requirements", JSON),
        sa.Column("npm_requirements", JSON),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    if op.get_bind().dialect.name == "sqlite":
        _create_sqlite_fts()
    else:
        _create_postgres_recall()


def _create_sqlite_fts() -> None:
    # Recall index over messages.text: an external-content FTS5 table (text stored once).
    # FTS5 pays ~100 us per transaction, so steps do not index inline: rows above
    # recall_index.indexed_seq are indexed in batches (every few dozen messages, and before
    # any search), and the delete/update triggers only touch rows already indexed.
    op.execute("CREATE VIRTUAL TABLE messages_fts USING fts5("
               "text, tool_text, content='messages', content_rowid='seq', "
               "tokenize='porter unicode61')")
    op.execute("CREATE TABLE recall_index (id INTEGER PRIMARY KEY CHECK (id = 1), "
               "indexed_seq INTEGER NOT NULL)")
    op.execute("INSERT INTO recall_index (id, indexed_seq) VALUES (1, 0)")
    indexed = "old.seq <= (SELECT indexed_seq FROM recall_index WHERE id = 1)"
    delete = ("INSERT INTO messages_fts(messages_fts, rowid, text, tool_text) "
              "VALUES ('delete', old.seq, old.text, old.tool_text);")
    op.execute(f"CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN {indexed} "
               f"BEGIN {delete} END")
    op.execute(f"CREATE TRIGGER messages_fts_au AFTER UPDATE OF text, tool_text ON messages "
               f"WHEN {indexed} BEGIN {delete} "
               "INSERT INTO messages_fts(rowid, text, tool_text) "
               "VALUES (new.seq, new.text, new.tool_text); END")


def _create_postgres_recall() -> None:
    # The same words as FTS5's porter tokenizer: English stems, no stop words. GIN indexes over
    # expressions keep recall current as rows land (store/dialect.py spells them the same).
    op.execute("CREATE TEXT SEARCH DICTIONARY stateloop_stem "
               "(TEMPLATE = snowball, Language = english)")
    op.execute("CREATE TEXT SEARCH CONFIGURATION stateloop_recall (COPY = simple)")
    op.execute("ALTER TEXT SEARCH CONFIGURATION stateloop_recall ALTER MAPPING FOR asciiword, "
               "asciihword, hword_asciipart, word, hword, hword_part WITH stateloop_stem")
    op.execute("CREATE INDEX ix_messages_recall ON messages "
               "USING gin (to_tsvector('stateloop_recall', text))")
    op.execute("CREATE INDEX ix_messages_recall_tool ON messages "
               "USING gin (to_tsvector('stateloop_recall', coalesce(tool_text, '')))")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS messages_fts")
        op.execute("DROP TABLE IF EXISTS recall_index")
    else:
        op.execute("DROP INDEX IF EXISTS ix_messages_recall")
        op.execute("DROP INDEX IF EXISTS ix_messages_recall_tool")
        op.execute("DROP TEXT SEARCH CONFIGURATION IF EXISTS stateloop_recall")
        op.execute("DROP TEXT SEARCH DICTIONARY IF EXISTS stateloop_stem")
    for name in ("tools", "passages", "steps", "runs", "messages", "blocks_agents", "blocks",
                 "agent_tags", "agents"):
        op.drop_table(name)
