"""``demo/echo``: a model that needs no provider. It answers every message with what the user
said, so a server, the CLI and the web page can be tried before a provider is set up.

It is chosen only by name (``--model demo/echo``), never in place of a model that cannot
be called."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..errors import ConfigError
from ..events import TextDelta
from ..messages import Message, TextPart, Usage
from .base import ModelRequest, ModelResponse, StreamItem
from .models import model_limits

MODELS = ("echo",)


class DemoModel:
    """``demo/echo``: replies "You said: ..." with the last user message, calls no tool."""

    provider = "demo"

    def __init__(self, name: str, *, context_window: int | None = None,
                 max_output_tokens: int | None = None, **_options: Any) -> None:
        if name not in MODELS:
            raise ConfigError(f"unknown model 'demo/{name}': the demo provider has one model, "
                              "demo/echo (it answers with what you said)")
        self.name = f"{self.provider}/{name}"
        limits = model_limits(name, context_window=context_window,
                              max_output_tokens=max_output_tokens)
        self.context_window = limits.context_window
        self.max_output_tokens: int | None = limits.max_output_tokens

    def __repr__(self) -> str:
        return f"DemoModel({self.name!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        said = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
        text = f"You said: {said}" if said else "Say something and I will repeat it."
        yield TextDelta(text)
        used = sum(m.token_count or len(m.text) // 4 + 4 for m in request.messages)
        yield ModelResponse(Message("assistant", [TextPart(text)]),
                            Usage(used, len(text) // 4 + 1), "stop", self.name)
