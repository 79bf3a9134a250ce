"""Letta's messaging, agent and tool semantics, walked through with letta-client 1.7.x.

Run by tests/test_server_letta17.py under an interpreter that has only letta-client 1.7.12
(the version Letta 0.16.8 locks): ``python letta17_walk.py URL``. It never imports
stateloop. The model is scripted by the test: the line ``SCRIPT <json items>`` on stdout
asks for the next answers (``stateloop.testing.fake_openai.load_script``'s format), and
the test answers ``ok`` on stdin. Each item prints ``PASS <item>``; a failure raises.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import letta_client
from letta_client import Letta
from pydantic import BaseModel, Field

WEATHER = {"name": "get_weather", "description": "The weather in a city now.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}
SHOWN = ("reasoning_message", "assistant_message", "tool_call_message",
         "approval_request_message", "tool_return_message", "user_message")


def model(*items: dict[str, Any]) -> None:
    """What the model answers next, in order."""
    print("SCRIPT " + json.dumps(list(items)), flush=True)
    assert sys.stdin.readline().strip() == "ok", "the test did not set the script"


def kinds(messages: Any) -> list[str]:
    return [m.message_type for m in messages if m.message_type in SHOWN]


def passed(item: str) -> None:
    print(f"PASS {item}", flush=True)


def new_agent(client: Letta, **options: Any) -> Any:
    options.setdefault("model", "openai/gpt-4o-mini")
    options.setdefault("memory_blocks", [{"label": "human", "value": "Name: Ada"}])
    options.setdefault("include_base_tools", False)
    return client.agents.create(**options)


def raises(kind: type[letta_client.APIStatusError], fn: Any, *args: Any,
           **kwargs: Any) -> letta_client.APIStatusError:
    try:
        fn(*args, **kwargs)
    except kind as exc:
        return exc
    raise AssertionError(f"expected {kind.__name__} from {fn.__qualname__}")


class Step(BaseModel):
    title: str
    minutes: int


class PlanArgs(BaseModel):
    steps: list[Step] = Field(..., description="The steps, in order.")


def plan(steps: list[Step]) -> str:
    """Make a plan.

    Args:
        steps: The steps, in order.
    """
    return f"{len(steps)} steps, first {steps[0]['title']}"  # type: ignore[index]


def shout(text: str) -> str:
    """Shout it back.

    Args:
        text: What to shout.
    """
    return text.upper() * 50


def paging(client: Letta) -> None:
    agent = new_agent(client)
    model({"reply": "one"})
    client.agents.messages.create(agent.id, input="first")
    [last] = client.agents.messages.list(agent.id, limit=1).items
    model({"reply": "two"})
    client.agents.messages.create(agent.id, input="second")
    since = client.agents.messages.list(agent.id, after=last.id).items
    assert kinds(since) == ["user_message", "assistant_message"], kinds(since)
    assert since[1].content == "two"
    older = client.agents.messages.list(agent.id, before=since[0].id, limit=2).items
    assert [m.id for m in older][-1] == last.id
    passed("1 paging")


def agent_types(client: Letta) -> None:
    for kind in ("memgpt_v2_agent", "letta_v1_agent", "react_agent", "voice_convo_agent"):
        agent = new_agent(client, agent_type=kind)
        assert client.agents.retrieve(agent.id).agent_type == kind
    passed("2 agent types")


def client_tools_and_parallel_calls(client: Letta) -> None:
    agent = new_agent(client)
    model({"calls": [{"call": "get_weather", "arguments": {"city": c}}
                     for c in ("Oslo", "Rome", "Lima")]})
    paused = client.agents.messages.create(agent.id, input="weather?", client_tools=[WEATHER])
    assert paused.stop_reason.stop_reason == "requires_approval"
    [request] = [m for m in paused.messages if m.message_type == "approval_request_message"]
    calls = request.tool_calls
    assert isinstance(calls, list) and len(calls) == 3, calls
    passed("4 parallel calls are one message")
    model({"reply": "Sunny everywhere."})
    done = client.agents.messages.create(agent.id, messages=[{
        "type": "approval", "approvals": [
            {"type": "tool", "tool_call_id": c.tool_call_id, "status": "success",
             "tool_return": "sunny"} for c in calls]}])
    assert kinds(done.messages)[-1] == "assistant_message"
    state = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    assert state.pending_approval is None
    passed("3 client tools")


def approvals_and_tool_returns(client: Letta) -> None:
    # 1.7.x has upsert_from_function; 1.12 dropped it (apps call upsert(source_code=...)).
    planned = client.tools.upsert_from_function(func=plan, args_schema=PlanArgs)
    assert planned.json_schema is not None
    assert planned.json_schema["parameters"]["properties"]["steps"]["items"] == {
        "$ref": "#/$defs/Step"}
    tool = client.tools.upsert_from_function(func=shout, default_requires_approval=True,
                                             return_char_limit=60)
    agent = new_agent(client, tool_ids=[tool.id])
    client.agents.tools.update_approval("shout", agent_id=agent.id,
                                        body_requires_approval=False)
    model({"call": "shout", "arguments": {"text": "hey"}}, {"reply": "Shouted."})
    done = client.agents.messages.create(agent.id, input="shout hey")
    assert done.stop_reason.stop_reason == "end_turn", kinds(done.messages)
    [returned] = [m for m in done.messages if m.message_type == "tool_return_message"]
    assert returned.status == "success" and returned.tool_return.startswith("HEYHEY")
    assert "exceeded the character limit" in returned.tool_return, returned.tool_return
    passed("5 approvals per agent")
    passed("6 tool returns")


def agent_fields(client: Letta) -> None:
    first = new_agent(client, name="twin")
    second = new_agent(client, name="twin")
    assert first.id != second.id
    assert first.embedding_config is None
    assert [b.limit for b in first.memory.blocks] == [100_000]
    try:
        made = new_agent(client, include_multi_agent_tools=True)  # a 1.7.x parameter
        assert made.tools, "include_multi_agent_tools was dropped"
    except letta_client.UnprocessableEntityError as exc:
        assert "include_multi_agent_tools" in str(exc.body)
    found = client.agents.list(query_text="twin").items
    assert {a.id for a in found} >= {first.id, second.id}
    passed("7 agents")


def message_identity(client: Letta) -> None:
    agent = new_agent(client)
    model({"reply": "hello", "reasoning": "a greeting"})
    chunks = [c for c in client.agents.messages.create(
        agent.id, input="hi", streaming=True, stream_tokens=True, include_pings=False)
        if c.message_type in SHOWN]
    listed = {m.otid: m for m in client.agents.messages.list(agent.id, limit=10).items}
    for chunk in chunks:
        assert chunk.otid in listed and listed[chunk.otid].id == chunk.id
        assert chunk.step_id is not None and listed[chunk.otid].step_id == chunk.step_id
    model({"reply": "again"})
    response = client.agents.messages.create(agent.id, messages=[
        {"role": "user", "content": "hi", "otid": "client-otid-17"}])
    [answer] = response.messages
    assert answer.step_id is not None and answer.otid not in {c.otid for c in chunks}
    mine = [m for m in client.agents.messages.list(agent.id).items
            if m.otid == "client-otid-17"]
    assert kinds(mine) == ["user_message"]
    passed("8 message identity")


def block_rename(client: Letta) -> None:
    agent = new_agent(client)
    renamed = client.agents.blocks.update("human", agent_id=agent.id, label="person")
    assert renamed.label == "person"
    assert client.agents.blocks.retrieve("person", agent_id=agent.id).value == "Name: Ada"
    passed("9 block rename")


def validation_and_errors(client: Letta) -> None:
    agent = new_agent(client)
    raises(letta_client.UnprocessableEntityError, client.agents.messages.create, agent.id,
           input="a", messages=[{"role": "user", "content": "b"}])
    model({"reply": "a cat"})
    pixel = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
             "kgAAAABJRU5ErkJggg==")
    client.agents.messages.create(agent.id, messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": pixel}}]}])
    passed("10 validation")
    model({"call": "get_weather", "arguments": {"city": "Oslo"}})
    client.agents.messages.create(agent.id, input="weather?", client_tools=[WEATHER])
    busy = raises(letta_client.ConflictError, client.agents.messages.create, agent.id,
                  input="hello?")
    assert isinstance(busy.body, dict) and busy.body["detail"]["code"] == "PENDING_APPROVAL"
    wrong = raises(letta_client.BadRequestError, client.agents.messages.create, agent.id,
                   messages=[{"type": "approval", "approvals": [{
                       "type": "approval", "tool_call_id": "nope", "approve": True}]}])
    assert "Invalid tool call IDs" in str(wrong.body)
    passed("10 approval errors")
    other = new_agent(client)
    model({"error": "authentication", "message": "the provider said no"})
    failed = raises(letta_client.AuthenticationError, client.agents.messages.create,
                    other.id, input="hi")
    assert isinstance(failed.body, dict) and "the provider said no" in failed.body["detail"]
    passed("11 plain REST errors")


def main(url: str) -> None:
    client = Letta(base_url=url, api_key="unused", timeout=30, max_retries=0)
    assert letta_client.__version__.startswith("1.7."), letta_client.__version__
    for walk in (paging, agent_types, client_tools_and_parallel_calls,
                 approvals_and_tool_returns, agent_fields, message_identity, block_rename,
                 validation_and_errors):
        walk(client)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
