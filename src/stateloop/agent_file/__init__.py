"""Agent Files (``.af``), Letta's format for moving agents between servers: reading and
checking one (``reading``), turning it into stateloop's records (``plan``, ``tools``,
``letta_messages``, ``history``), storing it whole or not at all (``importer``), writing
agents as one (``exporter``), and the library's ``Agent.import_file``/``export_file``
(``library``)."""

from __future__ import annotations

from typing import Any

from .exporter import Snapshot, agent_file, stored_snapshot
from .importer import ImportResult, import_agents
from .plan import ImportOptions
from .reading import MAX_FILE_BYTES, AgentFileError, read_agent_file

__all__ = ["MAX_FILE_BYTES", "AgentFileError", "ImportOptions", "ImportResult", "Snapshot",
           "agent_file", "export_agents", "import_agents", "read_agent_file",
           "stored_snapshot"]


async def export_agents(agent_ids: list[str], *, store: Any, include_secrets: bool = False,
                        strip_messages: bool = False) -> dict[str, Any]:
    """The stored agents as one Agent File dict."""
    snapshots = [await stored_snapshot(store, agent_id) for agent_id in agent_ids]
    return agent_file(snapshots, include_secrets=include_secrets, strip_messages=strip_messages)
