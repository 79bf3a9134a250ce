"""Access on a fleet: two ``stateloop serve`` processes on one PostgreSQL. A key or token made
through one works through the other; revoked or deleted through one, the other refuses it on
the very next request (the store is read on each, nothing is cached); the audit log holds
the writes made through both; no secret reaches a log."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from test_cli_support import Cli, cli, fake, script, serving  # noqa: F401 (fixtures)

PASSWORD = "fleet-password"


def test_revocations_hold_at_once_on_every_process(cli: Cli,
                                                   pg_database: Callable[..., str]) -> None:
    cli.env["STATELOOP_DATABASE_URL"] = pg_database()
    cli.env["STATELOOP_SERVER_PASSWORD"] = PASSWORD
    with serving(cli) as first, serving(cli) as second:
        admin = Letta(base_url=first, api_key=PASSWORD, max_retries=0, timeout=30)
        agent = admin.agents.create(model="openai/gpt-4o-mini", include_base_tools=False,
                                    memory_blocks=[{"label": "human", "value": "?"}]).id
        token = admin.access_tokens.create(hostname="https://app.example", policy=[
            {"type": "agent", "id": agent, "access": ["read_messages"]}])
        key: Any = admin.post("/v1/api-keys", cast_to=object,
                              body={"name": "worker", "role": "read"})
        holder = Letta(base_url=second, api_key=token.token, max_retries=0, timeout=30)
        reader = Letta(base_url=second, api_key=key["key"], max_retries=0, timeout=30)
        assert list(holder.agents.messages.list(agent)) is not None
        assert agent in {a.id for a in reader.agents.list()}

        admin.access_tokens.delete(token.token)
        with pytest.raises(letta_client.AuthenticationError):
            holder.agents.messages.list(agent)
        admin.delete(f"/v1/api-keys/{key['id']}", cast_to=object)
        with pytest.raises(letta_client.AuthenticationError, match="revoked"):
            reader.agents.list()

        other = Letta(base_url=second, api_key=PASSWORD, max_retries=0, timeout=30)
        log: Any = other.get("/v1/audit", cast_to=object)
        routes = [(entry["method"], entry["route"]) for entry in log]
        assert ("DELETE", "/v1/client-side-access-tokens/{token}") in routes
        assert ("DELETE", "/v1/api-keys/{key_id}") in routes
        assert ("POST", "/v1/agents") in routes
        deleted = next(e["path"] for e in log if e["route"].endswith("{token}"))
        assert deleted == f"/v1/client-side-access-tokens/{token.token[:30]}.<redacted>"
    # no secret in either process's log, though one was in a path it served
    logs = [path.read_text() for path in cli.db.parent.glob("serve-*.log")]
    assert len(logs) == 2 and any(token.token[:30] in text for text in logs)
    assert not any(secret in text for text in logs for secret in (token.token, key["key"]))
