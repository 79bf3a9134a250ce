"""The provider catalogue: every provider Letta 0.16.8 names, with its handle prefix, wire
format, the environment variables that configure it, its default endpoint and its quirks,
and the ``Model`` a handle of it resolves to.

Letta's handle is ``PROVIDER/MODEL`` with Letta's provider name (``groq``, ``together``,
``google_ai``, ``lmstudio_openai``); the variables are those Letta's settings read. A
provider that speaks Chat Completions is called through ``OpenAIModel``, one that speaks
Anthropic Messages through ``AnthropicModel``, Google's Gemini API through
``stateloop.llm.google``. A provider whose variables are not set still resolves, as
``openai/`` without a key does: its model answers each call with an
``AuthenticationError`` naming the variable to set.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from ..errors import AuthenticationError, ConfigError
from .base import Model, ModelRequest, StreamItem
from .models import model_limits

Wire = Literal["chat", "anthropic", "gemini", "embeddings", "none"]
Environment = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider: how its handles are called and which variables configure it."""

    name: str  # the handle prefix, Letta's provider name
    wire: Wire  # "chat": Chat Completions; "none": not served (``not_served`` says why)
    key_env: str | None = None  # the key's variable; None: the provider takes no key
    base_env: str | None = None  # the variable that moves (or, without a default, sets) it
    base_url: str | None = None  # the public endpoint; None: ``base_env`` must be set
    add_v1: bool = False  # ``/v1`` is appended to the variable's URL (as Letta does)
    key_always: bool = False  # the key is needed at an operator's URL too (Azure)
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    headers: tuple[tuple[str, str], ...] = ()  # (header, variable) sent when the variable is set
    embeddings: bool = False  # has embedding models (Gemini's format for wire "gemini")
    tool_call_ids: Literal["openai", "mistral"] = "openai"  # Mistral's: nine alphanumerics
    not_served: str | None = None

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable this provider reads."""
        names = [self.key_env, self.base_env, *(variable for _, variable in self.headers)]
        if self.name == "azure":
            names.append("AZURE_API_VERSION")
        return tuple(name for name in names if name)

    def missing(self, env: Environment | None = None) -> str | None:
        """What to set before this provider can be called, or None when it can."""
        env = os.environ if env is None else env
        if self.not_served:
            return f"{self.name} is not served: {self.not_served}"
        needed = []
        own = not (self.base_env and env.get(self.base_env))
        # The provider's own endpoint needs its key; a server the operator names may take none.
        if self.key_env and (own or self.key_always) and not env.get(self.key_env):
            needed.append(self.key_env)
        if self.base_env and not self.base_url and own:
            needed.append(self.base_env)
        if not needed:
            return None
        return f"set {' and '.join(needed)} to use {self.name}/ models"

    def endpoint(self, env: Environment | None = None) -> Endpoint:
        """Where this provider is called, as the environment configures it."""
        env = os.environ if env is None else env
        given = env.get(self.base_env) if self.base_env else None
        base = (given or self.base_url or "").rstrip("/")
        if given and self.add_v1 and not base.endswith("/v1"):
            base += "/v1"
        key = env.get(self.key_env) if self.key_env else None
        headers = {header: env[variable] for header, variable in self.headers
                   if env.get(variable)}
        return Endpoint(base, key or None, headers, public=not given)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A provider's base URL and key; ``public`` when it is the provider's own address
    (which may be shown to clients), not one the operator set."""

    base_url: str
    api_key: str | None
    headers: dict[str, str]
    public: bool


def _chat(name: str, key_env: str | None, base_url: str | None, **quirks: Any) -> Provider:
    # Where Letta reads no variable for the URL, ``NAME_BASE_URL`` moves it (a proxy, a test).
    quirks.setdefault("base_env", f"{name.upper()}_BASE_URL")
    return Provider(name, "chat", key_env, base_url=base_url, **quirks)


def _off(name: str, why: str, key_env: str | None = None) -> Provider:
    return Provider(name, "none", key_env, not_served=why)


CATALOGUE: dict[str, Provider] = {p.name: p for p in (
    Provider("openai", "chat", "OPENAI_API_KEY", "OPENAI_BASE_URL",
             "https://api.openai.com/v1", embeddings=True),
    Provider("anthropic", "anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
             "https://api.anthropic.com"),
    Provider("azure", "chat", "AZURE_API_KEY", "AZURE_BASE_URL", key_always=True,
             embeddings=True),
    _chat("baseten", "BASETEN_API_KEY", "https://inference.baseten.co/v1",
          max_tokens_field="max_tokens"),
    _chat("cerebras", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
    _chat("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com/v1"),
    _chat("fireworks", "FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1",
          base_env="FIREWORKS_API_BASE", max_tokens_field="max_tokens", embeddings=True),
    Provider("google_ai", "gemini", "GEMINI_API_KEY", "GEMINI_BASE_URL",
             "https://generativelanguage.googleapis.com", embeddings=True),
    _chat("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    _chat("lmstudio_openai", None, None, base_env="LMSTUDIO_BASE_URL", add_v1=True,
          embeddings=True),
    Provider("minimax", "anthropic", "MINIMAX_API_KEY", "MINIMAX_BASE_URL",
             "https://api.minimax.io/anthropic"),
    _chat("mistral", "MISTRAL_API_KEY", "https://api.mistral.ai/v1", embeddings=True,
          tool_call_ids="mistral"),
    _chat("ollama", None, None, base_env="OLLAMA_BASE_URL", add_v1=True, embeddings=True),
    _chat("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1",
          headers=(("HTTP-Referer", "OPENROUTER_REFERER"), ("X-Title", "OPENROUTER_TITLE"))),
    _chat("sglang", None, None, base_env="SGLANG_API_BASE", add_v1=True),
    _chat("together", "TOGETHER_API_KEY", "https://api.together.xyz/v1", embeddings=True),
    _chat("vllm", None, None, base_env="VLLM_API_BASE", add_v1=True),
    _chat("xai", "XAI_API_KEY", "https://api.x.ai/v1"),
    _chat("zai", "ZAI_API_KEY", "https://api.z.ai/api/paas/v4", base_env="ZAI_BASE_URL",
          max_tokens_field="max_tokens"),
    _chat("zai_coding", "ZAI_API_KEY", "https://api.z.ai/api/coding/paas/v4",
          max_tokens_field="max_tokens"),
    Provider("hugging-face", "embeddings"),  # the offline MiniLM embedder; no chat models
    _off("bedrock", "AWS Bedrock signs each request with AWS credentials (SigV4), which "
         "needs boto3; call Claude through anthropic/ instead", "AWS_ACCESS_KEY_ID"),
    _off("google_vertex", "Vertex AI authenticates with Google Cloud credentials (OAuth), "
         "which needs google-auth; use google_ai/ with GEMINI_API_KEY instead"),
    _off("chatgpt_oauth", "it signs in to a ChatGPT subscription over OAuth, which a server "
         "cannot do for its users; use openai/ with OPENAI_API_KEY"),
    _off("letta", "it is Letta's hosted service (letta/letta-free)"),
)}

# Letta's ``model_endpoint_type`` is the provider's name but for these, whose models Letta's
# providers write as "openai" (they speak OpenAI's format; Fireworks has no provider in Letta,
# and its ``Model`` schema has no such type); ``embedding_endpoint_type`` is the name for those
# in the set below. Any other (a handle Letta does not know) is "openai".
_OPENAI_ENDPOINTS = frozenset({"ollama", "vllm", "sglang", "lmstudio_openai", "cerebras",
                               "mistral", "fireworks", "letta", "hugging-face"})
_EMBEDDING_ENDPOINT_TYPES = frozenset({
    "openai", "anthropic", "bedrock", "google_ai", "google_vertex", "azure", "groq", "ollama",
    "vllm", "hugging-face", "mistral", "together"})


def endpoint_type(provider: str, *, embedding: bool = False) -> str:
    """Letta's (deprecated, still required) endpoint type of ``provider``'s models, as
    Letta's provider of that name writes it."""
    if embedding:
        return provider if provider in _EMBEDDING_ENDPOINT_TYPES else "openai"
    return provider if provider in CATALOGUE and provider not in _OPENAI_ENDPOINTS else "openai"


# Variables a handle's model may not take from a caller: the endpoint comes from the
# catalogue (a server's OpenAI settings must never reach another provider).
_ENDPOINT_OPTIONS = ("base_url", "api_key")


def served() -> list[str]:
    """The prefixes of the providers whose chat models are served."""
    return sorted(name for name, p in CATALOGUE.items() if p.wire in ("chat", "anthropic",
                                                                        "gemini"))


def chat_model(prefix: str, name: str, env: Environment | None = None, **options: Any) -> Model:
    """The model of handle ``prefix/name``: ``ConfigError`` for a provider that is not served,
    an ``UnconfiguredModel`` for one whose variables are not set."""
    provider = CATALOGUE[prefix]
    if provider.not_served or provider.wire in ("embeddings", "none"):
        raise ConfigError(f"model {prefix + '/' + name!r} is not served here: "
                          f"{provider.not_served or 'it has embedding models only'}")
    options = {k: v for k, v in options.items() if k not in _ENDPOINT_OPTIONS}
    problem = provider.missing(env)
    if problem is not None:
        return UnconfiguredModel(prefix, name, problem, **options)
    where = provider.endpoint(env)
    if provider.wire == "gemini":
        try:
            module = importlib.import_module("stateloop.llm.google")
        except ModuleNotFoundError as exc:
            raise ConfigError(f"model {prefix + '/' + name!r} needs stateloop.llm.google, which "
                              "this installation lacks") from exc
        gemini: Model = module.GeminiModel(name, api_key=where.api_key,
                                           base_url=where.base_url, **options)
        return gemini
    if provider.wire == "anthropic":
        from .anthropic import AnthropicModel  # lazy: an adapter loads when its provider is used
        return AnthropicModel(name, base_url=where.base_url, api_key=where.api_key,
                              provider=prefix, **options)
    from .openai import OpenAIModel  # lazy: an adapter loads when its provider is used
    chat_url = key_header = None
    if prefix == "azure":  # a deployment's URL, the version as a query, the key as api-key
        chat_url = azure_url(where.base_url, name, "chat/completions", env)
        key_header = "api-key"
    return OpenAIModel(name, base_url=where.base_url, api_key=where.api_key or "none",
                       provider=prefix, chat_url=chat_url, key_header=key_header or
                       "authorization", headers=where.headers,
                       max_tokens_field=provider.max_tokens_field,
                       tool_call_ids=provider.tool_call_ids, **options)


def azure_url(base_url: str, deployment: str, path: str, env: Environment | None = None) -> str:
    """An Azure OpenAI deployment's ``path``: ``{base}/openai/deployments/{name}/{path}`` with
    ``api-version`` (``AZURE_API_VERSION``, Letta's default), or ``{base}/{path}`` for a v1
    endpoint (a base ending in ``/openai/v1``)."""
    env = os.environ if env is None else env
    if base_url.endswith("/openai/v1"):
        return f"{base_url}/{path}"
    version = env.get("AZURE_API_VERSION") or "2024-09-01-preview"
    # The deployment name is a path segment: nothing in it may leave the deployment's path.
    return (f"{base_url}/openai/deployments/{quote(deployment, safe='')}/{path}"
            f"?api-version={quote(version, safe='')}")


class UnconfiguredModel:
    """The model of a provider whose variables are not set: it has the limits of its name,
    and every call is an ``AuthenticationError`` that says what to set."""

    def __init__(self, provider: str, name: str, problem: str, *,
                 context_window: int | None = None, max_output_tokens: int | None = None,
                 **_options: Any) -> None:
        self.provider = provider
        self.model_id = name
        self.name = f"{provider}/{name}"
        self.problem = problem
        limits = model_limits(name, context_window=context_window,
                              max_output_tokens=max_output_tokens)
        self.context_window = limits.context_window
        self.max_output_tokens: int | None = limits.max_output_tokens

    def __repr__(self) -> str:
        return f"UnconfiguredModel({self.name!r}: {self.problem})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        raise AuthenticationError(f"model {self.name} cannot be called: {self.problem} "
                                  "where the agent runs", provider=self.provider)
        yield  # an async generator, as every adapter's stream is
