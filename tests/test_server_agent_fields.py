"""What ``POST /v1/agents`` and ``GET /v1/agents`` do with Letta's fields, through letta-client:
names that repeat, search by name, and every create field honoured or refused by name."""

from __future__ import annotations

from letta_client import Letta

from stateloop.cli.remote import RemoteBackend
from test_server_support import Server, new_agent

pytest_plugins = ["test_server_support"]  # its fixtures: fake, server, client, script


def test_names_repeat_and_lookups_by_name_take_the_newest(client: Letta,
                                                          server: Server) -> None:
    first = new_agent(client, name="twin")
    second = new_agent(client, name="twin")
    assert first.id != second.id
    assert [a.id for a in client.agents.list(name="twin")] == [second.id, first.id]
    renamed = new_agent(client, name="solo")
    assert client.agents.update(renamed.id, name="twin").name == "twin"
    assert client.agents.retrieve(first.id).name == "twin"
    # The CLI finds an agent by name as a Letta app does: the newest of that name.
    backend = RemoteBackend(server.url)
    try:
        assert backend.show_agent("twin")["id"] == renamed.id
        assert backend.show_agent(first.id)["id"] == first.id
    finally:
        backend.close()


def test_query_text_finds_agents_by_part_of_the_name(client: Letta) -> None:
    made = [new_agent(client, name=name, tags=["qt"])
            for name in ("Billing Helper", "billing-bot", "Support")]
    found = client.agents.list(query_text="BILLING", tags=["qt"])
    assert [a.id for a in found] == [made[1].id, made[0].id]
    assert [a.id for a in client.agents.list(query_text="port", tags=["qt"])] == [made[2].id]
    both = client.agents.list(query_text="billing", tags=["qt", "none"], match_all_tags=True)
    assert list(both) == []
