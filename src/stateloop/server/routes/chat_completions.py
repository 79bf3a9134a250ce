"""``POST /v1/chat/completions`` and ``/v1/voice-beta/{agent_id}/chat/completions``: an
OpenAI client talking to a stateful agent, whose id is the ``model``.

As in Letta, the agent keeps the conversation: of the ``messages`` sent, only the last user
message is new input, and it goes through the agent's ordinary send (memory, tools, history,
a recorded run queued behind the agent's others). Errors carry Letta's ``detail`` and
OpenAI's ``error`` object, so either kind of client reads them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...store import NotFoundError
from ..deps import RuntimeDep
from ..models.content import ImageContent
from ..models.requests import LettaRequest, TextContent, errors
from ..permissions import in_project
from ..run_errors import error_response, failed
from ..services import openai_chat
from ..services.runtime import Runtime
from .messages import gather, start_run

router = APIRouter(prefix="/v1", tags=["chat"])

MAX_MESSAGES = 10_000  # the conversation an OpenAI client resends each turn


class ChatMessage(BaseModel):
    """One of OpenAI's chat messages; only a user message's text is read."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat completion request. Sampling options are accepted and, as in Letta,
    left to the agent's own model settings."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(description="the id of the agent to talk to ('agent-...')")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    n: int | None = Field(1, ge=1, le=1)
    max_tokens: int | None = None
    user: str | None = None


class ChatCompletionMessage(BaseModel):
    role: Literal["assistant"]
    content: str | None
    refusal: str | None = None


class Choice(BaseModel):
    index: int
    finish_reason: Literal["stop", "length"]
    message: ChatCompletionMessage
    logprobs: None = None


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """OpenAI's ``chat.completion``: the whole answer."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage | None = None
    system_fingerprint: str | None = None


ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": ChatCompletion, "description": "The answer, or with ``stream: true`` "
          "Server-Sent Events of chat.completion.chunk objects",
          "content": {"text/event-stream": {}}}, **errors(400, 404)}


def openai_error(status: int, message: str, param: str | None,
                 kind: str = "invalid_request_error") -> JSONResponse:
    """Letta's ``{"detail"}`` with OpenAI's ``{"error"}`` beside it."""
    return JSONResponse({"detail": message, "error": {
        "message": message, "type": kind, "param": param, "code": None}}, status_code=status)


class ChatError(Exception):
    """Input refused before any run starts: its status, message and the field it names."""

    def __init__(self, status: int, message: str, param: str | None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def user_input(messages: list[ChatMessage]) -> str | list[TextContent | ImageContent]:
    """The last user message's content: text, or its text parts."""
    index, last = next(((i, m) for i, m in reversed(list(enumerate(messages)))
                        if m.role == "user"), (-1, None))
    if last is None:
        raise ChatError(400, "No user message found in the request. Please include at least "
                        "one message with role='user'.", "messages")
    content = last.content
    if not content:
        raise ChatError(400, f"messages[{index}].content: the user message is empty",
                        f"messages[{index}].content")
    if isinstance(content, str):
        return content
    parts: list[TextContent | ImageContent] = []
    for n, part in enumerate(content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ChatError(400, f"messages[{index}].content[{n}]: only text parts are read "
                            "(type 'text' with a string 'text')", f"messages[{index}].content")
        parts.append(TextContent(text=part["text"]))
    return parts


async def answer(runtime: Runtime, agent_id: str, body: ChatCompletionRequest
                 ) -> JSONResponse | StreamingResponse:
    """The agent's answer to the last user message, whole or streamed."""
    try:
        text = user_input(body.messages)
        if not await in_project(runtime.store, "agent_id", agent_id):
            raise NotFoundError(f"agent with id {agent_id!r} not found")
        agent = await runtime.agent(agent_id)  # 404 for an unknown id
    except ChatError as exc:
        return openai_error(exc.status, exc.message, exc.param)
    except HTTPException as exc:
        return openai_error(exc.status_code, str(exc.detail), "model")
    except NotFoundError as exc:
        return openai_error(404, str(exc), "model")
    handle = agent.model.name
    model = handle.partition("/")[2] or handle  # as the agent's llm_config names it
    stream = bool(body.stream)
    # The agent is taken again once the run's place in its queue is (on a fleet, after the
    # runs ahead of it, wherever they ran).
    channel = await start_run(runtime, agent_id, LettaRequest(input=text),
                              stream_tokens=stream)
    completion_id = f"chatcmpl-{channel.run_id}"
    if stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        frames = channel.follow(0, ping_interval=runtime.settings.ping_interval)
        return StreamingResponse(
            openai_chat.chunks(frames, completion_id, model, include_usage=include_usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    gathered = await gather(channel.follow(0), ["assistant_message"])
    error = gathered.error.get("message") if gathered.error is not None else None
    stop_reason = str(gathered.stop.get("stop_reason"))
    if failed(stop_reason, error):
        assert error is not None
        return error_response(stop_reason, error, channel.run_id)
    assistant = openai_chat.Assistant()
    for frame in gathered.messages:
        assistant.add(frame)
    return JSONResponse(openai_chat.completion(completion_id, model, "".join(assistant.text),
                                               stop_reason, gathered.usage))


NOT_AN_AGENT = ("For this endpoint, the 'model' field should contain an agent ID (format: "
                "'agent-...'). Received: '{}'")


@router.post("/chat/completions", response_model=None, responses=ANSWERS)
async def create_chat_completion(body: ChatCompletionRequest, runtime: RuntimeDep
                                 ) -> JSONResponse | StreamingResponse:
    """Talk to the agent whose id is ``model``: OpenAI's ``chat.completion``, or with
    ``stream: true`` its ``chat.completion.chunk`` events ending with ``[DONE]``."""
    if not body.model.startswith("agent-"):
        return openai_error(400, NOT_AN_AGENT.format(body.model[:200]), "model")
    return await answer(runtime, body.model, body)


@router.post("/voice-beta/{agent_id}/chat/completions", response_model=None,
             responses={200: {"description": "Server-Sent Events of chat.completion.chunk "
                              "objects", "content": {"text/event-stream": {}}},
                        **errors(400, 404)})
async def create_voice_chat_completions(
        agent_id: str, runtime: RuntimeDep,
        body: Annotated[dict[str, Any], Body()]) -> JSONResponse | StreamingResponse:
    """The voice path: the agent's answer streamed as chat completion chunks (voice
    platforms such as VAPI send extra fields and a ``model`` of their own, not read). An
    agent with ``enable_sleeptime`` has its memory agent work after the turn, in the
    background, as after any send."""
    try:
        request = ChatCompletionRequest.model_validate(
            {**body, "model": agent_id, "stream": True, "n": 1})
    except ValidationError as exc:  # FastAPI's 422, as the body had been declared
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])}
                                      for e in exc.errors(include_url=False)]) from exc
    return await answer(runtime, agent_id, request)
