"""``/v1/groups``: Letta's multi-agent groups — create, list, count, get, modify, delete, the
group's messages (list, modify one, reset), shared blocks (attach, detach) — and
``GET /v1/agents/{id}/groups``. Sending to a group is in ``group_runs.py``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import Field

from ...store import Page
from ...store.groups import GroupMessage, GroupRecord
from ..deps import RuntimeDep
from ..models.requests import INT64_MAX, Lenient, errors
from ..models.responses import Group, iso
from ..pagination import Limit, Order
from ..services.messages import Frame
from ..services.runtime import Runtime
from ..services.sleeptime import end_group, follow_group
from ..services.views import group_view
from ..sse import wanted
from .agents import agent_record

router = APIRouter(tags=["groups"])

Turns = Annotated[int | None, Field(default=None, gt=0, le=INT64_MAX)]


class RoundRobinManager(Lenient):
    manager_type: Literal["round_robin"] = "round_robin"
    max_turns: Turns = None


class SupervisorManager(Lenient):
    manager_type: Literal["supervisor"] = "supervisor"
    manager_agent_id: str | None = None


class DynamicManager(Lenient):
    manager_type: Literal["dynamic"] = "dynamic"
    manager_agent_id: str | None = None
    termination_token: str | None = "DONE!"
    max_turns: Turns = None


class SleeptimeManager(Lenient):
    manager_type: Literal["sleeptime"] = "sleeptime"
    manager_agent_id: str | None = None
    sleeptime_agent_frequency: Turns = None


ManagerConfig = Annotated[RoundRobinManager | SupervisorManager | DynamicManager
                          | SleeptimeManager, Field(discriminator="manager_type")]


class GroupCreate(Lenient):
    agent_ids: list[str]
    description: str
    manager_config: ManagerConfig = Field(default_factory=RoundRobinManager)
    project_id: str | None = None
    shared_block_ids: list[str] = []
    hidden: bool | None = None


class GroupUpdate(Lenient):
    agent_ids: list[str] | None = None
    description: str | None = None
    manager_config: ManagerConfig | None = None
    project_id: str | None = None
    shared_block_ids: list[str] | None = None


class UpdateTextMessage(Lenient):
    message_type: Literal["system_message", "user_message",
                          "assistant_message"] = "assistant_message"
    content: str | list[dict[str, Any]]  # parts: their text is kept


class UpdateReasoningMessage(Lenient):
    message_type: Literal["reasoning_message"] = "reasoning_message"
    reasoning: str


def message_frame(message: GroupMessage) -> Frame:
    """A group message as Letta's message: the user's, or a member's (named, with its id)."""
    kind = "user_message" if message.role == "user" else "assistant_message"
    return {"id": message.id, "message_type": kind, "date": iso(message.created_at),
            "otid": None, "run_id": message.run_id, "step_id": None, "name": message.name,
            "sender_id": message.sender_id, "is_err": None, "seq_id": message.seq,
            "content": message.text}


def _manager_fields(config: ManagerConfig, current: GroupRecord | None) -> dict[str, Any]:
    """The record's fields a manager config sets, checked: who manages, and how long."""
    fields: dict[str, Any] = {"manager_type": config.manager_type}
    if isinstance(config, RoundRobinManager):
        return {**fields, "max_turns": config.max_turns, "manager_agent_id": None,
                "termination_token": None}
    manager = config.manager_agent_id or (current.manager_agent_id if current else None)
    if manager is None:
        raise _unprocessable(f"a {config.manager_type} group needs a manager_agent_id",
                             "manager_config", "manager_agent_id")
    fields["manager_agent_id"] = manager
    if isinstance(config, DynamicManager):
        fields["termination_token"] = config.termination_token
        fields["max_turns"] = config.max_turns
    elif isinstance(config, SleeptimeManager):
        if config.sleeptime_agent_frequency or current is None:  # as Letta: unset keeps it
            fields["sleeptime_agent_frequency"] = config.sleeptime_agent_frequency
        if config.sleeptime_agent_frequency and (current is None
                                                 or current.turns_counter is None):
            fields["turns_counter"] = -1  # as Letta: the first turn brings it to 0
    return fields


def _unprocessable(msg: str, *loc: str) -> HTTPException:
    """A 422 in FastAPI's shape, naming the body field."""
    return HTTPException(422, detail=[{"loc": ["body", *loc], "msg": msg,
                                       "type": "value_error"}])


def _check_members(agent_ids: list[str], manager_agent_id: str | None) -> None:
    if len(set(agent_ids)) != len(agent_ids):
        raise _unprocessable(f"agent ids repeat: {agent_ids}", "agent_ids")
    if manager_agent_id is not None and manager_agent_id in agent_ids:
        raise _unprocessable("the manager agent cannot also be a member",
                             "manager_config", "manager_agent_id")


async def group_record(runtime: Runtime, group_id: str) -> GroupRecord:
    return await runtime.store.get_group(group_id)


@router.get("/v1/groups", response_model=list[Group])
async def list_groups(runtime: RuntimeDep, manager_type: str | None = None,
                      before: str | None = None, after: str | None = None,
                      limit: Limit = 50, order: Order = "asc",
                      order_by: Literal["created_at"] = "created_at",
                      project_id: str | None = None) -> list[dict[str, Any]]:
    """Groups, oldest first by default, optionally of one manager type or project."""
    records = await runtime.store.list_groups(
        manager_type=manager_type, project_id=project_id,
        page=Page(after=after, before=before, limit=limit, order=order))
    return [group_view(r) for r in records]


@router.post("/v1/groups", responses=errors(404, 409), response_model=Group)
async def create_group(body: GroupCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """A group of existing agents; shared blocks are attached to every member."""
    fields = _manager_fields(body.manager_config, None)
    _check_members(body.agent_ids, fields.get("manager_agent_id"))
    record = GroupRecord(agent_ids=body.agent_ids, description=body.description,
                         project_id=body.project_id, hidden=body.hidden,
                         shared_block_ids=list(dict.fromkeys(body.shared_block_ids)), **fields)
    stored = await runtime.store.create_group(record)
    await follow_group(runtime, stored)
    return group_view(stored)


@router.get("/v1/groups/count", response_model=int)
async def count_groups(runtime: RuntimeDep) -> int:
    """How many groups there are."""
    return await runtime.store.count_groups()


@router.get("/v1/groups/{group_id}", responses=errors(404), response_model=Group)
async def retrieve_group(group_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One group."""
    return group_view(await group_record(runtime, group_id))


@router.patch("/v1/groups/{group_id}", responses=errors(404, 409), response_model=Group)
async def modify_group(group_id: str, body: GroupUpdate, runtime: RuntimeDep
                       ) -> dict[str, Any]:
    """Change a group's members, description, manager or shared blocks."""
    current = await group_record(runtime, group_id)
    changes: dict[str, Any] = {}
    if body.manager_config is not None:
        kinds = {body.manager_config.manager_type, current.manager_type}
        if "sleeptime" in kinds and len(kinds) > 1:  # its agents are made for it
            raise _unprocessable("a sleeptime group's manager type cannot change, nor can a "
                                 "group become one", "manager_config", "manager_type")
        changes.update(_manager_fields(body.manager_config, current))
    for name in ("agent_ids", "description", "project_id", "shared_block_ids"):
        value = getattr(body, name)
        if value is not None:
            changes[name] = value
    _check_members(changes.get("agent_ids", current.agent_ids),
                   changes.get("manager_agent_id", current.manager_agent_id))
    stored = await runtime.store.update_group(group_id, **changes)
    await follow_group(runtime, stored, current)
    return group_view(stored)


@router.delete("/v1/groups/{group_id}", responses=errors(404))
async def delete_group(group_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a group and its messages; its agents and blocks stay. A sleeptime group's
    main agent has its memory agent off from then on."""
    await end_group(runtime, await group_record(runtime, group_id))
    return {"message": f"Group id={group_id} successfully deleted"}


@router.patch("/v1/groups/{group_id}/messages/{message_id}", responses=errors(404))
async def modify_group_message(group_id: str, message_id: str,
                               body: UpdateTextMessage | UpdateReasoningMessage,
                               runtime: RuntimeDep) -> dict[str, Any]:
    """Edit the text of one of the group's messages."""
    content = body.content if isinstance(body, UpdateTextMessage) else body.reasoning
    text = content if isinstance(content, str) else "".join(
        str(part.get("text", "")) for part in content)
    return message_frame(await runtime.store.update_group_message(group_id, message_id, text))


@router.get("/v1/groups/{group_id}/messages", responses=errors(404))
async def list_group_messages(
    group_id: str, runtime: RuntimeDep, before: str | None = None, after: str | None = None,
    limit: Limit = 10, order: Order = "desc",
    order_by: Literal["created_at"] = "created_at", use_assistant_message: bool = True,
    assistant_message_tool_name: str = "send_message",
    assistant_message_tool_kwarg: str = "message",
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
) -> list[dict[str, Any]]:
    """The group's conversation: what was sent to it and what each member said (named,
    with its agent id). As for an agent's messages, ``order`` picks which end the page comes
    from; the page reads oldest first."""
    chosen = await runtime.store.list_group_messages(
        group_id, page=Page(after=after, before=before, limit=limit, order=order))
    if order == "desc":
        chosen.reverse()
    frames = [message_frame(m) for m in chosen]
    return [f for f in frames if wanted(f, include_return_message_types)]


@router.patch("/v1/groups/{group_id}/reset-messages", responses=errors(404))
async def reset_group_messages(group_id: str, runtime: RuntimeDep) -> None:
    """Forget the group's conversation; the members keep their own histories."""
    await runtime.store.reset_group_messages(group_id)


@router.patch("/v1/groups/{group_id}/blocks/attach/{block_id}", responses=errors(404, 409))
async def attach_block_to_group(group_id: str, block_id: str, runtime: RuntimeDep) -> None:
    """Share a block with the group: it is attached to every member and the manager."""
    await runtime.store.share_group_block(group_id, block_id, attach=True)


@router.patch("/v1/groups/{group_id}/blocks/detach/{block_id}", responses=errors(404))
async def detach_block_from_group(group_id: str, block_id: str, runtime: RuntimeDep) -> None:
    """Stop sharing a block: it is detached from the group, its members and manager."""
    await runtime.store.share_group_block(group_id, block_id, attach=False)


@router.get("/v1/agents/{agent_id}/groups", responses=errors(404), response_model=list[Group])
async def list_groups_for_agent(agent_id: str, runtime: RuntimeDep,
                                manager_type: str | None = None, before: str | None = None,
                                after: str | None = None, limit: Limit = 100,
                                order: Order = "desc",
                                order_by: Literal["created_at"] = "created_at",
                                ) -> list[dict[str, Any]]:
    """The groups the agent is in, as a member or as their manager."""
    await agent_record(runtime, agent_id)
    records = await runtime.store.list_groups(
        agent_id=agent_id, manager_type=manager_type, show_hidden=True,
        page=Page(after=after, before=before, limit=limit, order=order))
    return [group_view(r) for r in records]
