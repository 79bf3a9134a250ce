"""Ids a client sees are Letta's ``kind-<uuid4>`` and cannot be guessed from one another
(conversations, messages, runs, identities, agents, blocks), and no list's order depends on
them: pages come in creation order whatever the ids."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
from letta_client import Letta

from fake_script import Script
from patience import ANSWERS
from stateloop.messages import new_call_id
from stateloop.store import AgentRecord
from stateloop.store.conversations import ConversationRecord
from stateloop.store.sql import SqlStore
from stateloop.testing.scripted import reply
from test_server_support import Server, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

# Letta's own check of a path id (letta/validators.py, 0.16.8): a version 4 UUID after the kind.
UUID4 = "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
RANDOM_BITS = (1 << 80) - 1  # below the 48 bits of time a UUID may start with


def assert_unguessable(kind: str, first: str, second: str) -> None:
    """Both ids in Letta's shape, and far apart: 74 random bits differ in ~37 places, a
    counter's next value in a handful."""
    for found in (first, second):
        assert re.fullmatch(f"{kind}-{UUID4}", found), found
    one, two = (uuid.UUID(found.removeprefix(f"{kind}-")).int & RANDOM_BITS
                for found in (first, second))
    assert bin(one ^ two).count("1") >= 12, (first, second)


def test_ids_of_consecutive_creations_are_random(client: Letta, server: Server,
                                                 script: Script) -> None:
    script.set(reply("one"), reply("two"))
    agents = [new_agent(client) for _ in range(2)]
    assert_unguessable("agent", *(a.id for a in agents))
    assert_unguessable("block", *(a.memory.blocks[0].id for a in agents))
    conversations = [client.conversations.create(agent_id=agents[0].id).id for _ in range(2)]
    assert_unguessable("conv", *conversations)

    frames: list[Any] = []
    for conversation, text in zip(conversations, ("hello", "again"), strict=True):
        frames += client.conversations.messages.create(conversation, input=text,
                                                       include_pings=False)
    runs = [getattr(f, "run_id", None) for f in frames]
    assert_unguessable("run", *dict.fromkeys(r for r in runs if r))
    stored = client.conversations.messages.list(conversations[0], order="asc").items
    user, answer = (m.id for m in stored if m.message_type in ("user_message",
                                                               "assistant_message"))
    assert_unguessable("message", user, answer)

    identities = [httpx.post(f"{server.url}/v1/identities", timeout=ANSWERS, json={
        "identifier_key": f"key-{n}-{uuid.uuid4().hex}", "name": "Ada",
        "identity_type": "user"}).json()["id"] for n in range(2)]  # not in letta-client
    assert_unguessable("identity", *identities)


async def test_the_stores_lists_keep_creation_order_whatever_the_ids(
        store: SqlStore) -> None:
    """Ids that sort against their creation order (as random ones may): lists, and pages
    walked with an id cursor, still come oldest first."""
    backwards = [f"{n:x}" * 8 for n in range(15, 6, -1)]  # ffff..., eeee..., ...
    agents = [await store.create_agent(AgentRecord(name="ada", model="openai/gpt-4o-mini",
                                                   system="", id=f"agent-{key}"))
              for key in backwards]
    assert [a.id for a in await store.list_agents()] == [a.id for a in agents]
    made = [(await store.create_conversation(
        ConversationRecord(agent_id=agents[0].id, id=f"conv-{key}"), [], [])).id
        for key in backwards]
    walked: list[str] = []
    while page := await store.list_conversations(agents[0].id, order="asc", limit=4,
                                                 after=walked[-1] if walked else None):
        walked += [c.id for c in page]
    assert walked == made
    assert [c.id for c in await store.list_conversations(agents[0].id)] == made[::-1]


def test_tool_call_ids_are_random_and_fit_every_provider() -> None:
    first, second = new_call_id(), new_call_id("toolcall")
    assert re.fullmatch("call-[0-9a-f]{24}", first) and len(second) <= 40  # OpenAI's limit
    assert bin(int(first[-24:], 16) ^ int(second[-24:], 16)).count("1") >= 12
