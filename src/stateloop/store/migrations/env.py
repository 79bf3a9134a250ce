"""Alembic environment: stateloop always hands in an open connection (see store/migrate.py)."""

from __future__ import annotations

from alembic import context

from stateloop.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "stateloop migrations run through stateloop.store.migrate, which passes a connection")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
