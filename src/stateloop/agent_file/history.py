"""An imported agent's history put in order: which messages are in context, every tool call
there answered right after it (invariant 1), and a step that was waiting for a human kept
waiting.

A call the file leaves unanswered is answered the way a crash is (the notice a load writes
after a stopped process), unless it ends the context as Letta's approval request: then the
agent is imported paused, with the call pending. A result that answers no call in context is
left out of the context (it stays in the history, where search finds it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..agent_store import INTERRUPTED_NOTICE
from ..approvals import PendingApproval
from ..messages import Message, new_uuid_id, tool_result


@dataclass(slots=True)
class History:
    stored: list[Message]  # every message, in the order they are stored
    in_context: list[str]  # ids, system message first
    pending: PendingApproval | None = None
    repaired: int = 0  # calls answered with the interruption notice
    dropped: int = 0  # results taken out of the context: they answered no call there
    notes: list[str] = field(default_factory=list)


def arrange(messages: list[Message], in_context: list[Message], approval_ids: set[str],
            approval_tools: set[str]) -> History:
    """``messages`` in file order, ``in_context`` in the file's context order (the same
    objects); ``approval_ids``: messages that were approval requests; ``approval_tools``:
    tools whose calls wait for a human (their rules)."""
    context: list[Message] = []
    after: dict[str, list[Message]] = {}  # message id -> notices stored right after it
    history = History([], [])
    index, count = 0, len(in_context)
    while index < count:
        message = in_context[index]
        index += 1
        if message.role == "tool":
            history.dropped += 1
            continue
        context.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        wanted = {call.id for call in message.tool_calls}
        results: dict[str, Message] = {}
        while index < count and in_context[index].role == "tool":
            result = in_context[index]
            index += 1
            if result.tool_call_id in wanted and result.tool_call_id not in results:
                results[result.tool_call_id] = result
            else:
                history.dropped += 1
        if not results and index == count and message.id in approval_ids:
            requested = [c.id for c in message.tool_calls if c.name in approval_tools]
            history.pending = PendingApproval(new_uuid_id("run"), list(message.tool_calls),
                                              requested or [c.id for c in message.tool_calls],
                                              created_at=message.created_at)
            continue
        last = message
        for call in message.tool_calls:
            answer = results.get(call.id)
            if answer is None:
                answer = tool_result(call, INTERRUPTED_NOTICE, is_error=True)
                answer.id = new_uuid_id("message")
                answer.created_at = last.created_at
                after.setdefault(last.id, []).append(answer)
                history.repaired += 1
            context.append(answer)
            last = answer

    def emit(message: Message) -> None:
        history.stored.append(message)
        for notice in after.pop(message.id, []):
            emit(notice)

    for message in messages:
        emit(message)
    history.in_context = [m.id for m in context]
    if history.repaired:
        history.notes.append(f"{history.repaired} tool call(s) left unanswered in the file "
                             "were answered as interrupted")
    if history.dropped:
        history.notes.append(f"{history.dropped} tool result(s) that answer no call in "
                             "context were left out of the context")
    return history
