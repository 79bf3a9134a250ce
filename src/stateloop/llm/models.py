"""Context windows and output limits of common models; a safe default for the rest."""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger("stateloop.llm")


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """How many tokens a model reads (``context_window``) and may write in one reply."""

    context_window: int
    max_output_tokens: int


# Small on purpose: an unknown model may be a local server with a short context, and
# compacting early is cheaper than a failed call.
DEFAULT_LIMITS = ModelLimits(8_192, 4_096)

# Model-name prefixes, matched longest first against the lower-cased name without any
# "org/" path, so "meta-llama/Llama-3.1-8B-Instruct" and "llama3.1:8b" both match.
KNOWN_LIMITS: dict[str, ModelLimits] = {
    # OpenAI
    "gpt-5": ModelLimits(400_000, 128_000),
    "gpt-4.1": ModelLimits(1_047_576, 32_768),
    "gpt-4o": ModelLimits(128_000, 16_384),
    "chatgpt-4o": ModelLimits(128_000, 16_384),
    "gpt-4-turbo": ModelLimits(128_000, 4_096),
    "gpt-4": ModelLimits(8_192, 8_192),
    "gpt-3.5-turbo": ModelLimits(16_385, 4_096),
    "o1": ModelLimits(200_000, 100_000),
    "o1-mini": ModelLimits(128_000, 65_536),
    "o3": ModelLimits(200_000, 100_000),
    "o3-mini": ModelLimits(200_000, 100_000),
    "o4-mini": ModelLimits(200_000, 100_000),
    "gpt-oss": ModelLimits(131_072, 32_768),
    # Anthropic
    "claude-opus-4-5": ModelLimits(200_000, 64_000),
    "claude-opus-4": ModelLimits(200_000, 32_000),
    "claude-sonnet-4": ModelLimits(200_000, 64_000),
    "claude-haiku-4": ModelLimits(200_000, 64_000),
    "claude-3-7-sonnet": ModelLimits(200_000, 64_000),
    "claude-3-5-sonnet": ModelLimits(200_000, 8_192),
    "claude-3-5-haiku": ModelLimits(200_000, 8_192),
    "claude-3": ModelLimits(200_000, 4_096),
    "claude-": ModelLimits(200_000, 8_192),  # any newer Claude: 200k in, a modest reply
    # Google Gemini (ai.google.dev/gemini-api/docs/models)
    "gemini-3": ModelLimits(1_048_576, 65_536),
    "gemini-2.5": ModelLimits(1_048_576, 65_536),
    "gemini-2.0": ModelLimits(1_048_576, 8_192),
    "gemini-1.5-pro": ModelLimits(2_097_152, 8_192),
    "gemini-1.5": ModelLimits(1_048_576, 8_192),
    "gemini-": ModelLimits(1_048_576, 8_192),  # any newer Gemini
    # Open models, as vLLM, Ollama and llama.cpp name them
    "llama-3.1": ModelLimits(131_072, 8_192),
    "llama3.1": ModelLimits(131_072, 8_192),
    "llama-3.2": ModelLimits(131_072, 8_192),
    "llama3.2": ModelLimits(131_072, 8_192),
    "llama-3.3": ModelLimits(131_072, 8_192),
    "llama3.3": ModelLimits(131_072, 8_192),
    "qwen2.5": ModelLimits(32_768, 8_192),
    "qwen3": ModelLimits(40_960, 8_192),
    "mistral-small": ModelLimits(32_768, 8_192),
    "mistral-nemo": ModelLimits(131_072, 8_192),
    "gemma-3": ModelLimits(131_072, 8_192),
    "gemma3": ModelLimits(131_072, 8_192),
    "deepseek-r1": ModelLimits(131_072, 32_768),
    "deepseek-v3": ModelLimits(131_072, 8_192),
    # xAI, DeepSeek, Z.ai, Mistral, Moonshot, MiniMax: their providers' published windows
    "grok-4-fast": ModelLimits(2_000_000, 30_000),
    "grok-4": ModelLimits(256_000, 64_000),
    "grok-code-fast": ModelLimits(256_000, 10_000),
    "grok-3": ModelLimits(131_072, 8_192),
    "deepseek-chat": ModelLimits(128_000, 8_192),
    "deepseek-reasoner": ModelLimits(128_000, 64_000),
    "glm-4.5": ModelLimits(128_000, 16_384),
    "glm-4.6": ModelLimits(180_000, 16_384),
    "glm-4.7": ModelLimits(180_000, 16_384),
    "glm-5": ModelLimits(180_000, 16_384),
    "mistral-large": ModelLimits(131_072, 8_192),
    "mistral-medium": ModelLimits(131_072, 8_192),
    "codestral": ModelLimits(256_000, 8_192),
    "kimi-k2": ModelLimits(131_072, 16_384),
    "minimax-m2": ModelLimits(200_000, 16_384),
    "llama-4": ModelLimits(131_072, 8_192),
    # stateloop's own demo model (demo/echo, demo.py)
    "echo": ModelLimits(128_000, 4_096),
}

_PREFIXES = sorted(KNOWN_LIMITS, key=len, reverse=True)
_warned: set[str] = set()


def known_limits(name: str) -> ModelLimits | None:
    """The registry's limits for model ``name`` (without provider prefix), or None."""
    key = name.lower().rsplit("/", 1)[-1]
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return KNOWN_LIMITS[prefix]
    return None


def model_limits(name: str, *, context_window: int | None = None,
                 max_output_tokens: int | None = None) -> ModelLimits:
    """Limits for ``name``: explicit values win, then the registry, then a safe default."""
    known = known_limits(name)
    if known is None:
        known = DEFAULT_LIMITS
        if context_window is None and name not in _warned:
            _warned.add(name)
            logger.warning("unknown model %r: assuming a %d-token context window; pass "
                           "context_window=... to set it", name, DEFAULT_LIMITS.context_window)
    return ModelLimits(context_window or known.context_window,
                       max_output_tokens or known.max_output_tokens)
