"""An agent's context as a whole: its core memory, its system prompt recompiled, its
in-context messages reset; and one stored message by id."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from ...agent import Thread
from ...store import NotFoundError
from ..deps import RuntimeDep
from ..models.requests import Lenient, errors
from ..models.responses import AgentState, Memory
from ..services.messages import to_letta
from ..services.runtime import Runtime
from ..services.views import block_view
from .agents import agent_record, agent_state, live_agent

router = APIRouter()


class ResetMessagesRequest(Lenient):
    add_default_initial_messages: bool = False


@router.get("/v1/agents/{agent_id}/core-memory", tags=["agents"], responses=errors(404),
            response_model=Memory, deprecated=True)
async def retrieve_agent_memory(agent_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """The agent's core memory: its blocks, in order."""
    record = await agent_record(runtime, agent_id)
    blocks = [block_view(b) for b in await runtime.store.list_blocks(record.id)]
    return {"agent_type": record.agent_type, "blocks": blocks, "file_blocks": []}


async def _recompile(runtime: Runtime, agent_id: str, dry_run: bool) -> str:
    return await recompile_thread(await live_agent(runtime, agent_id), dry_run)


async def recompile_thread(agent: Thread, dry_run: bool) -> str:
    """One thread's system prompt compiled now; stored unless ``dry_run``."""
    if agent.running:  # its run recompiles before each step
        return agent.messages[0].text
    prompt = await agent.recompile(dry_run=dry_run)
    if not dry_run:
        await agent.save()
    return prompt


@router.post("/v1/agents/{agent_id}/recompile", tags=["agents"], responses=errors(404),
             response_model=str)
async def recompile_agent(agent_id: str, runtime: RuntimeDep, update_timestamp: bool = False,
                          dry_run: bool = False) -> str:
    """The system prompt compiled from the instructions, memory blocks and tool rules as they
    are now, stored as the agent's first message unless ``dry_run`` (a running agent's is
    returned as it is: its run recompiles before each step). The prompt embeds no edit
    timestamp, so ``update_timestamp`` changes nothing."""
    return await _recompile(runtime, agent_id, dry_run)


@router.post("/v1/agents/{agent_id}/system-prompt/recompile", tags=["agents"],
             responses=errors(404), response_model=str, deprecated=True)
async def recompile_agent_system_prompt(agent_id: str, runtime: RuntimeDep,
                                        update_timestamp: bool = False,
                                        dry_run: bool = False) -> str:
    """As ``POST /v1/agents/{agent_id}/recompile``."""
    return await _recompile(runtime, agent_id, dry_run)


@router.patch("/v1/agents/{agent_id}/reset-messages", tags=["agents"],
              responses=errors(404, 409), response_model=AgentState)
async def reset_messages(agent_id: str, runtime: RuntimeDep,
                         body: ResetMessagesRequest | None = None) -> dict[str, Any]:
    """Clear the agent's context down to its system prompt (recompiled from its memory as it
    is now). The messages stay in recall, searchable; a pending approval is dropped."""
    if body is not None and body.add_default_initial_messages:
        raise HTTPException(422, detail=[{
            "loc": ["body", "add_default_initial_messages"], "type": "value_error",
            "msg": "stateloop agents have no default initial messages; send the messages "
                   "to start with instead"}])
    agent = await live_agent(runtime, agent_id)
    if not agent.running:
        await agent.recompile(dry_run=True)  # reads the blocks as stored, for reset()
    agent.reset()  # a running agent: AgentBusyError, a 409
    await agent.save()
    return await agent_state(runtime, await agent_record(runtime, agent_id))


@router.get("/v1/messages/{message_id}", tags=["messages"], responses=errors(404))
async def retrieve_message(message_id: str, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """One stored message, as the Letta messages it becomes (a call with its tool calls,
    reasoning and text each one)."""
    try:
        [message] = await runtime.store.get_messages([message_id])
    except NotFoundError as exc:
        raise HTTPException(404, detail=f"no message with id {message_id!r}") from exc
    return to_letta(message)
