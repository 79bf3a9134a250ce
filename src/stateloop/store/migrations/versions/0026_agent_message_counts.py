"""Each agent counts its stored messages: ``agents.message_count``, kept by triggers on
``messages`` in the transaction that inserts or deletes them (every way a message is
written or removed, the step's fast path and cascades included), so loading an agent reads
its count instead of counting every message it ever stored.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_SQLITE = [
    "CREATE TRIGGER messages_counted AFTER INSERT ON messages BEGIN "
    "UPDATE agents SET message_count = message_count + 1 WHERE id = NEW.agent_id; END",
    "CREATE TRIGGER messages_uncounted AFTER DELETE ON messages BEGIN "
    "UPDATE agents SET message_count = message_count - 1 WHERE id = OLD.agent_id; END",
]
# PostgreSQL: once per statement, over the rows it inserted or deleted (a step's messages
# move each agent's count once).
_POSTGRES = [
    """CREATE FUNCTION stateloop_count_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE agents SET message_count = agents.message_count + moved.n
    FROM (SELECT agent_id, count(*) AS n FROM added GROUP BY agent_id) moved
    WHERE agents.id = moved.agent_id;
  ELSE
    UPDATE agents SET message_count = agents.message_count - moved.n
    FROM (SELECT agent_id, count(*) AS n FROM removed GROUP BY agent_id) moved
    WHERE agents.id = moved.agent_id;
  END IF;
  RETURN NULL;
END $$""",
    "CREATE TRIGGER messages_counted AFTER INSERT ON messages REFERENCING NEW TABLE AS "
    "added FOR EACH STATEMENT EXECUTE FUNCTION stateloop_count_messages()",
    "CREATE TRIGGER messages_uncounted AFTER DELETE ON messages REFERENCING OLD TABLE AS "
    "removed FOR EACH STATEMENT EXECUTE FUNCTION stateloop_count_messages()",
]


def upgrade() -> None:
    op.add_column("agents", sa.Column("message_count", sa.BigInteger, nullable=False,
                                      server_default="0"))
    op.execute("UPDATE agents SET message_count = (SELECT count(*) FROM messages "
               "WHERE messages.agent_id = agents.id)")
    for statement in _POSTGRES if op.get_bind().dialect.name == "postgresql" else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for trigger in ("messages_counted", "messages_uncounted"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}{' ON messages' if postgres else ''}")
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS stateloop_count_messages()")
    # In place (SQLite 3.35+): a copied table would cascade its messages away.
    op.execute("ALTER TABLE agents DROP COLUMN message_count")
