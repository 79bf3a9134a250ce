"""``stateloop serve`` on PostgreSQL (``STATELOOP_DATABASE_URL=postgresql://...``), driven by
letta-client: agents, a tool call, memory, recall and archival memory."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
from collections.abc import Callable

from letta_client import Letta

from stateloop.store import open_store
from stateloop.testing.scripted import call, reply
from test_cli_support import Cli, Script, cli, fake, script, serving  # noqa: F401 (fixtures)


def test_a_server_on_postgresql_serves_letta_client_and_stores_everything(
        cli: Cli, script: Script, pg_database: Callable[..., str]) -> None:
    url = cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    with serving(cli) as server:
        client = Letta(base_url=server, api_key="x")
        agent = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=True,
                                     memory_blocks=[{"label": "human", "value": "Name: ?"}])
        script.set(call("memory_replace", label="human", old_string="?", new_string="Ada"),
                   reply("Noted, Ada likes zebras."))
        done = client.agents.messages.create(agent.id, input="I am Ada and I like zebras")
        assert done.stop_reason.stop_reason == "end_turn"
        assert client.agents.blocks.retrieve("human", agent_id=agent.id).value == "Name: Ada"
        found = client.messages.search(query="zebras", agent_id=agent.id)
        assert len(found) >= 2  # recall over PostgreSQL's full-text index
        client.agents.passages.create(agent.id, text="Ada's favourite animal is the zebra.")
        passages = client.agents.passages.list(agent.id)
        assert [p.text for p in passages] == ["Ada's favourite animal is the zebra."]

    async def stored() -> tuple[str, list[str], int]:  # after the process is gone
        async with await open_store(url) as store:
            block = await store.get_agent_block(agent.id, "human")
            texts = [m.text for m in await store.list_messages(agent.id)]
            return block.value, texts, await store.count_passages(agent.id)

    value, texts, passages_kept = asyncio.run(stored())
    assert value == "Name: Ada" and passages_kept == 1
    assert "I am Ada and I like zebras" in texts and "Noted, Ada likes zebras." in texts
