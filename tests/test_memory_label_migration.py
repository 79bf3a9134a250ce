"""Revision 0025: labels stored before a label had to be a plain path are rewritten to the
nearest legal one, so every stored agent still loads — Letta's older skill label
``skills/NAME/SKILL`` as ``skills/NAME``, a label another block of the agent holds with a
suffix — and the rest are left as they were."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, event

from stateloop import Agent
from stateloop.store import open_store
from stateloop.store.dialect import begin_sqlite, configure_sqlite_connection
from stateloop.store.migrate import upgrade
from stateloop.testing import ScriptedModel

LABELS = {"block-1": "human", "block-2": "skills/pdf/SKILL", "block-3": "notes//todo",
          "block-4": "../escape", "block-5": "skills/a/b", "block-6": "notes/todo",
          "block-7": "/lead/", "block-8": "v1.2/notes"}


async def test_stored_labels_become_plain_paths_and_the_agent_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", lambda conn, _rec: configure_sqlite_connection(conn))
    event.listen(engine, "begin", begin_sqlite)
    with engine.connect() as conn:
        conn = conn.execution_options(stateloop_write=True)
        with conn.begin():
            upgrade(conn, str(path), "0024")
    engine.dispose()
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO agents (id, name, agent_type, system, llm_config, embedding_config, "
            "tool_rules, tool_names, metadata, in_context_message_ids, message_buffer_autoclear,"
            " enable_sleeptime, timezone, extra, created_at, updated_at) VALUES ('agent-1', "
            "'old', 'letta_v1_agent', 'sys', '{}', '{}', '[]', '[]', '{}', '[]', 0, 0, 'UTC', "
            "'{}', 1.0, 2.0)")
        for position, (block_id, label) in enumerate(LABELS.items()):
            raw.execute("INSERT INTO blocks (id, label, value, \"limit\", read_only, "
                        "preserve_on_migration, metadata, extra, created_at, updated_at) "
                        "VALUES (?, ?, ?, 100, 0, 0, '{}', '{}', 1.0, 1.0)",
                        (block_id, label, f"value of {label}"))
            raw.execute("INSERT INTO blocks_agents VALUES ('agent-1', ?, ?, ?)",
                        (block_id, label, position))
    store = await open_store(f"sqlite:///{path}")
    try:
        blocks = {b.id: b.label for b in await store.list_blocks("agent-1")}
    finally:
        await store.close()
    assert blocks == {"block-1": "human", "block-2": "skills/pdf", "block-3": "notes/todo_2",
                      "block-4": "_/escape", "block-5": "skills/a-b",
                      "block-6": "notes/todo", "block-7": "lead", "block-8": "v1.2/notes"}
    agent = Agent.load("old", store=f"sqlite:///{path}", model=ScriptedModel([]))
    assert {b.label: b.value for b in agent.blocks}["skills/pdf"] == \
        "value of skills/pdf/SKILL"
