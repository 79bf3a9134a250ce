"""Letta's agent fields that stateloop honours only in part: ``model_settings`` (output
tokens, parallel calls), ``response_format`` (plain text), ``embedding`` (the server's
embedder), ``initial_message_sequence`` and duplicate ``tool_rules``. What cannot be honoured
is a 422 naming the field, never dropped in silence."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from ..memory.embeddings import MiniLMEmbedder
from ..messages import Message, assistant, system, user
from .schemas import MessageCreate

_SETTINGS = {"max_output_tokens": "max_tokens", "parallel_tool_calls": "parallel_tool_calls"}
# OpenAI's embedding models and their sizes; another model's size is known after its first call.
_OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
                "text-embedding-ada-002": 1536}
_MAKERS = {"user": user, "system": system, "assistant": assistant}


def unprocessable(field: str, problem: object) -> HTTPException:
    """A 422 that names the field, in FastAPI's error shape."""
    return HTTPException(422, detail=[{"loc": ["body", *field.split(".")],
                                       "msg": str(problem), "type": "value_error"}])


def model_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """The agent options Letta's ``model_settings`` ask for (``max_tokens``,
    ``parallel_tool_calls``); a setting stateloop cannot apply yet is a 422 naming it."""
    options: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        field = f"model_settings.{key}"
        if value is None or key == "provider_type":  # the provider comes from the model handle
            continue
        if key == "response_format":
            check_response_format(value, field)
        elif key == "max_output_tokens":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise unprocessable(field, "max_output_tokens must be a positive integer")
            options["max_tokens"] = value
        elif key == "parallel_tool_calls":
            if not isinstance(value, bool):
                raise unprocessable(field, "parallel_tool_calls must be true or false")
            options["parallel_tool_calls"] = value
        else:
            raise unprocessable(field, f"{key} is not supported by this server; it applies "
                                       f"{', '.join(_SETTINGS)} (and response_format 'text')")
    return options


def check_response_format(value: Any, field: str = "response_format") -> None:
    """Plain text (the default) is what every agent answers in; other formats are a 422."""
    kind = value.get("type") if isinstance(value, dict) else None
    if value is not None and kind != "text":
        raise unprocessable(field, f"response_format {kind!r} is not supported by this "
                                   "server; only 'text' (the default)")


def embedding_config(server_embedding: str, handle: str | None,
                     config: dict[str, Any] | None) -> dict[str, Any]:
    """Letta's ``embedding_config`` for an agent that asked for an embedding (``{}`` for one
    that did not). Archival memory uses the server's embedder: asking for another is a 422."""
    if handle is None and config is None:
        return {}
    provider, _, model = server_embedding.rpartition("/")
    if not provider:  # "minilm": the offline model stateloop ships
        provider, model = "hugging-face", MiniLMEmbedder.MODEL
    served = f"{provider}/{model}"
    config = config or {}
    asked = handle or config.get("handle") or config.get("embedding_model")
    if asked not in (served, model, server_embedding):
        field = "embedding" if handle else "embedding_config"
        raise unprocessable(field, f"this server embeds with {served!r} (STATELOOP_EMBEDDING);"
                                   f" ask for it or leave {field} out, not {asked!r}")
    dim = (MiniLMEmbedder.DIM if provider == "hugging-face"
           else _OPENAI_DIMS.get(model) or config.get("embedding_dim") or 1536)
    return {"embedding_endpoint_type": provider, "embedding_model": model,
            "embedding_dim": dim, "embedding_chunk_size": 300, "handle": served}


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
