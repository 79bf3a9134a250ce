"""Groups in an Agent File: read into stateloop's groups (``round_robin``, ``supervisor``,
``dynamic``, and ``sleeptime``: a main agent and its memory agent); and written back as
Letta's ``GroupSchema`` when an exported agent manages a group (its members are exported
with it, as Letta does)."""

from __future__ import annotations

from typing import Any

from ..sleeptime import DEFAULT_FREQUENCY
from ..store.records import AgentRecord, GroupRecord
from .reading import AgentFileError, LeftOut

RUNNABLE = ("round_robin", "supervisor", "dynamic")


def read_groups(entries: list[dict[str, Any]], agents: dict[str, AgentRecord],
                blocks: dict[str, str], left_out: LeftOut) -> list[GroupRecord]:
    """The file's groups with ids remapped (``agents``: file id -> record, ``blocks``: file
    id -> new block id). A kind of group stateloop does not run is left out (its agents
    are imported on their own)."""
    groups = []
    for index, entry in enumerate(entries):
        where = f"groups.{index}"
        config = entry.get("manager_config") or {"manager_type": "round_robin"}
        if not isinstance(config, dict):
            raise AgentFileError("must be an object", field=f"{where}.manager_config")
        kind = config.get("manager_type", "round_robin")
        members = [_agent(agents, agent_id, f"{where}.agent_ids.{i}").id
                   for i, agent_id in enumerate(_ids(entry.get("agent_ids"),
                                                     f"{where}.agent_ids"))]
        manager = config.get("manager_agent_id")
        manager_record = _agent(agents, manager, f"{where}.manager_config.manager_agent_id") \
            if manager is not None else None
        if kind in ("sleeptime", "voice_sleeptime") and manager_record and members:
            frequency = config.get("sleeptime_agent_frequency") or DEFAULT_FREQUENCY
            manager_record.enable_sleeptime = True
            groups.append(GroupRecord("sleeptime", members[:1], entry.get("description") or "",
                                      manager_agent_id=manager_record.id,
                                      sleeptime_agent_frequency=int(frequency),
                                      turns_counter=0))
            continue
        if kind not in RUNNABLE:
            left_out.skip(f"group {entry.get('id')!r} ({kind})", AgentFileError(
                "stateloop does not run that kind of group; its agents were imported on "
                "their own", field=f"{where}.manager_config.manager_type"))
            continue
        if kind != "round_robin" and manager_record is None:
            raise AgentFileError(f"a {kind} group names its manager agent",
                                 field=f"{where}.manager_config.manager_agent_id")
        shared = []
        for i, block_id in enumerate(_ids(entry.get("shared_block_ids"),
                                          f"{where}.shared_block_ids")):
            if block_id not in blocks:
                raise AgentFileError(f"names block {block_id!r}, which the file does not hold",
                                     field=f"{where}.shared_block_ids.{i}")
            shared.append(blocks[block_id])
        groups.append(GroupRecord(
            kind, members, entry.get("description") or "",
            manager_agent_id=manager_record.id if manager_record else None,
            max_turns=config.get("max_turns"),
            termination_token=config.get("termination_token") if kind == "dynamic" else None,
            hidden=entry.get("hidden"), shared_block_ids=shared))
    return groups


def _agent(agents: dict[str, AgentRecord], file_id: Any, where: str) -> AgentRecord:
    if not isinstance(file_id, str) or file_id not in agents:
        raise AgentFileError(f"names agent {file_id!r}, which the file does not hold",
                             field=where)
    return agents[file_id]


def _ids(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AgentFileError("must be a list", field=where)
    return value


def group_entry(group: GroupRecord, file_id: str, ids: Any) -> dict[str, Any]:
    """A stored group as Letta's ``GroupSchema`` (``ids.of`` names agents and blocks)."""
    config: dict[str, Any] = {"manager_type": group.manager_type}
    if group.manager_type == "round_robin":
        config["max_turns"] = group.max_turns
    else:
        config["manager_agent_id"] = ids.of("agent", group.manager_agent_id)
    if group.manager_type == "dynamic":
        config.update(termination_token=group.termination_token, max_turns=group.max_turns)
    if group.manager_type == "sleeptime":
        config["sleeptime_agent_frequency"] = group.sleeptime_agent_frequency
    return {"agent_ids": [ids.of("agent", a) for a in group.agent_ids],
            "description": group.description, "manager_config": config, "project_id": None,
            "shared_block_ids": [ids.of("block", b) for b in group.shared_block_ids],
            "hidden": group.hidden, "id": file_id}

