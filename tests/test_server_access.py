"""Scoped access through letta-client, on SQLite and PostgreSQL, with several credentials at
once: the server password (an admin), API keys made over the API (admin, write, read; one
revoked, one expired), and client-side access tokens (one agent's, one deleted, one expired).
What each may do is permissions.py's rule; the audit log records every write."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import reply
from test_server_support import Server, fake, new_agent, script, settings_for  # noqa: F401 (fixtures)

PASSWORD = "s3cret-password"
APP = "https://app.example"


def later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


@pytest.fixture(params=["sqlite", "postgresql"])
def guarded(request: pytest.FixtureRequest, fake: FakeOpenAI, tmp_path: Path
            ) -> Iterator[Server]:
    url = (request.getfixturevalue("pg_database")() if request.param == "postgresql"
           else f"sqlite:///{tmp_path / 'stateloop.db'}")
    settings = settings_for(fake, tmp_path / "unused.db", server_password=PASSWORD,
                            database_url=url)
    with Server(settings) as running:
        yield running


def letta(server: Server, key: str) -> Letta:
    return Letta(base_url=server.url, api_key=key, max_retries=0, timeout=30)


def make_key(http: httpx.Client, **body: Any) -> dict[str, Any]:
    made = http.post("/v1/api-keys", json=body)
    assert made.status_code == 201, made.text
    return made.json()  # type: ignore[no-any-return]


def test_each_credential_does_what_its_role_and_policy_allow(guarded: Server,
                                                             script: Script) -> None:
    admin = letta(guarded, PASSWORD)
    http = httpx.Client(base_url=guarded.url, timeout=30,
                        headers={"Authorization": f"Bearer {PASSWORD}"})
    mine, theirs = new_agent(admin, name="mine"), new_agent(admin, name="theirs")

    writer_key = make_key(http, name="backend", role="write")
    reader_key = make_key(http, name="dashboard", role="read")
    revoked_key = make_key(http, name="old", role="write")
    expiring_key = make_key(http, name="brief", role="write", expires_at=later(1))
    assert writer_key["key"].startswith("sk-sl-") and writer_key["role"] == "write"
    listed = http.get("/v1/api-keys").json()
    assert {k["name"] for k in listed} == {"backend", "dashboard", "old", "brief"}
    assert all("key" not in k and "digest" not in k for k in listed)
    assert writer_key["key"] not in http.get("/v1/api-keys").text
    assert http.delete(f"/v1/api-keys/{revoked_key['id']}").json()["revoked_at"]

    writer, reader = letta(guarded, writer_key["key"]), letta(guarded, reader_key["key"])
    # a write key may do what an admin may, but for the admin routes
    made = new_agent(writer, name="by-writer")
    assert writer.agents.retrieve(made.id).name == "by-writer"
    with pytest.raises(letta_client.PermissionDeniedError, match="admin"):
        writer.post("/v1/api-keys", body={"name": "escalate", "role": "admin"}, cast_to=object)
    # a read key reads, and is told why it may not write
    assert {a.id for a in reader.agents.list()} >= {mine.id, theirs.id}
    with pytest.raises(letta_client.PermissionDeniedError, match="may only read"):
        reader.agents.update(mine.id, name="renamed")
    with pytest.raises(letta_client.PermissionDeniedError, match="may only read"):
        reader.agents.delete(mine.id)
    assert admin.agents.retrieve(mine.id).name == "mine"
    # revoked and expired keys are refused, saying so
    with pytest.raises(letta_client.AuthenticationError, match="revoked"):
        letta(guarded, revoked_key["key"]).agents.list()
    time.sleep(1.1)
    with pytest.raises(letta_client.AuthenticationError, match="expired"):
        letta(guarded, expiring_key["key"]).agents.list()
    with pytest.raises(letta_client.AuthenticationError):  # a made-up secret of the shape
        letta(guarded, writer_key["key"][:-4] + "AAAA").agents.list()

    # a client-side token for one agent: sends to it and reads its messages, nothing else
    created = writer.access_tokens.create(
        hostname=APP, expires_at=later(600),
        policy=[{"type": "agent", "id": mine.id, "access": ["read_messages", "write_messages"]}])
    assert created.hostname == APP and created.policy.data[0].id == mine.id
    scoped = letta(guarded, created.token)
    script.set(reply("hello from mine"))
    sent = scoped.agents.messages.create(mine.id, messages=[{"role": "user", "content": "hi"}])
    assert any(getattr(m, "content", None) == "hello from mine" for m in sent.messages)
    assert any(getattr(m, "content", None) == "hello from mine"
               for m in scoped.agents.messages.list(mine.id))
    with pytest.raises(letta_client.NotFoundError):
        scoped.agents.messages.list(theirs.id)
    with pytest.raises(letta_client.NotFoundError):
        scoped.agents.messages.create(theirs.id, messages=[{"role": "user", "content": "x"}])
    for refused in (scoped.agents.list, scoped.tools.list, lambda: scoped.agents.delete(mine.id),
                    lambda: scoped.agents.retrieve(mine.id),
                    lambda: scoped.access_tokens.create(hostname=APP, policy=[
                        {"type": "agent", "id": mine.id, "access": ["read_agent"]}])):
        with pytest.raises(letta_client.PermissionDeniedError):
            refused()
    assert admin.agents.retrieve(mine.id).id == mine.id
    # listed by handle, deleted, and refused at once
    tokens = writer.access_tokens.list(agent_id=mine.id)
    assert [t.token for t in tokens.tokens] == [created.token.partition(".")[0]]
    assert created.token not in http.get("/v1/client-side-access-tokens").text
    writer.access_tokens.delete(tokens.tokens[0].token)
    with pytest.raises(letta_client.AuthenticationError):
        scoped.agents.messages.list(mine.id)
    short = admin.access_tokens.create(hostname=APP, expires_at=later(1), policy=[
        {"type": "agent", "id": mine.id, "access": ["read_messages"]}])
    assert letta(guarded, short.token).agents.messages.list(mine.id) is not None
    time.sleep(1.1)
    with pytest.raises(letta_client.AuthenticationError, match="expired"):
        letta(guarded, short.token).agents.messages.list(mine.id)

    # the audit log: who created, changed or deleted what
    log = http.get("/v1/audit", params={"limit": 200}).json()
    writes = {(e["credential"], e["method"], e["route"], e["status"]) for e in log}
    assert ("server-password", "POST", "/v1/api-keys", 201) in writes
    assert (f"key-{writer_key['id']}", "POST", "/v1/agents", 200) in writes
    assert (f"key-{reader_key['id']}", "PATCH", "/v1/agents/{agent_id}", 403) in writes
    assert (f"token-{created.token[6:30]}", "POST", "/v1/agents/{agent_id}/messages",
            200) in writes
    assert [e["seq"] for e in log] == sorted((e["seq"] for e in log), reverse=True)
    older = http.get("/v1/audit", params={"before": log[1]["seq"], "limit": 1}).json()
    assert older == log[2:3]
    with pytest.raises(letta_client.PermissionDeniedError):
        reader.get("/v1/audit", cast_to=object)
