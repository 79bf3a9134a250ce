"""Over HTTP with letta-client: a step whose write fails fails its request (plain and
streamed), and the agent answers again once the file is writable, live and after a restart."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from stateloop.testing.scripted import reply
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
from unwritable import WAYS, require, unwritable


def texts(client: Letta, agent_id: str) -> list[str]:
    return [getattr(m, "content", None) or "" for m in
            client.agents.messages.list(agent_id, order="asc")
            if m.message_type in ("user_message", "assistant_message")]


def connect(server: Server) -> Letta:
    return Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


@pytest.mark.parametrize("way", WAYS)
def test_a_step_that_cannot_be_stored_fails_the_request_and_the_agent_goes_on(
        fake: Any, script: Script, tmp_path: Path, way: str) -> None:
    require(way, tmp_path)
    db = tmp_path / "stateloop.db"
    with Server(settings_for(fake, db)) as server:
        client = connect(server)
        agent = new_agent(client)
        script.set(reply("first"))
        client.agents.messages.create(agent.id, input="one")

        with unwritable(db, way):
            script.set(reply("lost"), reply("lost too"))
            with pytest.raises(letta_client.InternalServerError) as plain:
                client.agents.messages.create(agent.id, input="two")
            frames = list(client.agents.messages.create(agent.id, input="three",
                                                        streaming=True, include_pings=False))
        stops = [f.stop_reason for f in frames if f.message_type == "stop_reason"]
        assert stops == ["error"]
        errors = [f for f in frames if f.message_type == "error_message"]
        assert errors and "could not be stored" in errors[0].message  # type: ignore[union-attr]
        body = plain.value.body
        assert isinstance(body, dict) and body["stop_reason"] == "error"
        assert "could not be stored" in body["detail"]
        failed_run = body["run_id"]

        script.set(reply("back"))
        again = client.agents.messages.create(agent.id, input="four")
        assert again.stop_reason.stop_reason == "end_turn"
        assert [getattr(m, "content", None) for m in again.messages] == ["back"]
        assert texts(client, agent.id) == ["one", "first", "four", "back"]
        run = client.runs.retrieve(failed_run)
        assert (run.status, run.stop_reason) == ("failed", "error")
        assert "could not be stored" in (run.metadata or {})["error"]

    with Server(settings_for(fake, db)) as restarted:
        client = connect(restarted)
        assert client.agents.retrieve(agent.id).id == agent.id
        assert texts(client, agent.id) == ["one", "first", "four", "back"]
        script.set(reply("still here"))
        after = client.agents.messages.create(agent.id, input="five")
        assert [getattr(m, "content", None) for m in after.messages] == ["still here"]
        assert client.runs.retrieve(failed_run).status == "failed"
