"""A server-side row check for the pipelined step write on PostgreSQL: ``stateloop_require(n)``
fails the transaction when a statement that must change a row changed none. In a pipeline the
row counts come back only with the commit, too late to decide whether to commit
(store/fastpath.py ``FastStatement.require``). SQLite needs nothing: its counts are at hand.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.execute("""
        CREATE FUNCTION stateloop_require(changed bigint) RETURNS bigint
        LANGUAGE plpgsql AS $$
        BEGIN
            IF changed = 0 THEN
                RAISE EXCEPTION 'no row to change' USING ERRCODE = 'no_data_found';
            END IF;
            RETURN changed;
        END $$""")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        return
    op.execute("DROP FUNCTION stateloop_require(bigint)")
