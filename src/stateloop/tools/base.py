"""``@tool``: a Python function becomes a tool with a JSON schema and validated arguments."""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..errors import ToolDefinitionError
from ..llm.base import ToolSpec
from ..messages import ToolCall
from .docstrings import parse_docstring

DEFAULT_TIMEOUT = 60.0


@dataclass(slots=True)
class ToolContext:
    """Injected into a tool that declares a parameter of this type; not part of its schema."""

    agent: Any  # the running ``stateloop.Agent``
    call: ToolCall


class Tool:
    """A callable the model may use. Build one with ``@tool`` or ``Tool.from_function``."""

    __slots__ = (
        "arguments_model",
        "context_parameter",
        "description",
        "function",
        "is_async",
        "name",
        "parameters",
        "requires_approval",
        "return_char_limit",
        "sequential",
        "timeout",
    )

    def __init__(self, name: str, description: str, parameters: dict[str, Any],
                 function: Callable[..., Any] | None, *,
                 arguments_model: type[BaseModel] | None = None,
                 context_parameter: str | None = None, sequential: bool = False,
                 timeout: float | None = DEFAULT_TIMEOUT, requires_approval: bool = False,
                 return_char_limit: int | None = None) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.function = function
        self.is_async = function is not None and inspect.iscoroutinefunction(function)
        self.sequential = sequential  # never runs alongside other calls of the same step
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.return_char_limit = return_char_limit  # longer returns are cut, with a note
        self.arguments_model = arguments_model
        self.context_parameter = context_parameter

    @classmethod
    def from_function(cls, function: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None, sequential: bool = False,
                      timeout: float | None = DEFAULT_TIMEOUT,
                      requires_approval: bool = False) -> Tool:
        """Derive name, description and schema from the function's signature and docstring."""
        tool_name = name or function.__name__
        summary, param_docs = parse_docstring(function.__doc__)
        model, context_parameter = _arguments_model(function, tool_name, param_docs)
        return cls(tool_name, description if description is not None else summary,
                   _clean_schema(model), function, arguments_model=model,
                   context_parameter=context_parameter, sequential=sequential, timeout=timeout,
                   requires_approval=requires_approval)

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, as if undecorated."""
        if self.function is None:
            raise TypeError(f"tool {self.name!r} has no Python function (it runs elsewhere)")
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None, sequential: bool = False,
         timeout: float | None = DEFAULT_TIMEOUT,
         requires_approval: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(function: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None, sequential: bool = False,
         timeout: float | None = DEFAULT_TIMEOUT,
         requires_approval: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a sync or async function a tool: ``@tool`` or ``@tool(timeout=5, sequential=True)``."""

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(fn, name=name, description=description, sequential=sequential,
                                  timeout=timeout, requires_approval=requires_approval)

    return decorate(function) if function is not None else decorate


def _arguments_model(function: Callable[..., Any], tool_name: str,
                     param_docs: dict[str, str]) -> tuple[type[BaseModel], str | None]:
    hints = _type_hints(function, tool_name)

    fields: dict[str, Any] = {}
    context_parameter = None
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is *args/**kwargs; a tool needs "
                f"named parameters with type hints so the model can be given a JSON schema")
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type hint; add one "
                f"(e.g. '{param.name}: str') so it can become a JSON schema")
        annotation = hints[param.name]
        if annotation is ToolContext:
            context_parameter = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=param_docs.get(param.name)))
    try:
        model = create_model(f"{tool_name}_arguments", __base__=_arguments_base(), **fields)
        model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: its parameters cannot become a JSON schema: {exc}") from exc
    return model, context_parameter


@functools.cache
def _arguments_base() -> type[BaseModel]:
    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")  # an unknown argument is named, not dropped

    return Arguments


def _type_hints(function: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    """Resolve hints; string hints naming local classes are looked up in the callers' frames,
    where a tool defined inside a function finds them."""
    frame = sys._getframe(1)
    error: Exception | None = None
    for _ in range(8):
        try:
            return typing.get_type_hints(function, localns=frame.f_locals if frame else None,
                                         include_extras=True)
        except NameError as exc:
            error = exc
            frame = frame.f_back if frame else None  # type: ignore[assignment]
        except Exception as exc:
            error = exc
            break
    raise ToolDefinitionError(
        f"tool {tool_name!r}: cannot resolve the type hints of its parameters: {error}")


def _clean_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Pydantic's schema without the titles, which only cost the model tokens."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    schema["additionalProperties"] = False
    return schema
