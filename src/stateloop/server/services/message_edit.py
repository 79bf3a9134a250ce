"""Editing a stored message's content (Letta's ``UpdateMessage`` variants): the store keeps
the new text (recall searches it) and the live agent's context holds the edited message, so
the next model request sends it."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import HTTPException

from ...agent import Agent
from ...messages import Message, Part, ReasoningPart, TextPart, ToolCall
from ...store import NotFoundError
from ..models.content import ImageContent
from ..models.requests import TextContent
from .messages import SEND_MESSAGE, to_letta
from .runtime import Runtime

# Which stored role each update type edits.
_ROLES = {"system_message": "system", "user_message": "user",
          "assistant_message": "assistant", "reasoning_message": "assistant"}
_KINDS = {"system": "system_message", "user": "user_message", "assistant": "assistant_message"}


def edited(message: Message, kind: str | None, content: Any) -> Message:
    """A new message object (kept request pieces compare messages by identity) with the
    content ``kind`` names replaced (without ``kind``, the message's own kind); ``content``
    is the request's (text or parts), or the reasoning's text. 422 when the message holds
    no such content."""
    kind = kind or _KINDS.get(message.role)
    if kind is None or message.role != _ROLES[kind]:
        raise _mismatch(message, kind or "content")
    new = copy.deepcopy(message)
    new.token_count = None  # counted again
    if kind == "system_message":
        if not isinstance(content, str):
            raise _field("content", "a system message's content is a string")
        new.content = [TextPart(content)]
    elif kind == "user_message":
        new.content = _parts(content)
    elif kind == "reasoning_message":
        if not message.reasoning:
            raise _mismatch(message, kind)
        # A provider's signature vouches for the original thinking only: it goes.
        new.content = [ReasoningPart(content), *(p for p in new.content
                                                 if not isinstance(p, ReasoningPart))]
    elif not isinstance(content, str) and not all(isinstance(p, TextContent) for p in content):
        raise _field("content", "an assistant message's content is text only")
    elif message.text:
        new.content = [*(p for p in new.content if isinstance(p, ReasoningPart)),
                       TextPart(_plain(content))]
    else:  # an agent that answers through send_message: its argument is the text
        calls = [c for c in new.tool_calls if c.name == SEND_MESSAGE and "message" in c.arguments]
        if not calls:
            raise _mismatch(message, kind)
        _set_message(calls[0], _plain(content))
    return new


def _parts(content: str | list[TextContent | ImageContent]) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)]
    return [TextPart(p.text) if isinstance(p, TextContent) else p.to_part() for p in content]


def _field(name: str, message: str) -> HTTPException:
    return HTTPException(422, detail=[{"loc": ["body", name], "type": "value_error",
                                       "msg": message}])


def _plain(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p.text for p in content)


def _set_message(call: ToolCall, text: str) -> None:
    call.arguments = {**call.arguments, "message": text}
    call.raw_arguments = None  # sent as the arguments, encoded anew


def _mismatch(message: Message, kind: str) -> HTTPException:
    shown = [f["message_type"] for f in to_letta(message)] or [message.role]
    return _field("message_type", f"message {message.id!r} is a {' and '.join(shown)}; it "
                  f"has no {kind.removesuffix('_message')} content for a {kind} update to "
                  "change")


async def edit_message(runtime: Runtime, agent: Agent, message_id: str, kind: str | None,
                       content: Any) -> tuple[Message, str]:
    """Replace the content of the agent's message ``message_id``; 404 when it has none
    with that id (another agent's included), 409 while it runs."""
    if agent.running:
        raise HTTPException(409, detail=f"agent {agent.id!r} is running; edit its messages "
                                        "when the run ends")
    await agent.save()  # what the agent holds unsaved is stored first
    missing = HTTPException(404, detail=f"agent {agent.id!r} has no message with id "
                                        f"{message_id!r}")
    in_context = next((i for i, m in enumerate(agent.messages) if m.id == message_id), None)
    if in_context is not None:
        current = agent.messages[in_context]
    else:
        try:
            [current] = await runtime.store.get_messages([message_id], agent_id=agent.id)
        except NotFoundError as exc:
            raise missing from exc
    new = edited(current, kind, content)
    try:
        await runtime.store.replace_message(agent.id, new)
    except NotFoundError as exc:
        raise missing from exc
    if in_context is not None:
        agent.replace_message(new)
    return new, kind or _KINDS[new.role]
