"""What asking another agent costs beyond the receiver's run itself, in the same run.

Both sides run the same exchange on scripted models: A makes one tool call, B answers it with
a run of its own, A answers. The baseline's tool awaits ``B.run`` directly, with the same
message and reply text; the measured one is ``send_message_to_agent_and_wait_for_reply``
(directory lookup, the wait graph, the receiver's run as a task, the reply timeout). Rounds
are interleaved; medians are compared.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time

from stateloop import Agent, tool
from stateloop.testing import ScriptedModel, call, reply
from stateloop.tools.multi_agent import incoming

ROUNDS = 15
EXCHANGES = 200


async def exchange_cost(direct: bool) -> float:
    receiver = Agent(ScriptedModel(lambda request: reply("pong")), system="B")
    target = receiver.id

    @tool
    async def ask_directly(message: str, other_agent_id: str) -> str:
        """Run the receiver directly, on the same message, answering the same text."""
        output = (await receiver.run(incoming("agent-sender", message, reply=True))).output
        return json.dumps({"agent_id": other_agent_id, "response": [output]})

    name = "ask_directly" if direct else "send_message_to_agent_and_wait_for_reply"

    def script(request):
        if request.messages[-1].role == "tool":
            return reply("done")
        return call(name, message="ping", other_agent_id=target)

    sender = Agent(ScriptedModel(script), system="A", tools=[ask_directly],
                   include_multi_agent_tools=True)
    started = time.perf_counter()
    for _ in range(EXCHANGES):
        result = await sender.run("go")
        assert result.output == "done", result
    return (time.perf_counter() - started) / EXCHANGES


async def main() -> None:
    direct: list[float] = []
    tool_path: list[float] = []
    for index in range(ROUNDS):
        first_direct = index % 2 == 0  # alternate which side goes first
        for is_direct in (first_direct, not first_direct):
            gc.collect()
            (direct if is_direct else tool_path).append(await exchange_cost(is_direct))
    d, t = statistics.median(direct), statistics.median(tool_path)
    print(f"exchange, receiver run directly:      {d * 1e6:8.0f} us")
    print(f"exchange, through the multi-agent tool: {t * 1e6:8.0f} us")
    print(f"ratio: {t / d:.3f}  (overhead {(t - d) * 1e6:.0f} us per exchange)")


if __name__ == "__main__":
    asyncio.run(main())
