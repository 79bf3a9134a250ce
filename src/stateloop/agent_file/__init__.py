"""Agent Files (``.af``), Letta's format for moving agents between servers: reading and
checking one (``reading``), turning it into stateloop's records (``plan``, ``tools``,
``letta_messages``, ``history``), storing it whole or not at all (``importer``), writing
agents as one (``exporter``), and the library's ``Agent.import_file``/``export_file``
(``library``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..persistence import get_store
from .exporter import Snapshot, agent_file, stored_snapshot
from .importer import ImportResult, import_agents
from .memory_history import HISTORY_KEY, exported_history
from .plan import ImportOptions
from .reading import MAX_FILE_BYTES, AgentFileError, read_agent_file

__all__ = ["MAX_FILE_BYTES", "AgentFileError", "ImportOptions", "ImportResult", "Snapshot",
           "agent_file", "export_agents", "import_agents", "read_agent_file",
           "stored_snapshot"]


async def export_agents(agent_ids: list[str], *, store: Any, include_secrets: bool = False,
                        strip_messages: bool = False,
                        skills: Sequence[dict[str, Any]] = (),
                        memory_history: bool = False) -> dict[str, Any]:
    """The stored agents as one Agent File dict, with the groups they manage and those
    groups' members (a sleep-time memory agent too), as Letta exports them; ``skills``
    (Letta's ``SkillSchema`` dicts) are written as given; with ``memory_history``, each
    agent's memory history too (agent_file/memory_history.py)."""
    db = await get_store(store)
    wanted = list(dict.fromkeys(agent_ids))
    groups = []
    snapshots = []
    index = 0
    while index < len(wanted):  # members found on the way are exported too
        snapshot = await stored_snapshot(db, wanted[index])
        snapshots.append(snapshot)
        index += 1
        agent_id = snapshot.record.id
        for group in await db.list_groups(agent_id=agent_id, show_hidden=True):
            if group.manager_agent_id == agent_id and group not in groups:
                groups.append(group)
                wanted += [m for m in group.agent_ids if m not in wanted]
    data = agent_file(snapshots, groups=groups, include_secrets=include_secrets,
                      strip_messages=strip_messages, skills=skills)
    if memory_history:
        data[HISTORY_KEY] = [await exported_history(db, snapshot.record.id, entry["id"])
                             for snapshot, entry in zip(snapshots, data["agents"],
                                                        strict=True)]
    return data
