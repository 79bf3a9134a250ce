"""The server's agents, blocks and tools endpoints, driven by letta-client; errors and auth."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import httpx
import letta_client
import pytest
from letta_client import Letta

from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, new_agent, script, server, settings_for  # noqa: F401 (fixtures)

ECHO = '''
def shout(text: str) -> str:
    """Repeat the text in capitals.

    Args:
        text: What to repeat.
    """
    return text.upper()
'''


def test_create_agent_with_blocks_tool_rules_and_tags(client: Letta) -> None:
    tool = client.tools.create(source_code=ECHO)
    agent = new_agent(client, name="creator", tags=["team-a", "prod"],
                      memory_blocks=[{"label": "human", "value": "Name: Ada", "limit": 500},
                                     {"label": "persona", "value": "Helpful.", "read_only": True,
                                      "description": "who I am"}],
                      tools=["shout"], tool_rules=[{"type": "exit_loop", "tool_name": "shout"}],
                      system="You are terse.")
    assert agent.name == "creator"
    assert sorted(agent.tags) == ["prod", "team-a"]
    assert [b.label for b in agent.blocks] == ["human", "persona"]
    assert agent.blocks[1].read_only and agent.blocks[1].description == "who I am"
    assert [t.id for t in agent.tools] == [tool.id]
    assert agent.tool_rules is not None and agent.tool_rules[0].type == "exit_loop"
    assert agent.llm_config.model == "gpt-4o-mini" and agent.model == "openai/gpt-4o-mini"
    assert agent.system == "You are terse."
    again = client.agents.retrieve(agent.id, include=["agent.blocks"])
    assert again.id == agent.id and [b.value for b in again.blocks] == ["Name: Ada", "Helpful."]


def test_list_filters_by_name_and_tags_and_pages(client: Letta) -> None:
    made = [new_agent(client, name=f"lister-{i}", tags=["lister", f"n{i % 2}"]) for i in range(5)]
    assert [a.id for a in client.agents.list(name="lister-3")] == [made[3].id]
    tagged = client.agents.list(tags=["lister", "n1"], match_all_tags=True)
    assert {a.id for a in tagged} == {made[1].id, made[3].id}
    # Auto-paging follows the "after" cursor, two at a time, newest first.
    walked = [a.id for a in client.agents.list(tags=["lister"], limit=2)]
    assert walked == [a.id for a in reversed(made)]


def test_modify_and_delete_agent(client: Letta) -> None:
    agent = new_agent(client, name="to-modify")
    changed = client.agents.update(agent.id, name="modified", system="New system.",
                                   tags=["x"], description="d")
    assert (changed.name, changed.system, changed.tags, changed.description) == (
        "modified", "New system.", ["x"], "d")
    client.agents.delete(agent.id)
    with pytest.raises(letta_client.NotFoundError):
        client.agents.retrieve(agent.id)


def test_core_memory_blocks_by_label(client: Letta) -> None:
    agent = new_agent(client)
    blocks = list(client.agents.blocks.list(agent.id))
    assert [b.label for b in blocks] == ["human"]
    block = client.agents.blocks.retrieve("human", agent_id=agent.id)
    assert block.value == "Name: Ada"
    edited = client.agents.blocks.update("human", agent_id=agent.id, value="Name: Grace")
    assert edited.value == "Name: Grace"
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value == "Name: Grace"


def test_shared_blocks_create_attach_detach_delete(client: Letta) -> None:
    shared = client.blocks.create(label="org", value="ACME", limit=100)
    assert client.blocks.retrieve(shared.id).value == "ACME"
    first, second = new_agent(client), new_agent(client)
    for agent in (first, second):
        state = client.agents.blocks.attach(shared.id, agent_id=agent.id)
        assert "org" in [b.label for b in state.blocks]
    client.blocks.update(shared.id, value="ACME Corp")
    assert client.agents.blocks.retrieve("org", agent_id=second.id).value == "ACME Corp"
    client.agents.blocks.detach(shared.id, agent_id=first.id)
    detached = client.agents.retrieve(first.id, include=["agent.blocks"])
    assert [b.label for b in detached.blocks] == ["human"]
    assert shared.id in [b.id for b in client.blocks.list(label="org")]
    client.blocks.delete(shared.id)
    with pytest.raises(letta_client.NotFoundError):
        client.blocks.retrieve(shared.id)


def test_tools_create_list_attach_detach_and_approval_toggle(client: Letta) -> None:
    tool = client.tools.create(source_code=ECHO.replace("shout", "yell"))
    assert tool.name == "yell" and tool.json_schema is not None
    assert tool.json_schema["parameters"]["required"] == ["text"]
    assert tool.json_schema["description"].startswith("Repeat the text")
    assert "yell" in [t.name for t in client.tools.list(name="yell")]
    assert "conversation_search" in [t.name for t in client.tools.list(limit=100)]
    agent = new_agent(client)
    state = client.agents.tools.attach(tool.id, agent_id=agent.id)
    assert state is not None and "yell" in [t.name for t in state.tools]
    assert [t.name for t in client.agents.tools.list(agent.id)] == ["yell"]
    state = client.agents.tools.update_approval("yell", agent_id=agent.id,
                                                body_requires_approval=True)
    assert state is not None and state.tool_rules is not None
    assert [(r.type, r.tool_name) for r in state.tool_rules] == [("requires_approval", "yell")]
    state = client.agents.tools.update_approval("yell", agent_id=agent.id,
                                                body_requires_approval=False)
    assert state is not None and not state.tool_rules
    client.agents.tools.detach(tool.id, agent_id=agent.id)
    assert list(client.agents.tools.list(agent.id)) == []
    client.tools.delete(tool.id)
    with pytest.raises(letta_client.NotFoundError):
        client.tools.retrieve(tool.id)


# -- errors --------------------------------------------------------------------------------


def test_unknown_ids_are_404(client: Letta) -> None:
    missing = "agent-00000000-0000-0000-0000-000000000000"
    for call in (lambda: client.agents.retrieve(missing),
                 lambda: client.agents.messages.create(missing, input="hi"),
                 lambda: client.agents.blocks.retrieve("human", agent_id=missing),
                 lambda: client.blocks.retrieve("block-nope"),
                 lambda: client.tools.retrieve("tool-nope"),
                 lambda: client.runs.retrieve("run-nope")):
        with pytest.raises(letta_client.NotFoundError):
            call()
    agent = new_agent(client)
    with pytest.raises(letta_client.NotFoundError, match="persona"):
        client.agents.blocks.retrieve("persona", agent_id=agent.id)


def _count_agents(client: Letta) -> int:
    return len(list(client.agents.list(limit=1000)))


def test_bad_bodies_are_4xx_naming_the_field_and_store_nothing(client: Letta,
                                                              server: Server) -> None:
    before = _count_agents(client)
    cases = [
        ({"agent_type": "wizard_agent"}, "agent_type"),
        ({"model": "nosuch/model-x"}, "model"),
        ({"memory_blocks": [{"label": "human"}]}, "value"),
        ({"memory_blocks": [{"label": "h", "value": "x" * 50, "limit": 10}]}, "memory_blocks"),
        ({"tool_rules": [{"type": "exit_loop"}]}, "tool_rules"),
        ({"tags": "not-a-list"}, "tags"),
    ]
    for body, field in cases:
        with pytest.raises(letta_client.UnprocessableEntityError) as info:
            client.agents.create(**body)  # type: ignore[arg-type]
        assert field in str(info.value.body), (body, info.value.body)
    with pytest.raises(letta_client.BadRequestError,  # Letta's text, which Letta Code matches
                       match=r"Tools not found by name: \{'no_such_tool'\}"):
        client.agents.create(tools=["no_such_tool"], memory_blocks=[])
    raw = httpx.post(f"{server.url}/v1/agents/", content=b"{not json",
                     headers={"content-type": "application/json"})
    assert raw.status_code == 422 and "json" in raw.text.lower()
    huge = httpx.post(f"{server.url}/v1/agents/", json={"system": "x" * (9 * 1024 * 1024)})
    assert huge.status_code == 413
    assert _count_agents(client) == before


def test_tool_source_that_does_not_compile_is_400(client: Letta) -> None:
    with pytest.raises(letta_client.BadRequestError, match="line 1"):  # as Letta answers
        client.tools.create(source_code="def broken(:\n  pass")
    with pytest.raises(letta_client.BadRequestError, match="source_code"):
        client.tools.create(source_code="x = 1")
    with pytest.raises(letta_client.UnprocessableEntityError, match="unknown_field"):
        client.tools.create(source_code=ECHO, extra_body={"unknown_field": 1})
    with pytest.raises(letta_client.ConflictError):
        client.tools.create(source_code="def send_message(message: str) -> str:\n  return ''")
    assert "broken" not in [t.name for t in client.tools.list(limit=500)]


def test_block_value_over_limit_is_422_and_unchanged(client: Letta) -> None:
    agent = new_agent(client, memory_blocks=[{"label": "human", "value": "a", "limit": 5}])
    with pytest.raises(letta_client.UnprocessableEntityError, match="limit"):
        client.agents.blocks.update("human", agent_id=agent.id, value="too long for it")
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value == "a"


def test_health_and_openapi(server: Server) -> None:
    health = Letta(base_url=server.url, api_key="x").health()
    assert health.status == "ok"
    spec = httpx.get(f"{server.url}/openapi.json", timeout=60).json()  # built on first ask
    assert "/v1/agents/{agent_id}/messages/stream" in spec["paths"]


def test_auth_requires_bearer_token_except_health(fake: FakeOpenAI,
                                                  tmp_path: pytest.TempPathFactory) -> None:
    settings = settings_for(fake, tmp_path / "auth.db",  # type: ignore[operator]
                            server_password="s3cret", api_keys=["key-2"])
    with Server(settings) as secured:
        assert httpx.get(f"{secured.url}/v1/health/").status_code == 200
        assert httpx.get(f"{secured.url}/v1/agents/").status_code == 401
        with pytest.raises(letta_client.AuthenticationError):
            Letta(base_url=secured.url, api_key="wrong", max_retries=0).agents.list()
        assert httpx.get(f"{secured.url}/openapi.json", timeout=60).status_code == 401
        for token in ("s3cret", "key-2"):
            assert list(Letta(base_url=secured.url, api_key=token).agents.list()) == []
        password = httpx.get(f"{secured.url}/v1/agents/",
                             headers={"X-BARE-PASSWORD": "password s3cret"})
        assert password.status_code == 200
