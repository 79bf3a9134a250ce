"""The model registry: known limits, a safe default with one warning, explicit overrides."""

from __future__ import annotations

import logging

import pytest

from stateloop.llm.anthropic import AnthropicModel
from stateloop.llm.models import DEFAULT_LIMITS, ModelLimits, known_limits, model_limits
from stateloop.llm.openai import OpenAIModel
from stateloop.llm.registry import resolve_model


@pytest.mark.parametrize(("name", "limits"), [
    ("gpt-4o-mini", ModelLimits(128_000, 16_384)),
    ("gpt-4-turbo-2024-04-09", ModelLimits(128_000, 4_096)),
    ("gpt-4", ModelLimits(8_192, 8_192)),
    ("o1-mini", ModelLimits(128_000, 65_536)),
    ("claude-sonnet-4-5-20250929", ModelLimits(200_000, 64_000)),
    ("meta-llama/Llama-3.1-8B-Instruct", ModelLimits(131_072, 8_192)),
    ("qwen2.5:7b", ModelLimits(32_768, 8_192)),
])
def test_known_models(name: str, limits: ModelLimits) -> None:
    assert known_limits(name) == limits


def test_unknown_model_gets_the_default_and_one_warning(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    with caplog.at_level(logging.WARNING, logger="stateloop.llm"):
        first = model_limits("my-finetune-v7")
        model_limits("my-finetune-v7")
    assert first == DEFAULT_LIMITS
    [record] = caplog.records
    assert "my-finetune-v7" in record.getMessage() and "\n" not in record.getMessage()


def test_explicit_limits_win_and_silence_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="stateloop.llm"):
        limits = model_limits("another-unknown", context_window=32_000, max_output_tokens=999)
    assert limits == ModelLimits(32_000, 999)
    assert not caplog.records


def test_adapters_take_limits_from_the_registry_or_the_caller() -> None:
    model = resolve_model("openai/gpt-4o", base_url="http://127.0.0.1:1/v1")
    assert isinstance(model, OpenAIModel)
    assert (model.name, model.context_window, model.max_output_tokens) == (
        "openai/gpt-4o", 128_000, 16_384)
    claude = AnthropicModel("claude-haiku-4-5", context_window=50_000, max_output_tokens=1_000)
    assert (claude.context_window, claude.max_output_tokens) == (50_000, 1_000)
