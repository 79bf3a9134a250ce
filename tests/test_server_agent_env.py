"""Per-agent tool environment variables (Letta's ``secrets``, formerly
``tool_exec_environment_variables``): stored on the agent, shown in its state, and given to
that agent's source tools only, over ``STATELOOP_TOOL_ENV``."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from letta_client import APIStatusError, Letta

from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import (  # noqa: F401 (fixtures)
    Script,
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)

READ_ENV = ('def read_env(name: str) -> str:\n    """One environment variable, as JSON."""\n'
            '    import json, os\n    return json.dumps(os.environ.get(name))\n')
DUMP_ENV = ('def dump_env() -> str:\n    """The whole environment, as JSON."""\n'
            '    import json, os\n    return json.dumps(dict(os.environ))\n')


def _tool_return(client: Letta, script: Script, agent_id: str, tool: str,
                 **arguments: Any) -> Any:
    """What the tool returned when the agent's model called it, decoded."""
    script.set(call(tool, **arguments), reply("done"))
    response = client.agents.messages.create(agent_id, input="go")
    returns = [m for m in response.messages if m.message_type == "tool_return_message"]
    assert returns[0].status == "success", returns[0].tool_return
    return json.loads(returns[0].tool_return)


def test_each_agent_s_tools_see_its_own_secrets(client: Letta, script: Script) -> None:
    client.tools.upsert(source_code=READ_ENV)
    one = new_agent(client, tools=["read_env"], secrets={"API_TOKEN": "abc"})
    two = new_agent(client, tools=["read_env"])
    assert _tool_return(client, script, one.id, "read_env", name="API_TOKEN") == "abc"
    assert _tool_return(client, script, two.id, "read_env", name="API_TOKEN") is None


def test_a_patched_secret_reaches_the_next_call(client: Letta, script: Script) -> None:
    client.tools.upsert(source_code=READ_ENV)
    agent = new_agent(client, tools=["read_env"], secrets={"API_TOKEN": "abc"})
    assert _tool_return(client, script, agent.id, "read_env", name="API_TOKEN") == "abc"
    client.agents.update(agent.id, secrets={"API_TOKEN": "xyz"})
    assert _tool_return(client, script, agent.id, "read_env", name="API_TOKEN") == "xyz"
    # The deprecated name works too, and a PATCH replaces the whole set, as in Letta.
    client.agents.update(agent.id, tool_exec_environment_variables={"OTHER": "1"})
    assert _tool_return(client, script, agent.id, "read_env", name="API_TOKEN") is None
    assert _tool_return(client, script, agent.id, "read_env", name="OTHER") == "1"


def test_a_replaced_tool_keeps_the_agent_s_secrets(client: Letta, script: Script) -> None:
    client.tools.upsert(source_code=READ_ENV)
    agent = new_agent(client, tools=["read_env"], secrets={"API_TOKEN": "abc"})
    assert _tool_return(client, script, agent.id, "read_env", name="API_TOKEN") == "abc"
    client.tools.upsert(source_code=READ_ENV.replace("One environment", "An environment"))
    assert _tool_return(client, script, agent.id, "read_env", name="API_TOKEN") == "abc"


def test_a_tool_attached_later_sees_the_secrets(client: Letta, script: Script) -> None:
    tool = client.tools.upsert(source_code=READ_ENV)
    agent = new_agent(client, secrets={"API_TOKEN": "abc"})
    client.agents.tools.attach(tool.id, agent_id=agent.id)
    assert _tool_return(client, script, agent.id, "read_env", name="API_TOKEN") == "abc"


def test_agent_state_lists_the_variables(client: Letta) -> None:
    agent = new_agent(client, tool_exec_environment_variables={"API_TOKEN": "abc", "B": ""})
    for state in (agent, client.agents.retrieve(agent.id, include=["agent.secrets"])):
        for shown in (state.secrets, state.tool_exec_environment_variables):
            assert [(v.key, v.value, v.agent_id) for v in shown] == [
                ("API_TOKEN", "abc", agent.id), ("B", "", agent.id)]
            assert all(v.id and v.id.startswith("agent-env-") for v in shown)
    updated = client.agents.update(agent.id, secrets={"API_TOKEN": "new"})
    assert [(v.key, v.value) for v in updated.secrets] == [("API_TOKEN", "new")]
    assert updated.secrets[0].id == agent.secrets[0].id  # the same variable, changed
    assert client.agents.update(agent.id, secrets={}).secrets == []
    unchanged = client.agents.update(agent.id, description="no secrets given")
    assert unchanged.secrets == [] and unchanged.description == "no secrets given"


@pytest.mark.parametrize("key", ["1X", "A=B", "", "A B"])
@pytest.mark.parametrize("field", ["secrets", "tool_exec_environment_variables"])
def test_a_bad_variable_name_is_refused(client: Letta, field: str, key: str) -> None:
    agent = new_agent(client)
    with pytest.raises(APIStatusError) as info:
        new_agent(client, name=f"bad-{field}-{key}", **{field: {key: "v"}})
    assert info.value.status_code == 422
    assert field in str(info.value) and repr(key) in str(info.value)
    assert not client.agents.list(name=f"bad-{field}-{key}").items  # nothing stored
    with pytest.raises(APIStatusError) as info:
        client.agents.update(agent.id, **{field: {"GOOD": "v", key: "v"}})
    assert info.value.status_code == 422
    assert field in str(info.value) and repr(key) in str(info.value)
    assert client.agents.retrieve(agent.id, include=["agent.secrets"]).secrets == []


def test_a_value_with_a_nul_is_refused(client: Letta) -> None:
    with pytest.raises(APIStatusError) as info:
        new_agent(client, secrets={"TOKEN": "a\0b"})
    assert info.value.status_code == 422 and "'TOKEN'" in str(info.value)


def test_server_and_agent_variables_combine_the_agent_s_winning(
        fake: FakeOpenAI, tmp_path: Path, script: Script) -> None:
    settings = settings_for(fake, tmp_path / "db.sqlite",
                            tool_env={"REGION": "eu", "API_TOKEN": "server"})
    with Server(settings) as server:
        client = Letta(base_url=server.url, api_key="x", max_retries=0)
        client.tools.upsert(source_code=DUMP_ENV)
        agent = new_agent(client, tools=["dump_env"], secrets={"API_TOKEN": "agent"})
        plain = new_agent(client, tools=["dump_env"])
        seen = _tool_return(client, script, agent.id, "dump_env")
        assert seen["REGION"] == "eu" and seen["API_TOKEN"] == "agent"
        # Only the sandbox's own variables besides: nothing of the server's environment.
        assert set(seen) == {"HOME", "TMPDIR", "PATH", "LANG", "PWD", "REGION", "API_TOKEN"}
        assert _tool_return(client, script, plain.id, "dump_env")["API_TOKEN"] == "server"


WHO = ('import os\nWORKER = os.urandom(8).hex()\n\n'
       'def who() -> str:\n    """The worker serving this call, and the token it sees."""\n'
       '    import json\n    return json.dumps([WORKER, os.environ.get("API_TOKEN")])\n')


def test_warm_workers_serve_one_agent_s_tool_only(fake: FakeOpenAI, tmp_path: Path,
                                                  script: Script) -> None:
    with Server(settings_for(fake, tmp_path / "db.sqlite")) as server:
        client = Letta(base_url=server.url, api_key="x", max_retries=0)
        client.tools.upsert(source_code=WHO)
        one = new_agent(client, tools=["who"], secrets={"API_TOKEN": "abc"})
        two = new_agent(client, tools=["who"], secrets={"API_TOKEN": "xyz"})
        twin = new_agent(client, tools=["who"], secrets={"API_TOKEN": "abc"})
        seen = {agent.id: [_tool_return(client, script, agent.id, "who") for _ in range(3)]
                for agent in (one, two, twin)}
        workers = _with_descendants(server.server.config.app.state.runtime.workers.pids())
        for calls in seen.values():  # one warm worker per agent, reused by each call
            assert len({worker for worker, _ in calls}) == 1
        assert [calls[0][1] for calls in seen.values()] == ["abc", "xyz", "abc"]
        # Never shared across agents, not even by two with the same secrets.
        assert len({calls[0][0] for calls in seen.values()}) == 3
        assert len(workers) >= 3 * 3  # bubblewrap, the sandbox's init, the zygote
    assert not [pid for pid in workers if _running(pid)]  # shut down with it


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (one the host's init has yet to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _with_descendants(pids: list[int]) -> set[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
    found = set(pids)
    while grown := {pid for pid, parent in parents.items() if parent in found} - found:
        found |= grown
    return found
