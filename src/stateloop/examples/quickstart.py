"""An agent end to end: a tool, a memory block, streamed events.

Runs on a scripted model by default; set ``STATELOOP_MODEL`` (e.g. ``openai/gpt-4o-mini``,
with ``OPENAI_API_KEY``) to use a real one.
"""

from __future__ import annotations

import asyncio
import os

from stateloop import Agent, Block, tool
from stateloop.testing import ScriptedModel, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def make_model() -> ScriptedModel | str:
    configured = os.environ.get("STATELOOP_MODEL")
    if configured:
        return configured
    return ScriptedModel([call("add", a=19, b=23), reply("19 + 23 = 42.")])


async def main() -> None:
    model = make_model()
    agent = Agent(model=model, tools=[add], system="You are a careful assistant.",
                  blocks=[Block("human", "Name: Ada")])
    print(f"model: {agent.model.name}")
    print("user> What is 19 + 23?")
    async for event in agent.stream("What is 19 + 23?"):
        if event.type == "text_delta":
            print(event.delta, end="", flush=True)
        elif event.type == "tool_call_end":
            print(f"  [call] {event.tool_call.name}({event.tool_call.arguments})")
        elif event.type == "tool_execution_end":
            print(f"  [result] {event.result.text}")
        elif event.type == "run_end":
            print(f"\n[{event.stop_reason}] {event.steps} steps, "
                  f"{event.usage.input_tokens} input / {event.usage.output_tokens} output tokens")


if __name__ == "__main__":
    asyncio.run(main())
