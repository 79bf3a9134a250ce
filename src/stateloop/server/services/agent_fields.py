"""Letta's agent fields checked and turned into agent options: ``model_settings``
(temperature, output tokens, reasoning, parallel calls) and ``response_format`` in the
provider's terms, ``embedding`` (a model of a configured provider), ``initial_message_sequence`` and
duplicate ``tool_rules``. What cannot be honoured is a 422 naming the field, never dropped in
silence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import HTTPException

from ...llm.base import NO_SETTINGS, ModelSettings
from ...memory.embedding_models import Embedders
from ...memory.embeddings import EmbeddingError, EmbeddingUnavailable
from ...messages import Message, assistant, system, user
from ..models.requests import MessageCreate

_SETTINGS = ("max_output_tokens", "parallel_tool_calls", "temperature", "reasoning",
             "thinking", "thinking_config", "response_format", "response_schema")
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

_MAKERS = {"user": user, "system": system, "assistant": assistant}


def unprocessable(field: str, problem: object) -> HTTPException:
    """A 422 that names the field, in FastAPI's error shape."""
    return HTTPException(422, detail=[{"loc": ["body", *field.split(".")],
                                       "msg": str(problem), "type": "value_error"}])


def model_settings(settings: dict[str, Any] | None, response_format: Any, provider: str,
                   current: ModelSettings = NO_SETTINGS) -> dict[str, Any]:
    """The agent options Letta's ``model_settings`` and ``response_format`` ask for:
    ``max_tokens``, ``parallel_tool_calls`` and the ``model_settings`` the model is called
    with. A value that is invalid, or that the agent's provider has no form for, is a 422
    naming it. ``model_settings`` replaces the sampling settings; a response format given
    neither way is kept."""
    options: dict[str, Any] = {}
    sampling: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        field = f"model_settings.{key}"
        if value is None or key == "provider_type":  # the provider comes from the model handle
            continue
        if key in ("response_format", "response_schema"):  # Gemini's settings say schema
            check_response_format(value, provider, field)
            response_format = value  # over the top-level one
        elif key == "max_output_tokens":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise unprocessable(field, "max_output_tokens must be a positive integer")
            options["max_tokens"] = value
        elif key == "parallel_tool_calls":
            if not isinstance(value, bool):
                raise unprocessable(field, "parallel_tool_calls must be true or false")
            options["parallel_tool_calls"] = value
        elif key == "temperature":
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    0 <= value <= 2):
                raise unprocessable(field, "temperature must be a number from 0 to 2")
            sampling["temperature"] = float(value)
        elif key == "reasoning":
            sampling["reasoning_effort"] = _effort(value, provider, field)
        elif key == "thinking":
            sampling["thinking_budget"] = _thinking(value, provider, field)
        elif key == "thinking_config":
            sampling["thinking_budget"] = _gemini_thinking(value, provider, field)
        else:
            raise unprocessable(field, f"{key} is not supported by this server; it applies "
                                       f"{', '.join(_SETTINGS)}")
    wire_format = check_response_format(response_format, provider)
    if settings is None and response_format is None:
        return options
    base = current if settings is None else ModelSettings(
        response_format=current.response_format)
    if response_format is not None:
        base = replace(base, response_format=wire_format)
    options["model_settings"] = replace(base, **sampling)
    return options


def _effort(value: Any, provider: str, field: str) -> str:
    effort = value.get("reasoning_effort") if isinstance(value, dict) else None
    if effort not in _EFFORTS:
        raise unprocessable(field, f"reasoning.reasoning_effort must be one of "
                                   f"{', '.join(_EFFORTS)}")
    if provider == "anthropic":
        raise unprocessable(field, "Claude reasons by a thinking budget: give "
                                   "model_settings.thinking, not reasoning")
    return str(effort)


def _thinking(value: Any, provider: str, field: str) -> int | None:
    kind = value.get("type", "enabled") if isinstance(value, dict) else None
    budget = value.get("budget_tokens", 1024) if isinstance(value, dict) else None
    if kind not in ("enabled", "disabled") or isinstance(budget, bool) or not isinstance(
            budget, int) or budget < 1024:
        raise unprocessable(field, "thinking must be {\"type\": \"enabled\" or \"disabled\", "
                                   "\"budget_tokens\": an integer of at least 1024}")
    if provider == "google_ai":
        raise unprocessable(field, "Gemini's thinking is model_settings.thinking_config")
    if provider != "anthropic":
        raise unprocessable(field, "thinking budgets are Claude's; OpenAI's models take "
                                   "model_settings.reasoning.reasoning_effort")
    return budget if kind == "enabled" else None


def _gemini_thinking(value: Any, provider: str, field: str) -> int:
    """Gemini's ``thinking_config`` as a thinking budget; thought summaries are always
    streamed when the model thinks, so only a budget of 0 may leave them out."""
    budget = value.get("thinking_budget", 1024) if isinstance(value, dict) else None
    thoughts = value.get("include_thoughts", True) if isinstance(value, dict) else None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < -1 or (
            not isinstance(thoughts, bool)):
        raise unprocessable(field, "thinking_config must be {\"thinking_budget\": an integer "
                                   "of at least -1 (dynamic), \"include_thoughts\": true or "
                                   "false}")
    if provider != "google_ai":
        raise unprocessable(field, "thinking_config is Gemini's; Claude takes "
                                   "model_settings.thinking, OpenAI's models "
                                   "model_settings.reasoning.reasoning_effort")
    if not thoughts and budget != 0:
        raise unprocessable(field, "thought summaries come with every thinking response; "
                                   "turn thinking off with thinking_budget 0")
    return budget


def check_response_format(value: Any, provider: str,
                          field: str = "response_format") -> dict[str, Any] | None:
    """Letta's response format as the provider is sent it (``None`` for plain text, the
    default). JSON formats need a model with a JSON mode: Claude's agents are refused."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind not in ("json_object", "json_schema"):
        raise unprocessable(field, "response_format type must be 'text', 'json_object' or "
                                   "'json_schema'")
    if provider == "anthropic":
        raise unprocessable(field, f"response_format {kind!r} needs a model with a JSON mode "
                                   "(an OpenAI-compatible one); Claude answers in text")
    if kind == "json_object":
        return {"type": "json_object"}
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        raise unprocessable(f"{field}.json_schema", "json_schema must be an object with a "
                                                    "'schema' (a JSON schema object)")
    return {"type": "json_schema", "json_schema": {"name": "response", **spec}}


async def embedding_config(embedders: Embedders, handle: str | None,
                           config: dict[str, Any] | None, chunk_size: int | None = None, *,
                           default: bool = False) -> dict[str, Any]:
    """Letta's ``embedding_config`` for what was asked: a handle or a config, of a provider
    this server has configured (a model whose size is not known is measured by one call).
    Nothing asked: ``{}`` (an agent's, shown as null), or with ``default`` the default's.
    What cannot be served is a 422 naming the field and the setting to make."""
    if handle is None and config is None and not default:
        return {}
    field = "embedding" if handle else "embedding_config"
    try:
        found = embedders.config(handle, config, chunk_size=chunk_size)
        return await embedders.measured(found)
    except (EmbeddingUnavailable, EmbeddingError) as exc:
        raise unprocessable(field, exc) from exc


def initial_messages(sequence: list[MessageCreate] | None) -> list[Message]:
    """The messages a new agent starts with after its system prompt."""
    return [_MAKERS[spec.role](spec.text) for spec in sequence or []]


def merged_rules(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool rules (as parsed, then dumped) with repeats dropped: the first is kept."""
    kept: list[dict[str, Any]] = []
    for rule in rules:
        if rule not in kept:
            kept.append(rule)
    return kept
