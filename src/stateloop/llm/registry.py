"""Model strings such as ``"openai/gpt-4o-mini"`` or ``"groq/llama-3.3-70b-versatile"``
resolved to provider adapters, imported lazily."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ConfigError
from . import providers, registered
from .base import Model

# provider prefix -> "module:class"; the module is imported only when the provider is used.
PROVIDERS: dict[str, str] = {
    "openai": "stateloop.llm.openai:OpenAIModel",
    "anthropic": "stateloop.llm.anthropic:AnthropicModel",
    "demo": "stateloop.llm.demo:DemoModel",  # demo/echo: no provider needed
}

# What ``isinstance(model, Model)`` checks, at a fraction of a runtime protocol check's cost.
_MODEL_ATTRIBUTES = ("stream", "name", "context_window", "max_output_tokens")


def resolve_model(model: str | Model, **options: Any) -> Model:
    """A ``Model`` for ``model``: an object is returned as is, a string names provider and model."""
    if not isinstance(model, str):
        if not all(hasattr(model, attr) for attr in _MODEL_ATTRIBUTES):
            raise ConfigError(f"model must be a string like 'openai/gpt-4o-mini' or a Model, "
                              f"not {type(model).__name__}")
        return model
    provider, _, name = model.partition("/")
    if name and provider not in PROVIDERS and provider in providers.CATALOGUE:
        # Another provider of the catalogue: its endpoint and key come from its own
        # variables, never from ``base_url``/``api_key`` (those are the openai/ endpoint's).
        return providers.chat_model(provider, name, **options)
    if name and provider not in PROVIDERS:
        found = registered.resolve(provider, name, **options)  # added over /v1/providers
        if found is not None:
            return found
    if provider not in PROVIDERS or not name:
        raise ConfigError(
            f"unknown model {model!r}: expected 'PROVIDER/MODEL' with PROVIDER one of "
            f"{', '.join(sorted({*PROVIDERS, *providers.served()}))} (any other "
            f"OpenAI-compatible server: 'openai/MODEL' with its URL: base_url=..., the CLI's "
            f"--base-url or OPENAI_BASE_URL)")
    module_name, _, class_name = PROVIDERS[provider].partition(":")
    module = importlib.import_module(module_name)
    adapter: Model = getattr(module, class_name)(name, **options)
    return adapter
