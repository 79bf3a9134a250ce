"""Projects through letta-client, on SQLite and PostgreSQL: keys of two projects and an admin
naming a project (``X-Project-Id`` / ``X-Project``, as letta-client sends them) each see
and reach only their project's agents and what is reached through them: the others are 404
(never 403), in lists, counts, by id and by name, their messages, memory, runs' context, and
git; an admin naming no project sees all, and the default project keeps a single-user server
as it was."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from functools import partial
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

PASSWORD = "projects-password"


@pytest.fixture(params=["sqlite", "postgresql"])
def guarded(request: pytest.FixtureRequest, fake: FakeOpenAI, tmp_path: Path
            ) -> Iterator[Server]:
    url = (request.getfixturevalue("pg_database")() if request.param == "postgresql"
           else f"sqlite:///{tmp_path / 'stateloop.db'}")
    settings = settings_for(fake, tmp_path / "unused.db", server_password=PASSWORD,
                            database_url=url)
    with Server(settings) as running:
        yield running


def client(server: Server, key: str, **project: str) -> Letta:
    return Letta(base_url=server.url, api_key=key, max_retries=0, timeout=30, **project)


def test_a_project_sees_only_its_own_agents(guarded: Server, script: Script) -> None:
    admin = client(guarded, PASSWORD)
    alpha_key: Any = admin.post("/v1/api-keys", cast_to=object,
                                body={"name": "alpha", "project": "alpha"})
    beta_key: Any = admin.post("/v1/api-keys", cast_to=object,
                               body={"name": "beta", "project": "beta", "role": "read"})
    alpha, beta = client(guarded, alpha_key["key"]), client(guarded, beta_key["key"])
    in_beta = client(guarded, PASSWORD, project_id="beta")

    legacy = new_agent(admin, name="before-projects")  # an admin naming none: the default
    ours = new_agent(alpha, name="alpha-agent")
    theirs = new_agent(in_beta, name="beta-agent")
    script.set(reply("alpha's answer"), reply("beta's answer"))
    alpha.agents.messages.create(ours.id, messages=[{"role": "user", "content": "hi"}])
    in_beta.agents.messages.create(theirs.id, messages=[{"role": "user", "content": "hi"}])

    assert {a.id for a in admin.agents.list()} >= {legacy.id, ours.id, theirs.id}
    assert [a.id for a in alpha.agents.list()] == [ours.id]
    assert [a.id for a in beta.agents.list()] == [theirs.id]
    assert [a.id for a in in_beta.agents.list()] == [theirs.id]
    assert [a.id for a in client(guarded, PASSWORD, project="alpha").agents.list()] == [ours.id]
    assert alpha.get("/v1/agents/count", cast_to=object) == 1
    assert [a.id for a in alpha.agents.list(name="beta-agent")] == []

    for other in (theirs.id, legacy.id, "beta-agent"):
        for call in (partial(alpha.agents.retrieve, other),
                     partial(alpha.agents.messages.list, other),
                     partial(alpha.agents.blocks.list, other),
                     partial(alpha.agents.update, other, name="taken"),
                     partial(alpha.agents.delete, other),
                     partial(alpha.agents.messages.create, other, messages=[
                         {"role": "user", "content": "x"}])):
            with pytest.raises(letta_client.NotFoundError):
                call()
    with pytest.raises(letta_client.NotFoundError):
        beta.agents.retrieve(ours.id)
    with pytest.raises(letta_client.NotFoundError):
        in_beta.agents.retrieve(ours.id)
    assert any(getattr(m, "content", None) == "alpha's answer"
               for m in alpha.agents.messages.list(ours.id))
    assert admin.agents.retrieve(theirs.id).name == "beta-agent"

    # what is reached through an agent: runs, steps, messages by id, searches, chat
    [their_run] = [r.id for r in admin.runs.list(agent_id=theirs.id)]
    their_message = next(m.id for m in admin.agents.messages.list(theirs.id))
    assert {r.agent_id for r in alpha.runs.list()} == {ours.id}
    assert list(alpha.runs.list(agent_id=theirs.id)) == []
    assert {s.agent_id for s in alpha.steps.list()} == {ours.id}
    for call in (partial(alpha.runs.retrieve, their_run),
                 partial(alpha.runs.messages.list, their_run),
                 partial(alpha.messages.retrieve, their_message)):
        with pytest.raises(letta_client.NotFoundError):
            call()
    for path, body in (("/v1/messages/search", {"query": "answer"}),
                       ("/v1/agents/messages/search", {"query": "answer"})):
        found = json.dumps(alpha.post(path, body=body, cast_to=object))
        assert "beta's answer" not in found and theirs.id not in found, (path, body)
    for path in ("/v1/passages/search", "/v1/messages/search"):  # named in a body
        with pytest.raises(letta_client.NotFoundError):
            alpha.post(path, body={"query": "answer", "agent_id": theirs.id}, cast_to=object)
    with pytest.raises(letta_client.NotFoundError):
        alpha.conversations.create(agent_id=theirs.id)
    admin.conversations.create(agent_id=theirs.id)
    assert list(alpha.conversations.list()) == []
    assert list(alpha.conversations.list(agent_id=theirs.id)) == []
    assert "beta's answer" in json.dumps(admin.post("/v1/messages/search", cast_to=object,
                                                    body={"query": "answer"}))
    chat = httpx.post(f"{guarded.url}/v1/chat/completions", timeout=30, json={
        "model": theirs.id, "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {alpha_key['key']}"})
    assert chat.status_code == 404, chat.text

    # blocks: their own (the agents' memory among them), another's not found
    shared = alpha.blocks.create(label="team", value="alpha's notes")
    theirs_blocks = [b.id for b in admin.agents.blocks.list(theirs.id)]
    assert theirs_blocks and shared.id not in {b.id for b in beta.blocks.list()}
    assert set(theirs_blocks) & {b.id for b in alpha.blocks.list()} == set()
    assert shared.id in {b.id for b in alpha.blocks.list()}
    assert alpha.get("/v1/blocks/count", cast_to=object) == len(list(alpha.blocks.list()))
    for call in (partial(alpha.blocks.retrieve, theirs_blocks[0]),
                 partial(alpha.blocks.update, theirs_blocks[0], value="overwritten"),
                 partial(alpha.agents.blocks.attach, theirs_blocks[0], agent_id=ours.id),
                 partial(beta.blocks.retrieve, shared.id)):
        with pytest.raises(letta_client.NotFoundError):
            call()

    # archives, folders, identities and groups likewise
    archive = alpha.archives.create(name="alpha-archive")
    folder = alpha.folders.create(name="alpha-folder")
    identity: Any = alpha.post("/v1/identities", cast_to=object, body={
        "identifier_key": "ada", "name": "Ada", "identity_type": "user"})
    members = {"agent_ids": [ours.id], "description": "alpha's team"}
    group: Any = alpha.post("/v1/groups", cast_to=object, body=members)
    for path, made in (("/v1/archives", archive.id), ("/v1/folders", folder.id),
                       ("/v1/identities", identity["id"]), ("/v1/groups", group["id"])):
        assert made in json.dumps(alpha.get(path, cast_to=object)), path
        assert made not in json.dumps(in_beta.get(path, cast_to=object)), path
        assert made in json.dumps(admin.get(path, cast_to=object)), path
        with pytest.raises(letta_client.NotFoundError):
            in_beta.get(f"{path}/{made}", cast_to=object)
    for path in ("/v1/folders/count", "/v1/identities/count", "/v1/groups/count"):
        assert in_beta.get(path, cast_to=object) == 0, path
    with pytest.raises(letta_client.NotFoundError):
        in_beta.get("/v1/folders/name/alpha-folder", cast_to=object)
    with pytest.raises(letta_client.NotFoundError):
        in_beta.post("/v1/groups", cast_to=object, body=members)

    # another project's is as unknown as an id that never was: the same status and detail
    def never(known: str) -> str:
        return known[:-12] + "0" * 12

    with httpx.Client(base_url=guarded.url, timeout=30,
                      headers={"Authorization": f"Bearer {alpha_key['key']}"}) as http:
        for path, known in (("/v1/agents/{}", theirs.id), ("/v1/agents/{}/messages", theirs.id),
                            ("/v1/agents/{}/core-memory/blocks", theirs.id),
                            ("/v1/blocks/{}", theirs_blocks[0]), ("/v1/runs/{}", their_run),
                            ("/v1/runs/{}/messages", their_run),
                            ("/v1/messages/{}", their_message)):
            theirs_answer = http.get(path.format(known))
            none_answer = http.get(path.format(never(known)))
            assert (theirs_answer.status_code, theirs_answer.text.replace(known, "X")) == (
                none_answer.status_code, none_answer.text.replace(never(known), "X")), path
        with httpx.Client(base_url=guarded.url, timeout=30,
                          headers={"Authorization": f"Bearer {PASSWORD}",
                                   "X-Project-Id": "beta"}) as beta_http:
            for path, known in (("/v1/archives/{}", archive.id), ("/v1/folders/{}", folder.id),
                                ("/v1/identities/{}", identity["id"]),
                                ("/v1/groups/{}", group["id"])):
                theirs_answer = beta_http.get(path.format(known))
                none_answer = beta_http.get(path.format(never(known)))
                assert (theirs_answer.status_code, theirs_answer.text.replace(known, "X")) == (
                    none_answer.status_code, none_answer.text.replace(never(known), "X")), path

    # a key may not act in another project; a token only for its project's agents
    with pytest.raises(letta_client.PermissionDeniedError, match="belongs to project"):
        client(guarded, alpha_key["key"], project_id="beta").agents.list()
    with pytest.raises(letta_client.NotFoundError):
        alpha.access_tokens.create(hostname="https://app.example", policy=[
            {"type": "agent", "id": theirs.id, "access": ["read_messages"]}])

    # git memory: another project's agent's repository is not found
    basic = base64.b64encode(f"x:{alpha_key['key']}".encode()).decode()
    refs = "/state.git/info/refs?service=git-upload-pack"
    with httpx.Client(base_url=guarded.url, timeout=30,
                      headers={"Authorization": f"Basic {basic}"}) as http:
        assert http.get(f"/v1/git/{ours.id}{refs}").status_code == 200
        assert http.get(f"/v1/git/{theirs.id}{refs}").status_code == 404

    # the audit log says which project each write acted in
    log: Any = admin.get("/v1/audit", cast_to=object, options={"params": {"limit": 100}})
    made = {(e["credential"], e["project"]) for e in log
            if (e["method"], e["route"]) == ("POST", "/v1/agents")}
    assert made == {("server-password", None), (f"key-{alpha_key['id']}", "alpha"),
                    ("server-password", "beta")}
