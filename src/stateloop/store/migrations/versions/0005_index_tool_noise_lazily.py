"""Recall indexes messages with visible text at once and pure tool noise (tool calls and
results without text) only when a search first asks for tool noise.

A message is in the index when its text is not empty and its seq is at most
``recall_index.indexed_seq``, or its text is empty and its seq is at most
``recall_index.tool_indexed_seq``. The triggers keep deletes and edits to that rule.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_TEXT = "(SELECT indexed_seq FROM recall_index WHERE id = 1)"
_TOOL = "(SELECT tool_indexed_seq FROM recall_index WHERE id = 1)"


def _indexed(row: str) -> str:
    return (f"(({row}.text != '' AND {row}.seq <= {_TEXT}) "
            f"OR ({row}.text = '' AND {row}.seq <= {_TOOL}))")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("ALTER TABLE recall_index ADD COLUMN tool_indexed_seq INTEGER NOT NULL DEFAULT 0")
    op.execute("UPDATE recall_index SET tool_indexed_seq = indexed_seq")  # all were indexed
    op.execute("DROP TRIGGER messages_fts_ad")
    op.execute("DROP TRIGGER messages_fts_au")
    op.execute(
        f"CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN {_indexed('old')} "
        "BEGIN INSERT INTO messages_fts(messages_fts, rowid, text, tool_text) "
        "VALUES ('delete', old.seq, old.text, old.tool_text); END")
    # An edit can move a message between the two rules: delete by the old row's rule, then
    # insert by the new one's, in that order (one trigger, so the order is fixed).
    op.execute(
        "CREATE TRIGGER messages_fts_au AFTER UPDATE OF text, tool_text ON messages BEGIN "
        "INSERT INTO messages_fts(messages_fts, rowid, text, tool_text) "
        f"SELECT 'delete', old.seq, old.text, old.tool_text WHERE {_indexed('old')}; "
        "INSERT INTO messages_fts(rowid, text, tool_text) "
        f"SELECT new.seq, new.text, new.tool_text WHERE {_indexed('new')}; END")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    # Index what is still behind, so the one-watermark rule of 0001 holds again.
    op.execute("INSERT INTO messages_fts(rowid, text, tool_text) SELECT seq, text, tool_text "
               f"FROM messages WHERE text = '' AND seq > {_TOOL} AND seq <= {_TEXT}")
    op.execute("DROP TRIGGER messages_fts_ad")
    op.execute("DROP TRIGGER messages_fts_au")
    indexed = f"old.seq <= {_TEXT}"
    delete = ("INSERT INTO messages_fts(messages_fts, rowid, text, tool_text) "
              "VALUES ('delete', old.seq, old.text, old.tool_text);")
    op.execute(f"CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN {indexed} "
               f"BEGIN {delete} END")
    op.execute(f"CREATE TRIGGER messages_fts_au AFTER UPDATE OF text, tool_text ON messages "
               f"WHEN {indexed} BEGIN {delete} "
               "INSERT INTO messages_fts(rowid, text, tool_text) "
               "VALUES (new.seq, new.text, new.tool_text); END")
    with op.batch_alter_table("recall_index") as batch:
        batch.drop_column("tool_indexed_seq")
