"""Schema migrations (alembic): env.py and one module per revision under versions/."""
