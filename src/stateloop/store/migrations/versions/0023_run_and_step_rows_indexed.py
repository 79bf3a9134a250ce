"""The lists still read whole in Python page in SQL: indexes for their orders.

A run's messages page on ``(run_id, seq)`` and a step's on ``(step_id, seq)``: partial
indexes that hold only the rows a run or a step wrote. The step index replaces
``ix_messages_step_id`` (the rows that carry a step, by step id), which it also serves. An
agent's files page on ``(agent_id, file_name, id)``; the agents of a folder and of an
archive on ``(folder_id | archive_id, created_at, agent_id)``, replacing the indexes on the
folder and the archive alone.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_IN_RUN = sa.text("run_id IS NOT NULL")
_IN_STEP = sa.text("step_id IS NOT NULL")
_CARRIED = sa.text("step_at IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_messages_step_id", table_name="messages")
    op.create_index("ix_messages_run_seq", "messages", ["run_id", "seq"],
                    sqlite_where=_IN_RUN, postgresql_where=_IN_RUN)
    op.create_index("ix_messages_step_seq", "messages", ["step_id", "seq"],
                    sqlite_where=_IN_STEP, postgresql_where=_IN_STEP)
    op.create_index("ix_files_agents_agent_name", "files_agents",
                    ["agent_id", "file_name", "id"])
    op.drop_index("ix_folders_agents_folder", table_name="folders_agents")
    op.create_index("ix_folders_agents_folder_created", "folders_agents",
                    ["folder_id", "created_at", "agent_id"])
    op.drop_index("ix_archives_agents_archive", table_name="archives_agents")
    op.create_index("ix_archives_agents_archive_created", "archives_agents",
                    ["archive_id", "created_at", "agent_id"])


def downgrade() -> None:
    op.drop_index("ix_archives_agents_archive_created", table_name="archives_agents")
    op.create_index("ix_archives_agents_archive", "archives_agents", ["archive_id"])
    op.drop_index("ix_folders_agents_folder_created", table_name="folders_agents")
    op.create_index("ix_folders_agents_folder", "folders_agents", ["folder_id"])
    op.drop_index("ix_files_agents_agent_name", table_name="files_agents")
    op.drop_index("ix_messages_step_seq", table_name="messages")
    op.drop_index("ix_messages_run_seq", table_name="messages")
    op.create_index("ix_messages_step_id", "messages", ["step_id"],
                    sqlite_where=_CARRIED, postgresql_where=_CARRIED)
