"""``stateloop models``: the models this environment can use, by handle with its context
window, and for every other provider of the catalogue why not (the variable to set)."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

import typer

from ..llm.listing import TIMEOUT, UNLISTED, Listed, list_all
from ..llm.providers import CATALOGUE
from .console import out
from .exits import handled


@handled
def list_models(
    timeout: Annotated[float, typer.Option(
        min=0.1, max=60.0, help="Seconds to wait for each provider's model listing.")] = TIMEOUT,
) -> None:
    """List the usable models (handle, context window), and why each other provider is not
    usable. A provider whose listing fails is reported, not fatal."""
    env = dict(os.environ)
    models, failures = asyncio.run(list_all(env, timeout=timeout))
    by_provider: dict[str, list[Listed]] = {}
    for model in models:
        by_provider.setdefault(model.provider, []).append(model)
    usable: list[str] = []
    unusable: list[str] = []
    for name in sorted(CATALOGUE):
        provider = CATALOGUE[name]
        problem = provider.missing(env)
        if problem is not None:
            unusable.append(f"{name}: {problem}")
        elif name in failures:
            usable.append(f"{name}: configured; its model listing failed ({failures[name]}): "
                          f"name a model as {name}/MODEL")
        elif provider.wire == "embeddings":
            usable.append(f"{name}: embeddings only (the offline MiniLM)")
        elif name in UNLISTED:
            usable.append(f"{name}: configured; name a model as {name}/MODEL")
        else:
            usable.append(f"{name}: {len(by_provider.get(name, []))} models")
    _say("Usable:")
    for line in usable:
        _say(f"  {line}")
    for model in sorted(models, key=lambda m: m.handle):
        kind = "embedding" if model.embedding else f"{model.context_window} tokens"
        _say(f"    {model.handle}  ({kind})")
    _say("Not usable:")
    for line in unusable:
        _say(f"  {line}")


def _say(text: str) -> None:
    out.print(text, markup=False, highlight=False, soft_wrap=True)
