"""Letta's multi-agent tools: an agent sends a message to another agent, or to every agent with
some tags, and waits for the reply or not.

The receiver's turn is a real run of that agent (its queue, its memory, its stop reasons),
started with a message that names the sender. Other agents are found among the calling
agent's live agents (``stateloop.live_agents``). A reply is waited for at most
``STATELOOP_AGENT_REPLY_TIMEOUT`` seconds; after that the tool answers with an error and the
receiver's run goes on. Who waits on whom is kept as a graph: a wait that would close a cycle
(A waits on B, which waits on A, or longer) would never end, so it is refused at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import Counter
from collections.abc import Coroutine
from typing import Any

from ..errors import ConfigError
from ..live_agents import live_agents_of
from ..messages import Message, user
from ..store.errors import NotFoundError
from .base import ToolContext

logger = logging.getLogger("stateloop")

REPLY_TIMEOUT_ENV = "STATELOOP_AGENT_REPLY_TIMEOUT"
DEFAULT_REPLY_TIMEOUT = 1200.0  # Letta waits twenty minutes for another agent

_waiting: dict[str, Counter[str]] = {}  # agent id -> the agents its run waits on
_background: set[asyncio.Task[Any]] = set()  # receivers' runs nobody awaits any more


def reply_timeout() -> float:
    """Seconds a sender waits for a reply (``STATELOOP_AGENT_REPLY_TIMEOUT``)."""
    raw = os.environ.get(REPLY_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_REPLY_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ConfigError(f"{REPLY_TIMEOUT_ENV} must be a positive number of seconds, "
                          f"not {raw!r}")
    return seconds


def incoming(sender_id: str, message: str, *, reply: bool) -> Message:
    """The message a receiver gets: Letta's words, naming the sender."""
    note = ("your response will be delivered to the sender" if reply else
            "this is a one-way notification; if you need to respond, use an agent-to-agent "
            "messaging tool if available")
    sent = user(f"[Incoming message from agent with ID '{sender_id}' - {note}] {message}")
    sent.metadata["sender_agent_id"] = sender_id
    return sent


def _path(start: str, goal: str, seen: set[str] | None = None) -> list[str] | None:
    """A chain of waits from ``start`` to ``goal``, if there is one."""
    if start == goal:
        return [goal]
    seen = seen if seen is not None else set()
    seen.add(start)
    for nxt in _waiting.get(start, ()):
        if nxt not in seen:
            rest = _path(nxt, goal, seen)
            if rest is not None:
                return [start, *rest]
    return None


def _spawn(coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Task[Any]) -> None:
    _background.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("a run started by another agent failed: %s", task.exception())


async def _receiver(ctx: ToolContext, other_agent_id: str) -> Any:
    try:
        return await live_agents_of(ctx.agent).agent(other_agent_id)
    except NotFoundError:
        raise ValueError(f"agent with id {other_agent_id!r} not found") from None


async def _ask(ctx: ToolContext, message: str, other_agent_id: str) -> dict[str, Any]:
    """Run the receiver on ``message`` and wait for its reply (Letta's ``agent_id`` and
    ``response`` list)."""
    sender = ctx.agent.id
    cycle = _path(other_agent_id, sender)
    if cycle is not None:
        chain = " -> ".join([sender, *cycle])
        raise RuntimeError(f"cannot wait for a reply from agent {other_agent_id!r}: it is "
                           f"waiting for this agent already ({chain}), so neither would ever "
                           f"answer; use send_message_to_agent_async instead")
    seconds = reply_timeout()
    waits = _waiting.setdefault(sender, Counter())
    waits[other_agent_id] += 1  # before any await: two agents cannot both miss the cycle
    try:
        receiver = await _receiver(ctx, other_agent_id)
        run = _spawn(receiver.run(incoming(sender, message, reply=True)))
        try:
            result = await asyncio.wait_for(asyncio.shield(run), seconds)
        except TimeoutError:
            # Not TimeoutError: that would read as this tool's own timeout.
            raise RuntimeError(f"agent {other_agent_id!r} did not reply within {seconds:g} "
                               f"seconds; its run goes on") from None
    finally:
        waits[other_agent_id] -= 1
        if waits[other_agent_id] <= 0:
            del waits[other_agent_id]
        if not waits:
            _waiting.pop(sender, None)
    if result.output:
        response = [result.output]
    elif result.error:
        response = [f"<error: {result.stop_reason}: {result.error}>"]
    else:
        response = ["<no response>"]
    return {"agent_id": other_agent_id, "response": response}


async def send_message_to_agent_and_wait_for_reply(ctx: ToolContext, message: str,
                                                   other_agent_id: str) -> str:
    """Sends a message to a specific agent and waits for its response. The sender's identity is
    automatically included, so no explicit introduction is needed in the message. This
    function is designed for two-way communication where a reply is expected.

    Args:
        message: The content of the message to be sent to the target agent.
        other_agent_id: The unique identifier of the target agent.
    """
    return json.dumps(await _ask(ctx, message, other_agent_id))


async def send_message_to_agent_async(ctx: ToolContext, message: str,
                                      other_agent_id: str) -> str:
    """Sends a message to a specific agent without waiting for a response. The sender's
    identity is automatically included, so no explicit introduction is required in the
    message. Suitable for notifications or one-way communication.

    Args:
        message: The content of the message to be sent to the target agent.
        other_agent_id: The unique identifier of the target agent.
    """
    receiver = await _receiver(ctx, other_agent_id)
    _spawn(receiver.run(incoming(ctx.agent.id, message, reply=False)))
    return "Successfully sent message"


async def send_message_to_agents_matching_tags(ctx: ToolContext, message: str,
                                               match_all: list[str],
                                               match_some: list[str]) -> list[dict[str, Any]]:
    """Sends a message to all agents that match the specified tag criteria and returns their
    responses. Agents must possess *all* of the tags in `match_all` and *at least one* of the
    tags in `match_some` (when it is not empty) to receive the message.

    Args:
        message: The content of the message to be sent to each matching agent.
        match_all: A list of tags that an agent must possess to receive the message.
        match_some: A list of tags where an agent must have at least one to qualify.
    """
    ids = [agent_id for agent_id in await live_agents_of(ctx.agent).tagged(match_all, match_some)
           if agent_id != ctx.agent.id]

    async def one(agent_id: str) -> dict[str, Any]:
        try:
            return await _ask(ctx, message, agent_id)
        except Exception as exc:
            return {"agent_id": agent_id, "response": [f"<error: {exc}>"]}

    return list(await asyncio.gather(*(one(agent_id) for agent_id in ids)))


MULTI_AGENT_TOOLS = (send_message_to_agent_and_wait_for_reply, send_message_to_agent_async,
                     send_message_to_agents_matching_tags)
MULTI_AGENT_TOOL_NAMES = tuple(f.__name__ for f in MULTI_AGENT_TOOLS)
