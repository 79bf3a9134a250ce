"""Providers added over REST (Letta's ``byok`` category): a name, a type of the catalogue,
an endpoint, and the keys sealed with the operator's encryption key.

Revision ID: 0028
Revises: 0027
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "providers",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("name", sa.String, nullable=False, unique=True),
        sa.Column("provider_type", sa.String, nullable=False),
        sa.Column("base_url", sa.String),
        sa.Column("region", sa.String),
        sa.Column("api_version", sa.String),
        sa.Column("api_key_sealed", sa.String),
        sa.Column("access_key_sealed", sa.String),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("providers")
