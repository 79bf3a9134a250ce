"""Property: any agent — blocks, tools, a history of parallel calls, a step waiting for
approval — survives export and import: what the imported agent holds means the same, and
exporting it again writes the same file."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_support import normalised
from stateloop import Agent, Block, tool
from stateloop.agent_file import export_agents, import_agents
from stateloop.approvals import PendingApproval
from stateloop.messages import Message, ToolCall, assistant, system, tool_result, user
from stateloop.store import open_store
from stateloop.store.memory_files import label_problem
from stateloop.testing import ScriptedModel


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: What to look up.
    """
    return key.upper()


@tool
def approve_me(amount: int) -> str:
    """Pay an amount (a human approves).

    Args:
        amount: How much.
    """
    return f"paid {amount}"


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
# Labels are paths in the memory repository: plain segments joined by "/" (label_problem).
labels = st.from_regex(r"[a-z][a-z0-9_]{0,6}(/[a-z0-9_.-]{1,5}){0,2}", fullmatch=True).filter(
    lambda label: label_problem(label) is None)


@st.composite
def agents(draw: st.DrawFn) -> dict[str, Any]:
    block_labels = draw(st.lists(labels, max_size=3, unique=True))
    blocks = [Block(label, draw(text), draw(st.none() | text), 5000, draw(st.booleans()))
              for label in block_labels]
    transcript: list[Message] = [system("You are tested.")]
    counter = 0
    for _ in range(draw(st.integers(0, 4))):
        transcript.append(user(draw(text) or "hi"))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):  # parallel calls
                counter += 1
                calls.append(ToolCall(f"call-{counter}", "lookup", {"key": draw(text)}))
            transcript.append(assistant(draw(text), calls))
            for call in calls:
                transcript.append(tool_result(call, draw(text), is_error=draw(st.booleans())))
        transcript.append(assistant(draw(text) or "ok"))
    pending = None
    if draw(st.booleans()):
        transcript.append(user("pay"))
        call = ToolCall("call-pay", "approve_me", {"amount": draw(st.integers(0, 99))})
        transcript.append(assistant("", [call]))
        pending = PendingApproval("run-x", [call], [call.id])
    return {"blocks": blocks, "messages": transcript, "pending": pending}


def _meaning(messages: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.role, m.text, [(c.id, c.name, c.arguments) for c in m.tool_calls],
             m.tool_call_id, m.is_error) for m in messages]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(agents())
def test_any_agent_survives_export_and_import(case: dict[str, Any]) -> None:
    agent = Agent(ScriptedModel([]), tools=[lookup, approve_me], system="You are tested.",
                  blocks=case["blocks"], include_base_tools=False,
                  tool_rules=[{"type": "requires_approval", "tool_name": "approve_me"}])
    agent.import_state({"messages": [m.to_dict() for m in case["messages"]],
                        "pending_approval": case["pending"].to_dict()
                        if case["pending"] else None,
                        "blocks": [{"label": b.label, "value": b.value,
                                    "description": b.description, "limit": b.limit,
                                    "read_only": b.read_only, "id": b.id}
                                   for b in case["blocks"]]})
    exported = agent.export_file()
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{Path(folder) / 'p.db'}"

        async def go() -> tuple[Any, ...]:
            result = await import_agents(exported, store=store)
            db = await open_store(store)
            try:
                record = await db.get_agent(result.agent_ids[0])
                context = await db.get_context(record.id, record.in_context_message_ids)
                blocks = await db.list_blocks(record.id)
            finally:
                await db.close()
            again = await export_agents(result.agent_ids, store=store)
            return record, context, blocks, again

        record, context, blocks, again = asyncio.run(go())
    assert _meaning(context) == _meaning(agent.messages)
    assert [(b.label, b.value, b.description, b.limit, b.read_only) for b in blocks] == [
        (b.label, b.value, b.description, b.limit, b.read_only) for b in agent.blocks]
    if case["pending"]:
        assert record.pending_approval["requested"] == ["call-pay"]
    else:
        assert record.pending_approval is None
    assert sorted(record.tool_names) == ["approve_me", "lookup"]
    assert normalised(again) == normalised(exported)
