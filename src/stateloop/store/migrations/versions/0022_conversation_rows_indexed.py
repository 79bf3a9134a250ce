"""The conversation index holds the rows of conversations only.

``ix_messages_conversation_seq`` becomes partial (``conversation_id IS NOT NULL``): a query
for an agent's default thread (``conversation_id IS NULL``) can no longer pick it over
``ix_messages_agent_seq`` and walk every message of every agent, and the index no longer
spends an entry on each message outside a conversation.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_IN_CONVERSATION = sa.text("conversation_id IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_messages_conversation_seq", table_name="messages")
    op.create_index("ix_messages_conversation_seq", "messages", ["conversation_id", "seq"],
                    sqlite_where=_IN_CONVERSATION, postgresql_where=_IN_CONVERSATION)


def downgrade() -> None:
    op.drop_index("ix_messages_conversation_seq", table_name="messages")
    op.create_index("ix_messages_conversation_seq", "messages", ["conversation_id", "seq"])
