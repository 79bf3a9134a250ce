"""Archival embeddings in pgvector on PostgreSQL: a ``vector`` column beside each passage's
blob, filled from it, with an HNSW index (cosine) for the 384-dimension rows (see
store/pgvector.py). Where the extension is missing or may not be created, nothing changes and
archival search stays in memory; a later open retries. SQLite: nothing to do.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from alembic import op

from stateloop.store import pgvector

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pgvector.enable(op.get_bind())


def downgrade() -> None:
    pgvector.disable(op.get_bind())
