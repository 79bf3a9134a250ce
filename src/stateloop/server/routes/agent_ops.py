"""Operations on one agent beyond sending it messages: summarize its context now, edit a
stored message, show the provider request its next step would send, a one-off completion
with its model, and run one of its tools as it would."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Body, HTTPException
from pydantic import Field, field_validator

from ...agent import Thread
from ...errors import ConfigError
from ...llm.registry import resolve_model
from ...memory.compaction import _summary_body, is_summary
from ...memory.skills import ClientSkill
from ...messages import ToolCall, new_call_id
from ...tools.client import client_tool
from ...tools.execution import execute_tool
from ..deps import RuntimeDep
from ..models.content import ImageContent
from ..models.requests import ErrorBody, Lenient, LettaStreamingRequest, TextContent, errors
from ..models.responses import AgentState, Response
from ..services.message_edit import edit_message
from ..services.messages import to_letta
from ..services.model_requests import complete, completion_request, next_request, provider_body
from ..services.runtime import Runtime
from .agents import agent_record, live_agent
from .messages import parse_input

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["agents"])


# -- summarize ----------------------------------------------------------------------------


class CompactionRequest(Lenient):
    # Letta's CompactionSettings: its mode is followed, the agent's strategy writes.
    compaction_settings: dict[str, Any] | None = None


class CompactionResponse(Response):
    summary: str
    num_messages_before: int
    num_messages_after: int


@router.post("/summarize", responses=errors(400, 404), response_model=CompactionResponse)
async def summarize_messages(agent_id: str, runtime: RuntimeDep,
                             body: CompactionRequest | None = None) -> dict[str, Any]:
    """Compact the agent's context now (after a run in flight): the oldest turns leave it
    for a summary, as when it fills; they stay in recall. ``compaction_settings.mode`` of
    ``all`` (or ``self_compact_all``) sends every turn; the agent's own strategy
    (summarize, or a sliding window) writes the summary."""
    settings = body.compaction_settings if body is not None else None
    return await compact_thread(await live_agent(runtime, agent_id), settings)


NOTHING_TO_COMPACT = ("Summarization failed to reduce the number of messages. You may not "
                      "have enough messages to compact or need to use a different "
                      "CompactionSettings (e.g. using `all` mode).")


async def compact_thread(agent: Thread, settings: dict[str, Any] | None = None
                         ) -> dict[str, Any]:
    """Compact one thread of an agent now (``CompactionResponse``); Letta's 400 when
    nothing can leave the context (nothing but the system prompt, or one turn)."""
    mode = (settings or {}).get("mode")
    before = agent.messages
    event = await agent.compact(everything=mode in ("all", "self_compact_all"))
    if event is None:
        raise HTTPException(400, detail=NOTHING_TO_COMPACT)
    after = agent.messages
    summary = next((_summary_body(m) for m in after if is_summary(m)), "")
    return {"summary": summary, "num_messages_before": len(before),
            "num_messages_after": len(after)}


# -- edit a message -----------------------------------------------------------------------

UpdateType = Literal["system_message", "user_message", "reasoning_message",
                     "assistant_message"]


class UpdateMessage(Lenient):
    """Letta's UpdateSystemMessage, UpdateUserMessage, UpdateReasoningMessage and
    UpdateAssistantMessage in one: without ``message_type``, the stored message's kind."""

    message_type: UpdateType | None = None
    content: str | list[TextContent | ImageContent] | None = None
    reasoning: str | None = None


@router.patch("/messages/{message_id}", tags=["messages"], responses=errors(404, 409),
               deprecated=True)
async def modify_message(agent_id: str, message_id: str, body: UpdateMessage,
                         runtime: RuntimeDep) -> dict[str, Any]:
    """Change a stored message's content: a user or system message's, an assistant
    message's text, or its reasoning. The store keeps the new text (recall finds it) and
    the agent's next request sends it. A system prompt edited here lasts until the prompt
    is compiled again (a memory, instruction or rule change)."""
    agent = await live_agent(runtime, agent_id)
    if body.message_type == "reasoning_message" or (
            body.message_type is None and body.content is None and body.reasoning is not None):
        if body.reasoning is None:
            raise HTTPException(422, detail=[{
                "loc": ["body", "reasoning"], "type": "missing",
                "msg": "a reasoning_message update needs 'reasoning'"}])
        message, kind = await edit_message(runtime, agent, message_id, "reasoning_message",
                                           body.reasoning)
    else:
        if body.content is None:
            raise HTTPException(422, detail=[{"loc": ["body", "content"], "type": "missing",
                                              "msg": "Field required"}])
        message, kind = await edit_message(runtime, agent, message_id, body.message_type,
                                           body.content)
    frames = to_letta(message)
    return next((f for f in frames if f["message_type"] == kind), frames[0] if frames else {})


# -- the next request, and a one-off completion --------------------------------------------


@router.post("/messages/preview-raw-payload", tags=["messages"], responses=errors(404, 409))
async def preview_model_request(agent_id: str, body: LettaStreamingRequest,
                                runtime: RuntimeDep) -> dict[str, Any]:
    """The body the agent's next model call would post to its provider for this input
    (client tools offered, tool rules applied, the model ``override_model`` names), built
    as a run builds it and sent nowhere: nothing is stored."""
    return preview_thread(await live_agent(runtime, agent_id), body, runtime)


def preview_thread(agent: Thread, body: LettaStreamingRequest,
                   runtime: Runtime) -> dict[str, Any]:
    """The provider body of the thread's next model call for this input."""
    messages, _ = parse_input(body, agent)
    model = agent.model
    if body.override_model:
        try:
            model = resolve_model(body.override_model, **runtime.settings.model_options())
        except ConfigError as exc:
            raise HTTPException(404, detail=f"Model {body.override_model!r} not found: "
                                            f"{exc}") from exc
    tools = [client_tool(t.name, t.description, t.parameters) for t in body.client_tools or ()]
    skills = [ClientSkill(s.name, s.description, s.location) for s in body.client_skills or ()]
    return provider_body(model, next_request(agent, messages, tools, skills))


class GenerateRequest(Lenient):
    prompt: str = Field(min_length=1)
    system_prompt: str | None = None
    override_model: str | None = None
    response_schema: dict[str, Any] | None = None

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, prompt: str) -> str:
        if not prompt.strip():
            raise ValueError("prompt cannot be empty or whitespace-only")
        return prompt


class GenerateUsage(Response):
    message_type: Literal["usage_statistics"] = "usage_statistics"
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    step_count: int


class GenerateResponse(Response):
    content: str
    model: str
    usage: GenerateUsage


_BAD_GATEWAY: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorBody, "description": "LLM provider error"}}


@router.post("/generate", responses={**errors(404), **_BAD_GATEWAY},
             response_model=GenerateResponse)
async def generate_completion(agent_id: str, body: GenerateRequest,
                              runtime: RuntimeDep) -> dict[str, Any]:
    """One completion from the agent's model (or ``override_model``) for ``prompt``, with
    ``system_prompt`` or a plain default: none of the agent's memory, history or tools, and
    nothing stored. With ``response_schema``, the answer is forced through a tool taking
    that schema and ``content`` is its arguments as JSON."""
    agent = await live_agent(runtime, agent_id)
    model = agent.model
    if body.override_model:
        try:
            model = resolve_model(body.override_model, **runtime.settings.model_options())
        except ConfigError as exc:
            raise HTTPException(404, detail=f"Model {body.override_model!r} not found or "
                                            f"not accessible: {exc}") from exc
    request = completion_request(body.prompt, body.system_prompt, body.response_schema)
    text, usage = await complete(model, request)
    # Letta names the model as its llm_config does: without the provider's prefix.
    return {"content": text, "model": model.name.partition("/")[2] or model.name,
            "usage": {"message_type": "usage_statistics",
                      "completion_tokens": usage.output_tokens,
                      "prompt_tokens": usage.input_tokens,
                      "total_tokens": usage.total_tokens, "step_count": 1}}


# -- run one of its tools -----------------------------------------------------------------


class ToolExecuteRequest(Lenient):
    args: dict[str, Any] = Field(default_factory=dict)


class ToolExecutionResult(Response):
    status: Literal["success", "error"]
    func_return: Any = None
    agent_state: AgentState | None = None
    stdout: list[str] | None = None
    stderr: list[str] | None = None
    sandbox_config_fingerprint: str | None = None


@router.post("/tools/{tool_name}/run", tags=["tools"], responses=errors(404, 409),
             response_model=ToolExecutionResult)
async def run_tool_for_agent(
    agent_id: str, tool_name: str, runtime: RuntimeDep,
    body: ToolExecuteRequest = Body(default_factory=ToolExecuteRequest),  # noqa: B008
) -> dict[str, Any]:
    """Run one of the agent's tools with ``args``, as the agent would: source tools in the
    sandbox with the agent's variables, memory tools on its memory (stored). Nothing is
    added to its history. A failed call has ``status: error`` and no ``func_return``."""
    record = await agent_record(runtime, agent_id)
    agent = await live_agent(runtime, agent_id)
    tool = agent.tools.get(tool_name) if tool_name in record.tool_names else None
    if tool is None:
        raise HTTPException(404, detail=f"Tool {tool_name!r} not found or not attached to "
                                        f"agent {agent_id!r}")
    if tool.context_parameter is not None and agent.running:
        raise HTTPException(409, detail=f"agent {agent_id!r} is running; run {tool_name!r} "
                                        "on its memory when the run ends")
    call = ToolCall(new_call_id("toolcall"), tool_name, body.args)
    output = await execute_tool(call, body.args, {tool_name: tool}, agent)
    if tool.context_parameter is not None:
        await agent.save()  # what it changed in memory
    return {"status": "error" if output.is_error else "success",
            "func_return": None if output.is_error else output.text, "agent_state": None,
            "stdout": output.stdout, "stderr": output.stderr,
            "sandbox_config_fingerprint": None}
