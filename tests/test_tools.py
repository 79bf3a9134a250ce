"""Tool definitions: schemas from type hints and docstrings, and clear errors at decoration."""

from __future__ import annotations

from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel

from stateloop import Agent, ConfigError, Tool, ToolContext, ToolDefinitionError, tool
from stateloop.testing import ScriptedModel, call, reply
from stateloop.tools.docstrings import parse_docstring


def test_schema_from_hints_and_google_docstring():
    @tool
    def search(query: str, limit: int = 10, tags: list[str] | None = None) -> str:
        """Search the archive.

        Longer explanation that stays in the description.

        Args:
            query: What to look for.
            limit (int): How many results,
                at most.
            tags: Only passages with these tags.

        Returns:
            The matches.
        """
        return query

    assert search.name == "search"
    assert search.description == ("Search the archive.\n\n"
                                  "Longer explanation that stays in the description.")
    props = search.parameters["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {"type": "integer", "default": 10,
                              "description": "How many results, at most."}
    assert props["tags"]["anyOf"] == [{"items": {"type": "string"}, "type": "array"},
                                      {"type": "null"}]
    assert search.parameters["required"] == ["query"]
    assert search.parameters["additionalProperties"] is False
    assert search("x") == "x"  # still callable as a function


def test_numpy_docstring():
    summary, params = parse_docstring("""Convert units.

    Parameters
    ----------
    value : float
        The amount
        to convert.
    unit : str
        Target unit.

    Returns
    -------
    float
    """)
    assert summary == "Convert units."
    assert params == {"value": "The amount to convert.", "unit": "Target unit."}


def test_enums_literals_and_models_become_schema():
    class Color(Enum):
        RED = "red"
        BLUE = "blue"

    class Point(BaseModel):
        x: int
        y: int

    @tool
    def paint(color: Color, mode: Literal["fill", "stroke"], at: Point) -> str:
        """Paint."""
        return f"{color.value} {mode} {at.x},{at.y}"

    props = paint.parameters["properties"]
    assert props["mode"] == {"enum": ["fill", "stroke"], "type": "string"}
    assert "$defs" in paint.parameters
    agent = Agent(model=ScriptedModel([
        call("paint", color="red", mode="fill", at={"x": 1, "y": 2}), reply("done")]),
        tools=[paint])
    result = agent.run_sync("go")
    assert result.messages[2].text == "red fill 1,2"


def test_async_tool_and_options():
    @tool(name="fetch_page", description="Fetch a page.", timeout=5, sequential=True)
    async def fetch(url: str) -> str:
        return url

    assert (fetch.name, fetch.description, fetch.timeout, fetch.sequential, fetch.is_async) == (
        "fetch_page", "Fetch a page.", 5, True, True)


def test_tool_context_is_injected_and_hidden_from_the_schema():
    seen = {}

    @tool
    def whoami(ctx: ToolContext, prefix: str) -> str:
        """Names the agent."""
        seen["call"] = ctx.call.name
        return f"{prefix}{ctx.agent.name}"

    assert list(whoami.parameters["properties"]) == ["prefix"]
    agent = Agent(model=ScriptedModel([call("whoami", prefix="I am "), reply("ok")]),
                  tools=[whoami], name="ada")
    result = agent.run_sync("go")
    assert result.messages[2].text == "I am ada"
    assert seen == {"call": "whoami"}


def test_plain_functions_are_accepted_as_tools():
    def double(n: int) -> int:
        """Double it."""
        return n * 2

    agent = Agent(model=ScriptedModel([call("double", n=4), reply("8")]), tools=[double])
    assert agent.run_sync("go").messages[2].text == "8"


def test_missing_type_hint_fails_at_decoration():
    with pytest.raises(ToolDefinitionError, match="parameter 'b' has no type hint"):
        @tool
        def bad(a: int, b) -> int:  # type: ignore[no-untyped-def]
            return a


def test_var_args_fail_at_decoration():
    with pytest.raises(ToolDefinitionError, match=r"'rest' is \*args/\*\*kwargs"):
        @tool
        def bad(*rest: int) -> int:
            return 0


def test_type_without_schema_fails_at_decoration():
    class Opaque:
        pass

    with pytest.raises(ToolDefinitionError, match="cannot become a JSON schema"):
        @tool
        def bad(thing: Opaque) -> int:
            return 0


def test_unknown_model_string_lists_providers():
    with pytest.raises(ConfigError, match="PROVIDER one of anthropic, azure, baseten"):
        Agent(model="gemini-pro")
    with pytest.raises(ConfigError, match="unknown model 'nope/large'"):
        Agent(model="nope/large")


def test_bad_agent_options_name_the_field():
    model = ScriptedModel([])
    with pytest.raises(ConfigError, match="max_steps must be a positive integer, got 0"):
        Agent(model=model, max_steps=0)
    with pytest.raises(ConfigError, match="unknown agent_type 'chat'"):
        Agent(model=model, agent_type="chat")
    with pytest.raises(ConfigError, match="unknown built-in tool 'google_search'"):
        Agent(model=model, tools=["google_search"])
    with pytest.raises(ConfigError, match="timeout must be a positive number"):
        Agent(model=model, timeout=-1)


def test_two_tools_with_one_name_are_rejected():
    def a(x: int) -> int:
        return x

    first = Tool.from_function(a, name="same")
    second = Tool.from_function(a, name="same")
    with pytest.raises(ConfigError, match="two different tools are named 'same'"):
        Agent(model=ScriptedModel([]), tools=[first, second])


async def test_run_sync_inside_an_event_loop_is_refused():
    agent = Agent(model=ScriptedModel([reply("x")]))
    with pytest.raises(RuntimeError, match=r"use 'await agent\.run"):
        agent.run_sync("go")
