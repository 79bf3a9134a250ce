"""When does the loop go on after a step? One policy per agent type."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .llm.base import ToolSpec
from .messages import Message, ToolCall, user

HEARTBEAT_PARAMETER = "request_heartbeat"
_HEARTBEAT_SCHEMA = {
    "type": "boolean",
    "description": "Request an immediate heartbeat after function execution. Set to true if "
                   "you want to send a follow-up message or run a follow-up function.",
}
_HIDDEN = "[This is an automated system message hidden from the user] "


@dataclass(slots=True)
class Decision:
    """Go on (``proceed``) or stop; ``inject`` is input the next step starts with."""

    proceed: bool
    inject: Message | None = None


class Continuation(Protocol):
    """The continuation policy of an agent type."""

    name: str

    def tool_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]: ...

    def arguments(self, call: ToolCall) -> dict[str, Any]: ...

    def decide(self, calls: list[ToolCall], results: list[Message]) -> Decision: ...

    def output(self, messages: list[Message]) -> str: ...


class LettaV1:
    """Letta v1: a tool call continues the run; a reply without one ends it."""

    name = "letta_v1_agent"

    def tool_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        return specs

    def arguments(self, call: ToolCall) -> dict[str, Any]:
        return call.arguments

    def decide(self, calls: list[ToolCall], results: list[Message]) -> Decision:
        return Decision(bool(calls))

    def output(self, messages: list[Message]) -> str:
        for message in reversed(messages):
            if message.role == "assistant" and message.text:
                return message.text
        return ""


class Heartbeat:
    """MemGPT: the run goes on only when a call asked for a heartbeat or failed.

    The model speaks to the user through ``send_message``; its messages are the output.
    """

    name = "memgpt_agent"

    def tool_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        return [self._with_heartbeat(spec) for spec in specs]

    @staticmethod
    def _with_heartbeat(spec: ToolSpec) -> ToolSpec:
        if spec.name == "send_message":
            return spec
        parameters = dict(spec.parameters)
        parameters["properties"] = {**parameters.get("properties", {}),
                                    HEARTBEAT_PARAMETER: _HEARTBEAT_SCHEMA}
        parameters["required"] = [*parameters.get("required", []), HEARTBEAT_PARAMETER]
        return replace(spec, parameters=parameters)

    def arguments(self, call: ToolCall) -> dict[str, Any]:
        if HEARTBEAT_PARAMETER not in call.arguments:
            return call.arguments
        return {k: v for k, v in call.arguments.items() if k != HEARTBEAT_PARAMETER}

    def decide(self, calls: list[ToolCall], results: list[Message]) -> Decision:
        if any(result.is_error for result in results):
            return Decision(True, _notice("Function call failed, returning control"))
        if any(call.arguments.get(HEARTBEAT_PARAMETER) is True for call in calls):
            return Decision(True, _notice(
                "Function called using request_heartbeat=true, returning control"))
        return Decision(False)

    def output(self, messages: list[Message]) -> str:
        sent = [str(call.arguments.get("message", ""))
                for message in messages if message.role == "assistant"
                for call in message.tool_calls if call.name == "send_message"]
        return "\n".join(sent)


def _notice(reason: str) -> Message:
    message = user(json.dumps({"type": "heartbeat", "reason": _HIDDEN + reason,
                               "time": time.strftime("%Y-%m-%d %I:%M:%S %p %Z")}))
    message.metadata["kind"] = "heartbeat"
    return message
