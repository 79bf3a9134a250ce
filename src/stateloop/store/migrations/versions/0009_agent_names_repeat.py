"""Agent names may repeat, as in Letta: the unique constraint on ``agents.name`` becomes a
plain index (lookups by name stay indexed).

SQLite cannot drop a constraint, so the table is rebuilt. Dropping the old table with foreign
keys enforced would cascade into every agent's messages, runs and blocks, so enforcement is
off while the table is rebuilt (SQLite's own procedure for schema changes): the transaction
so far is committed first, since the setting cannot change inside one, and a check that
every reference still resolves runs before enforcement is back on.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from typing import Any

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}  # names the reflected UNIQUE (name)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with (_foreign_keys_off(),
              op.batch_alter_table("agents", recreate="always", naming_convention=_NAMES)
              as batch):
            batch.drop_constraint("uq_agents_name", type_="unique")
    else:  # PostgreSQL's name for the constraint 0001 made
        op.drop_constraint("agents_name_key", "agents", type_="unique")
    op.create_index("ix_agents_name", "agents", ["name"])


def downgrade() -> None:
    op.drop_index("ix_agents_name", table_name="agents")
    if op.get_bind().dialect.name == "sqlite":
        with _foreign_keys_off(), op.batch_alter_table("agents", recreate="always") as batch:
            batch.create_unique_constraint("uq_agents_name", ["name"])
    else:
        op.create_unique_constraint("agents_name_key", "agents", ["name"])


class _foreign_keys_off:
    """Run the body in a transaction of its own with SQLite's foreign key enforcement off,
    then check every reference and turn enforcement on again."""

    def __enter__(self) -> None:
        self.conn: Any = op.get_bind()
        for sql in ("COMMIT", "PRAGMA foreign_keys=OFF", "BEGIN IMMEDIATE"):
            self.conn.exec_driver_sql(sql)

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            return  # the caller rolls back and closes the connection
        broken = self.conn.exec_driver_sql("PRAGMA foreign_key_check").all()
        if broken:
            raise RuntimeError(f"rebuilding agents left dangling references: {broken[:5]}")
        for sql in ("COMMIT", "PRAGMA foreign_keys=ON", "BEGIN IMMEDIATE"):
            self.conn.exec_driver_sql(sql)
