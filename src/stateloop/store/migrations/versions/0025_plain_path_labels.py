"""Block labels are plain paths: a label stored before the rule (an empty, ``.`` or ``..``
segment, a leading, trailing or doubled ``/``, a folder under ``skills/`` deeper than one
skill) is rewritten to the nearest legal one, so every stored agent still loads. Letta's
older skill label ``skills/NAME/SKILL`` becomes ``skills/NAME``, as Letta maps its file
``skills/NAME/SKILL.md``; a rewritten label another block of the same agent holds gets a
``_2``, ``_3``... suffix. Nothing is rewritten back on downgrade.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

_blocks = sa.table("blocks", sa.column("id", sa.String), sa.column("label", sa.String))
_links = sa.table("blocks_agents", sa.column("agent_id", sa.String),
                  sa.column("block_id", sa.String), sa.column("label", sa.String))


def plain(label: str) -> str:
    """The legal label nearest ``label`` (the rule of memory_files.label_problem, as of this
    revision: the characters were already checked when it was stored)."""
    parts = ["_" if part == ".." else part for part in label.split("/")
             if part not in ("", ".")]
    if len(parts) > 2 and parts[0] == "skills":
        parts = parts[:2] if parts[2:] == ["SKILL"] else ["skills", "-".join(parts[1:])]
    return "/".join(parts) or "block"


def upgrade() -> None:
    conn = op.get_bind()
    # Only a label with '/' or '.' can break the rule; the others stay as they are.
    found = conn.execute(sa.select(_blocks.c.id, _blocks.c.label).where(sa.or_(
        _blocks.c.label.contains("/"), _blocks.c.label.contains("."),
        _blocks.c.label == ""))).all()
    for block_id, label in found:
        wanted = plain(label)
        if wanted == label:
            continue
        agents = conn.execute(sa.select(_links.c.agent_id)
                              .where(_links.c.block_id == block_id)).scalars().all()
        taken = set(conn.execute(sa.select(_links.c.label).where(
            _links.c.agent_id.in_(agents)).where(_links.c.block_id != block_id)).scalars())
        chosen, number = wanted, 2
        while chosen in taken:
            chosen, number = f"{wanted}_{number}", number + 1
        conn.execute(sa.update(_blocks).where(_blocks.c.id == block_id).values(label=chosen))
        conn.execute(sa.update(_links).where(_links.c.block_id == block_id)
                     .values(label=chosen))


def downgrade() -> None:
    pass  # the rewritten labels are legal under the older rule too
