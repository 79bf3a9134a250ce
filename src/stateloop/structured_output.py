"""Typed final answers: ``Agent(output_type=...)`` or ``agent.run(..., output_type=...)``.

A run that asks for an ``output_type`` gets its answer checked by pydantic, and
``result.output`` is the validated value. The model is asked for it in the best way it
has: a model with a JSON-schema mode (``json_schema_output``: the Chat Completions
adapter) gets ``response_format`` ``json_schema`` (``strict`` when the schema allows it)
and answers in text; any other (Claude, ``ScriptedModel``) is offered a ``final_result``
tool whose arguments are the answer, and must call a tool at each step.

An answer that fails validation goes back to the model with pydantic's errors (as the
final tool's result, or as a user message after a text answer), at most ``output_retries``
times; the next failure ends the run with stop reason ``invalid_output``.

Nothing here is a special case of the loop: the run's tools gain the final tool, its hooks
set the request's tool choice and see each response, and its continuation policy is
wrapped to decide, after each step, whether the answer is in (raising the ``Stop`` that
ends the run once the retries are spent).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError, model_validator

from .continuation import Continuation, Decision
from .errors import ConfigError
from .hooks import Hooks, call_hook
from .loop_config import Stop
from .messages import Message, ToolCall, user
from .tools import Tool

if TYPE_CHECKING:
    from .events import RunEnd
    from .llm.base import ModelRequest, ModelResponse, ToolSpec
    from .loop_config import LoopConfig

FINAL_TOOL = "final_result"
WRAPPED = "response"  # the one property a non-object answer is wrapped in
_MISSING = object()


def output_adapter(output_type: Any) -> TypeAdapter[Any]:
    """A pydantic adapter for ``output_type``; a type pydantic cannot check is a ConfigError."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        adapter.json_schema()
    except Exception as exc:  # pydantic's schema errors have no common base
        raise ConfigError(f"output_type must be a type pydantic can validate (a BaseModel, "
                          f"a dataclass, list[int], ...): {exc}") from exc
    return adapter


class StructuredOutput:
    """One run's typed answer: how it is asked for, checked and retried."""

    def __init__(self, output_type: Any, retries: int) -> None:
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ConfigError(f"output_retries must be a non-negative integer, not {retries!r}")
        self.adapter = output_adapter(output_type)
        # OpenAI takes [a-zA-Z0-9_-]{1,64} as a schema's name
        self.name = re.sub(r"[^a-zA-Z0-9_-]", "_", getattr(output_type, "__name__", "output"))
        schema = self.adapter.json_schema()
        defs = schema.pop("$defs", None)
        self.wrapped = schema.get("type") != "object"  # a tool's arguments are an object
        if self.wrapped:
            schema = {"type": "object", "properties": {WRAPPED: schema}, "required": [WRAPPED]}
        self.schema = {**schema, "$defs": defs} if defs else schema
        self.native = False  # the model's JSON-schema mode is used (set by ``apply``)
        self.retries = retries
        self.failures = 0
        self.value: Any = _MISSING
        self.text = ""  # the answer as JSON text
        self.error = ""  # the last validation error
        self.last: Message | None = None  # the last response's message

    def apply(self, config: LoopConfig) -> None:
        """Set up ``config`` (one run's) to ask for the answer and check it."""
        self.native = bool(getattr(config.model, "json_schema_output", False))
        config.continuation = _Checked(config.continuation, self)
        config.hooks = self._hooks(config.hooks)
        if self.native:
            config.model_settings = replace(config.model_settings,
                                            response_format=self.response_format())
        else:
            config.tools = {**config.tools, FINAL_TOOL: self._tool()}
        ended = config.on_end

        def on_end(end: RunEnd) -> None:
            end.data = None if self.value is _MISSING else self.value
            if ended is not None:
                ended(end)

        config.on_end = on_end

    def response_format(self) -> dict[str, Any]:
        """OpenAI's ``json_schema`` response format; strict when every field is required."""
        strict = strict_schema(self.schema)
        return {"type": "json_schema",
                "json_schema": {"name": self.name[:64], "schema": strict or self.schema,
                                "strict": strict is not None}}

    def check(self, data: Any) -> str | None:
        """Validate an answer (parsed JSON); the error to send back, or None once it is in."""
        if self.wrapped:
            if not isinstance(data, dict) or WRAPPED not in data:
                self.error = f"the answer must be an object with one field, {WRAPPED!r}"
                return self.error
            data = data[WRAPPED]
        try:
            value = self.adapter.validate_python(data)
        except ValidationError as exc:
            self.error = str(exc)
            return self.error
        self.value, self.text = value, self.adapter.dump_json(value).decode()
        return None

    def check_text(self, text: str) -> str | None:
        """Validate a text answer (JSON-schema mode)."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.error = f"the answer is not valid JSON: {exc}"
            return self.error
        return self.check(data)

    def retry(self, inject: Message | None) -> Decision:
        """Go on with the validation error in front of the model; after the last try, the
        ``Stop`` (raised from the continuation policy, the loop ends the run with it)."""
        self.failures += 1
        if self.failures > self.retries:
            raise Stop("invalid_output", f"the final answer failed validation {self.failures} "
                       f"times (output_retries={self.retries}); last error: {self.error}")
        return Decision(True, inject)

    def _tool(self) -> Tool:
        async def final_result(data: dict[str, Any]) -> str:
            error = self.check(data)
            if error is None:
                return "Final result received."
            return (f"Validation failed: {error}\nFix the errors and call {FINAL_TOOL} "
                    "again.")

        return Tool(FINAL_TOOL, f"Give your final answer ({self.name}). Call this once "
                    "you have the answer; its arguments are the answer.", self.schema,
                    final_result, arguments_model=_Answer, timeout=None)

    def _hooks(self, given: Hooks | None) -> Hooks:
        hooks = replace(given) if given is not None else Hooks()
        before, after = hooks.before_model_call, hooks.after_model_call

        async def before_model_call(request: ModelRequest) -> ModelRequest:
            if before is not None:
                request = await call_hook(before, request) or request
            offered = any(spec.name == FINAL_TOOL for spec in request.tools)
            if offered and request.tool_choice == "auto" and request.forced_tool is None:
                request.tool_choice = "required"  # an answer comes as a call
            return request

        async def after_model_call(response: ModelResponse) -> ModelResponse:
            if after is not None:
                response = await call_hook(after, response) or response
            self.last = response.message
            return response

        hooks.before_model_call, hooks.after_model_call = before_model_call, after_model_call
        return hooks


class _Answer(BaseModel):
    """The final tool's arguments, whole: the answer is checked by ``StructuredOutput``."""

    data: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        return {"data": value}


class _Checked:
    """A continuation policy that ends the run once the typed answer is in."""

    def __init__(self, inner: Continuation, output: StructuredOutput) -> None:
        self.inner, self.out = inner, output
        self.name = inner.name

    def tool_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        return self.inner.tool_specs(specs)

    def arguments(self, call: ToolCall) -> dict[str, Any]:
        return self.inner.arguments(call)

    def decide(self, calls: list[ToolCall], results: list[Message]) -> Decision:
        out = self.out
        if any(call.name == FINAL_TOOL for call in calls):
            # The tool's result already tells the model what was wrong.
            return Decision(False) if out.value is not _MISSING else out.retry(None)
        if calls:
            return self.inner.decide(calls, results)
        if out.native:
            error = out.check_text(out.last.text if out.last is not None else "")
            if error is None:
                return Decision(False)
            return out.retry(user(f"Your answer failed validation: {error}\nAnswer again "
                                  "with JSON that matches the schema."))
        out.error = f"the answer was text, not a call to {FINAL_TOOL}"
        return out.retry(user(f"Give your final answer by calling {FINAL_TOOL}."))

    def output(self, messages: list[Message]) -> str:
        return self.out.text if self.out.value is not _MISSING else self.inner.output(messages)


def strict_schema(schema: Any) -> Any:
    """``schema`` as OpenAI's strict mode takes it (every object closed), or None when an
    object has an optional field, which strict mode cannot express."""
    if isinstance(schema, list):
        items = [strict_schema(item) for item in schema]
        return None if any(item is None for item in items) else items
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "default":
            continue
        if isinstance(value, dict | list) and key not in ("enum", "const", "required"):
            value = (_strict_properties(value) if key == "properties" and isinstance(value, dict)
                     else strict_schema(value))
            if value is None:
                return None
        out[key] = value
    if out.get("type") == "object" and "properties" in out:
        if set(out.get("required", [])) != set(out["properties"]):
            return None
        out["additionalProperties"] = False
    return out


def _strict_properties(properties: dict[str, Any]) -> dict[str, Any] | None:
    out = {}
    for name, value in properties.items():
        strict = strict_schema(value)
        if strict is None:
            return None
        out[name] = strict
    return out

