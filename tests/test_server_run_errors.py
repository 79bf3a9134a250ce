"""A run that fails, over plain REST: Letta's error status and body, never a silent 200."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import letta_client
import pytest
from letta_client import Letta

from stateloop.testing.scripted import error, reply
from test_server_support import Script, Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)


@pytest.mark.parametrize(("kind", "status", "letta_type"), [
    ("authentication", 401, "llm_authentication"),
    ("invalid_request", 400, "llm_bad_request"),
])
def test_a_provider_error_is_letta_s_error_response_saying_why(
        server: Server, script: Script, kind: str, status: int, letta_type: str) -> None:
    # Retries left on: the answer tells the client not to send the run again.
    client = Letta(base_url=server.url, api_key="unused", max_retries=2, timeout=30)
    agent = new_agent(client)
    script.set(error(kind, "the provider said no"))
    with pytest.raises(letta_client.APIStatusError) as caught:
        client.agents.messages.create(agent.id, input="hi")
    assert caught.value.status_code == status
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == letta_type and body["stop_reason"] == "llm_api_error"
    assert "the provider said no" in body["error"]["detail"]
    assert "the provider said no" in body["detail"]
    assert len(script.requests) == 1  # not retried
    run = client.runs.retrieve(body["run_id"])
    assert (run.status, run.stop_reason) == ("failed", "llm_api_error")
    # The stream says the same in its error frame; the agent goes on afterwards.
    script.set(error(kind, "the provider said no"))
    frames = list(client.agents.messages.create(agent.id, input="again", streaming=True))
    [frame] = [f for f in frames if f.message_type == "error_message"]
    assert "the provider said no" in frame.message  # type: ignore[union-attr]
    script.set(reply("fine now"))
    done = client.agents.messages.create(agent.id, input="once more")
    assert [getattr(m, "content", None) for m in done.messages] == ["fine now"]


def test_an_overloaded_provider_after_retries_is_503(client: Letta, script: Script,
                                                     server: Server) -> None:
    agent = new_agent(client)
    script.set(*[error("overloaded", "busy")] * 10)
    with pytest.raises(letta_client.APIStatusError) as caught:
        client.agents.messages.create(agent.id, input="hi")
    assert caught.value.status_code == 503
    assert isinstance(caught.value.body, dict) and "busy" in caught.value.body["detail"]
