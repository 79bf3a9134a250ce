"""Folders of files (Letta's sources): files with their parsed text, their chunks embedded
like passages, and which agents see which folders and files (open or closed).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def _fk(table: str) -> sa.ForeignKey:
    return sa.ForeignKey(f"{table}.id", ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "folders",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("name", sa.String, nullable=False, unique=True),
        sa.Column("description", sa.Text),
        sa.Column("instructions", sa.Text),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("embedding_config", JSON),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "files",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("folder_id", sa.String, _fk("folders"), nullable=False),
        sa.Column("file_name", sa.String, nullable=False),
        sa.Column("original_file_name", sa.String, nullable=False),
        sa.Column("file_type", sa.String, nullable=False),
        sa.Column("file_size", sa.Integer, nullable=False),
        sa.Column("content", sa.Text),
        sa.Column("processing_status", sa.String, nullable=False),
        sa.Column("error_message", sa.Text),
        sa.Column("total_chunks", sa.Integer, nullable=False),
        sa.Column("chunks_embedded", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_files_folder", "files", ["folder_id", "created_at"])
    op.create_table(
        "file_passages",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String, nullable=False, unique=True),
        sa.Column("file_id", sa.String, _fk("files"), nullable=False),
        sa.Column("folder_id", sa.String, _fk("folders"), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", sa.LargeBinary, nullable=False),
        sa.Column("embedding_model", sa.String, nullable=False),
        sa.Column("embedding_dim", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_file_passages_folder_seq", "file_passages", ["folder_id", "seq"])
    op.create_index("ix_file_passages_file", "file_passages", ["file_id"])
    op.create_table(
        "folders_agents",
        sa.Column("agent_id", sa.String, _fk("agents"), primary_key=True),
        sa.Column("folder_id", sa.String, _fk("folders"), primary_key=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_folders_agents_folder", "folders_agents", ["folder_id"])
    op.create_table(
        "files_agents",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("agent_id", sa.String, _fk("agents"), nullable=False),
        sa.Column("file_id", sa.String, _fk("files"), nullable=False),
        sa.Column("folder_id", sa.String, _fk("folders"), nullable=False),
        sa.Column("file_name", sa.String, nullable=False),
        sa.Column("is_open", sa.Boolean, nullable=False),
        sa.Column("visible_content", sa.Text),
        sa.Column("start_line", sa.Integer),
        sa.Column("end_line", sa.Integer),
        sa.Column("last_accessed_at", sa.Float, nullable=False),
        sa.UniqueConstraint("agent_id", "file_id", name="uq_files_agents_file"),
    )
    op.create_index("ix_files_agents_file", "files_agents", ["file_id"])


def downgrade() -> None:
    for table in ("files_agents", "folders_agents", "file_passages", "files", "folders"):
        op.drop_table(table)
