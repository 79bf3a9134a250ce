"""Provider traces: a step's model request and response, recorded when the operator turns
recording on (``STATELOOP_PROVIDER_TRACES``), one row per step, deleted with its agent.

Revision ID: 0027
Revises: 0026
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provider_traces",
        sa.Column("step_id", sa.String, primary_key=True),
        sa.Column("id", sa.String, nullable=False),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("run_id", sa.String),
        sa.Column("call_type", sa.String, nullable=False),
        sa.Column("request_json", sa.JSON, nullable=False),
        sa.Column("response_json", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_provider_traces_agent", "provider_traces", ["agent_id"])


def downgrade() -> None:
    op.drop_index("ix_provider_traces_agent", "provider_traces")
    op.drop_table("provider_traces")
