"""Letta's ``GoogleAIModelSettings`` (``thinking_config``, ``response_schema``) read as an
agent's settings and sent to Gemini in its own terms; what cannot be honoured is a 422."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import HTTPException

from stateloop.llm.base import ModelRequest
from stateloop.llm.google import GeminiModel
from stateloop.messages import user
from stateloop.server.services.agent_fields import model_settings
from stateloop.server.services.views import llm_config
from stateloop.server.services.views import model_settings as shown_settings
from stateloop.store.records import AgentRecord


def test_thinking_config_and_response_schema_reach_the_request() -> None:
    options = model_settings({"provider_type": "google_ai", "temperature": 0.3,
                              "max_output_tokens": 700,
                              "thinking_config": {"include_thoughts": True,
                                                  "thinking_budget": 2048},
                              "response_schema": {"type": "json_object"}}, None, "google_ai")
    assert options["max_tokens"] == 700
    model = GeminiModel("gemini-2.5-pro", base_url="http://127.0.0.1:9", api_key="k")
    body = json.loads(model.body(ModelRequest([user("hi")], max_tokens=options["max_tokens"],
                                              settings=options["model_settings"])))
    assert body["generationConfig"] == {
        "maxOutputTokens": 700, "temperature": 0.3, "responseMimeType": "application/json",
        "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True}}
    off = model_settings({"thinking_config": {"include_thoughts": False, "thinking_budget": 0}},
                         None, "google_ai")
    flash = GeminiModel("gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k")
    body = json.loads(flash.body(ModelRequest([user("hi")], settings=off["model_settings"])))
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}


@pytest.mark.parametrize(("settings", "provider", "problem"), [
    ({"thinking_config": {"include_thoughts": False, "thinking_budget": 1024}}, "google_ai",
     "thinking_budget 0"),
    ({"thinking_config": {"thinking_budget": "lots"}}, "google_ai", "an integer"),
    ({"thinking_config": {"thinking_budget": 1024}}, "openai", "thinking_config is Gemini's"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "google_ai",
     "model_settings.thinking_config"),
])
def test_what_gemini_cannot_honour_is_a_422_naming_the_field(
        settings: dict[str, Any], provider: str, problem: str) -> None:
    with pytest.raises(HTTPException) as refused:
        model_settings(settings, None, provider)
    assert refused.value.status_code == 422
    [detail] = refused.value.detail
    assert detail["loc"][-1] in settings and problem in detail["msg"]


def test_a_gemini_agent_shows_its_thinking_config_in_letta_s_terms() -> None:
    unset = AgentRecord("g", model="google_ai/gemini-2.5-flash")
    off = AgentRecord("g", model="google_ai/gemini-2.5-flash",
                      llm_config={"model_settings": {"thinking_budget": 0}})
    views = [shown_settings(r, llm_config(r)) for r in (unset, off)]
    assert [v["provider_type"] for v in views] == ["google_ai", "google_ai"]
    assert [v["thinking_config"] for v in views] == [
        {"include_thoughts": True, "thinking_budget": 1024},
        {"include_thoughts": False, "thinking_budget": 0}]
    assert llm_config(unset)["model_endpoint_type"] == "google_ai"
