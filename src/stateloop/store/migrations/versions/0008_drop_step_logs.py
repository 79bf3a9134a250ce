"""Steps commit before the next one begins: the ``step_logs`` table goes.

A process no longer logs queued steps to a file of its own, so there is no batch of such a
log to record. Step logs left by a process of an earlier version that crashed are not
replayed: open the database once with that version to apply them.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("step_logs")


def downgrade() -> None:
    op.create_table("step_logs", sa.Column("token", sa.String, primary_key=True),
                    sa.Column("batch", sa.Integer, nullable=False))
