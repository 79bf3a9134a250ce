"""Model requests made outside a run: the provider body the agent's next step would send
(built as a run builds it, sent nowhere), and a one-off completion with the agent's model
that leaves the agent as it was."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fastapi import HTTPException

from ...agent import Thread
from ...errors import ModelError
from ...llm.base import Model, ModelRequest, ModelResponse, ToolSpec
from ...loop import first_request
from ...memory.context import ContextBuilder
from ...memory.skills import ClientSkill, with_client_skills
from ...messages import Message, Usage, system, user
from ...tools import Tool

# Letta's name for the tool a structured answer is forced through.
STRUCTURED_OUTPUT = "structured_output"


def next_request(agent: Thread, new_input: Sequence[Message], tools: Sequence[Tool] = (),
                 skills: Sequence[ClientSkill] = ()) -> ModelRequest:
    """The request the agent's next step would make for ``new_input``: its context, tools
    (``tools`` added, as a run's client tools are; ``skills`` listed, as a run's client
    skills are) and rules, as a run builds it. Nothing of the agent changes."""
    config = agent.loop_config()
    config.build_context = with_client_skills(  # its own cache
        ContextBuilder(agent.context_window).build, lambda: agent.blocks, skills)
    if tools:
        config.tools = {**config.tools, **{tool.name: tool for tool in tools}}
    return first_request([*agent.messages, *new_input], config)


def provider_body(model: Model, request: ModelRequest) -> dict[str, Any]:
    """The JSON body ``model`` would post for ``request``; 422 for a model that cannot say."""
    body = getattr(model, "body", None)
    if body is None:
        raise HTTPException(422, detail=[{
            "loc": ["path", "agent_id"], "type": "value_error",
            "msg": f"the agent's model {model.name!r} does not build a provider request "
                   "body to show"}])
    decoded: dict[str, Any] = json.loads(body(request))
    return decoded


def completion_request(prompt: str, system_prompt: str | None,
                       response_schema: dict[str, Any] | None) -> ModelRequest:
    """Letta's one-off completion: a system prompt (a plain default when none is given), the
    prompt as the user's message, no tools, unless ``response_schema`` asks for the answer
    as the forced call of a tool taking that schema."""
    messages = [system(system_prompt or "You are a helpful assistant."), user(prompt)]
    if response_schema is None:
        return ModelRequest(messages, tool_choice="none")
    parameters = {"type": "object", "properties": response_schema.get("properties", {}),
                  "required": response_schema.get("required",
                                                  list(response_schema.get("properties", {})))}
    spec = ToolSpec(STRUCTURED_OUTPUT, "Returns a structured response matching the requested "
                    "schema.", parameters)
    return ModelRequest(messages, [spec], "required", STRUCTURED_OUTPUT,
                        parallel_tool_calls=False)


async def complete(model: Model, request: ModelRequest) -> tuple[str, Usage]:
    """The model's answer (the forced call's arguments as JSON, when one was forced) and its
    usage; a provider failure is a 502 saying why."""
    response: ModelResponse | None = None
    try:
        async for item in model.stream(request):
            if isinstance(item, ModelResponse):
                response = item
    except ModelError as exc:
        raise HTTPException(502, detail=f"LLM provider error: {exc}") from exc
    if response is None:
        raise HTTPException(502, detail="LLM provider error: the stream ended without a "
                                        "response")
    message = response.message
    if request.forced_tool is not None and message.tool_calls:
        call = message.tool_calls[0]
        text = call.raw_arguments if call.raw_arguments is not None else json.dumps(
            call.arguments)
        return text, response.usage
    return message.text, response.usage
