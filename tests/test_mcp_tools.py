"""Tools from MCP servers (written with the SDK) in an agent's runs, over stdio and HTTP:
schemas offered, calls answered, errors, images, crashes, hangs and cancels."""

from __future__ import annotations

import asyncio

import pytest

from mcp_support import http_demo, stdio_demo
from stateloop import Agent
from stateloop.mcp import MCPConnectionError, MCPTools
from stateloop.testing import ScriptedModel, call, calls, reply


def agent_with(script, server: MCPTools) -> Agent:
    return Agent(model=ScriptedModel(script), tools=[server], include_base_tools=False)


def tool_results(result):
    return [(m.text, m.is_error) for m in result.messages if m.role == "tool"]


async def test_a_stdio_servers_tools_are_offered_with_their_schemas_and_called():
    server = stdio_demo(allowed_tools=["add", "secret"])
    model = ScriptedModel([calls(call("add", a=2, b=3), call("secret")), reply("done")])
    agent = Agent(model=model, tools=[server], include_base_tools=False)
    try:
        result = await agent.run("go")
    finally:
        await agent.aclose()
    offered = {spec.name: spec for spec in model.requests[0].tools}
    assert set(offered) == {"add", "secret"}  # the allow-list keeps the rest out
    assert offered["add"].parameters["properties"]["a"]["type"] == "integer"
    assert offered["add"].description == "Add two integers."
    assert tool_results(result) == [("5", False), ("s3cret", False)]  # env reaches the server


async def test_an_http_servers_tools_are_called_over_streamable_http():
    with http_demo() as url:
        server = MCPTools.http(url, headers={"X-Demo": "1"}, allowed_tools=["weather"])
        agent = agent_with([call("weather", city="Oslo"), reply("done")], server)
        try:
            result = await agent.run("go")
        finally:
            await agent.aclose()
    [(text, is_error)] = tool_results(result)
    assert not is_error and '"celsius":21' in text.replace(" ", "").replace("\n", "")
    [tool_message] = [m for m in result.messages if m.role == "tool"]
    assert tool_message.metadata["structured_content"] == {"city": "Oslo", "celsius": 21}


async def test_a_tool_error_and_bad_arguments_reach_the_model_as_tool_errors():
    agent = agent_with([calls(call("refuse", reason="rain"), call("add", a="x", b=1)),
                        reply("ok")], stdio_demo())
    try:
        result = await agent.run("go")
    finally:
        await agent.aclose()
    (refused, refused_error), (invalid, invalid_error) = tool_results(result)
    assert refused_error and "refused: rain" in refused
    assert invalid_error and "a" in invalid  # the server checked the arguments
    assert result.stop_reason == "end_turn"


async def test_an_image_comes_back_as_a_note_with_its_data_kept():
    agent = agent_with([call("pixel"), reply("a pixel")], stdio_demo())
    try:
        result = await agent.run("go")
    finally:
        await agent.aclose()
    [tool_message] = [m for m in result.messages if m.role == "tool"]
    assert tool_message.text == "[image: image/png, 66 bytes]" and not tool_message.is_error
    [media] = tool_message.metadata["media"]
    assert media["media_type"] == "image/png" and media["data"].startswith("iVBORw0KGgo")


async def test_a_crashed_server_fails_the_call_in_flight_and_comes_back_for_the_next(tmp_path):
    marks = tmp_path / "marks"
    agent = agent_with([call("crash"), call("add", a=1, b=1), reply("ok")], stdio_demo(marks))
    try:
        result = await agent.run("go")
    finally:
        await agent.aclose()
    (crashed, crash_error), (added, add_error) = tool_results(result)
    assert crash_error and "closed the connection" in crashed
    assert "crashing on purpose" in crashed  # the server's stderr says why
    assert (added, add_error) == ("2", False)
    assert marks.read_text().split() == ["started", "started"]  # restarted once


async def test_a_hanging_call_times_out_and_the_server_hears_the_cancel(tmp_path):
    marks = tmp_path / "marks"
    agent = agent_with([call("hang"), call("add", a=1, b=2), reply("ok")],
                       stdio_demo(marks, timeout=0.5))
    try:
        result = await agent.run("go")
        (hung, hang_error), added = tool_results(result)
        assert hang_error and "timed out after 0.5 s" in hung
        assert added == ("3", False)  # the session is still good
        await _until(lambda: "cancelled" in marks.read_text())
    finally:
        await agent.aclose()
    assert marks.read_text().split() == ["started", "hanging", "cancelled"]


async def test_cancelling_a_run_cancels_the_mcp_request(tmp_path):
    marks = tmp_path / "marks"
    agent = agent_with([call("hang"), reply("unused")], stdio_demo(marks))
    try:
        task = asyncio.create_task(agent.run("go"))
        await _until(lambda: "hanging" in marks.read_text())
        agent.cancel()
        result = await task
        assert result.stop_reason == "cancelled"
        await _until(lambda: "cancelled" in marks.read_text())
    finally:
        await agent.aclose()


async def test_one_session_per_server_and_closing_ends_it(tmp_path):
    marks = tmp_path / "marks"
    first, second = stdio_demo(marks), stdio_demo(marks)
    try:
        assert [(await first.call("add", {"a": 1, "b": 1})).text,
                (await second.call("add", {"a": 2, "b": 2})).text] == ["2", "4"]
        assert marks.read_text().split() == ["started"]  # the same connection: one process
    finally:
        await first.close()
    await second.call("add", {"a": 0, "b": 0})
    await second.close()
    assert marks.read_text().split() == ["started", "started"]


async def test_a_server_that_cannot_start_is_named_before_the_run_stores_anything():
    server = MCPTools.stdio("/nonexistent/mcp-server", name="missing")
    agent = agent_with([reply("unused")], server)
    with pytest.raises(MCPConnectionError, match="cannot connect to MCP server 'missing'"):
        await agent.run("go")
    assert [m.role for m in agent.messages] == ["system"]


def test_allowed_tools_must_be_a_list_of_names():
    with pytest.raises(TypeError, match="list of tool names"):
        MCPTools.stdio("x", allowed_tools="add")


async def _until(condition, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            if condition():
                return
        except FileNotFoundError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def test_import_stateloop_leaves_the_mcp_sdk_out() -> None:
    import subprocess
    import sys

    code = ("import sys, stateloop; from stateloop import MCPTools; "
            "MCPTools.stdio('x'); print(sorted(m for m in sys.modules if m.split('.')[0] "
            "in ('mcp', 'mcp_types', 'httpx2')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
