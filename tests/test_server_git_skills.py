"""Skills and path labels through the server: a ``SKILL.md`` pushed with the real ``git``
program is listed in the agent's next model request and opened whole by ``open_skill``;
labels with ``/`` come in over REST (letta-client too) and traversal is a 422 naming the
label; an export carries the skills given, and an import makes them blocks."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from letta_client import Letta

from fake_script import Script
from stateloop.testing import call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_git import HEADERS, PASSWORD, clone, commit_file, git
from test_server_support import Server, fake, script, settings_for  # noqa: F401 (fixtures)

SKILL = "---\nname: pdf\ndescription: Fill PDF forms\n---\nStep 1: open the form."


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("skills") / "stateloop.db"
    with Server(settings_for(fake, db, server_password=PASSWORD)) as running:
        yield running


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=60) as client:
        yield client


def new_agent(http: httpx.Client, *blocks: dict[str, Any]) -> str:
    made = http.post("/v1/agents", json={
        "model": "openai/gpt-4o-mini", "include_base_tools": False, "tools": ["open_skill"],
        "memory_blocks": [{"label": "human", "value": "Name: Ann"}, *blocks]})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def labels(http: httpx.Client, agent_id: str) -> list[str]:
    return [b["label"] for b in http.get(f"/v1/agents/{agent_id}/core-memory/blocks").json()]


def system_prompt(fake: FakeOpenAI) -> str:
    return str(fake.requests[-1].body["messages"][0]["content"])


def test_a_pushed_skill_is_listed_in_the_next_request_and_opened_whole(
        server: Server, http: httpx.Client, fake: FakeOpenAI, script: Script,
        tmp_path: Path) -> None:
    agent_id = new_agent(http)
    repo = clone(server, agent_id, tmp_path / "memory")
    commit_file(repo, "skills/pdf/SKILL.md", SKILL, "a skill")
    git("push", "-q", "origin", "main", cwd=repo)
    skill = next(b for b in http.get(f"/v1/agents/{agent_id}/core-memory/blocks").json()
                 if b["label"] == "skills/pdf")
    assert (skill["value"], skill["description"]) == ("Step 1: open the form.",
                                                      "Fill PDF forms")

    script.set(call("open_skill", name="pdf"), reply("filled"))
    sent = http.post(f"/v1/agents/{agent_id}/messages",
                     json={"messages": [{"role": "user", "content": "fill my form"}]})
    assert sent.status_code == 200, sent.text
    first, second = fake.requests[-2:]
    system = str(first.body["messages"][0]["content"])
    assert "<available_skills>\n${MEMORY_DIR}/skills\n└── pdf/\n    └── SKILL.md " \
           "(Fill PDF forms)\n</available_skills>" in system
    assert "Step 1" not in system
    results = [m["content"] for m in second.body["messages"] if m["role"] == "tool"]
    assert results == ["Step 1: open the form."]
    # The file comes back as it was pushed: an agent skill's SKILL.md.
    git("pull", "-q", "--ff-only", cwd=repo)
    assert (repo / "skills/pdf/SKILL.md").read_text() == SKILL


def test_path_labels_come_in_over_rest_and_letta_client(server: Server,
                                                        http: httpx.Client) -> None:
    client = Letta(base_url=server.url, api_key=PASSWORD, max_retries=0, timeout=30)
    agent = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=False,
                                 memory_blocks=[{"label": "system/persona", "value": "Kind."},
                                                {"label": "skills/tea", "value": "Boil.",
                                                 "description": "Brew tea"}])
    assert client.agents.blocks.retrieve("skills/tea", agent_id=agent.id).value == "Boil."
    client.agents.blocks.update("system/persona", agent_id=agent.id, value="Very kind.")
    assert client.agents.blocks.retrieve("system/persona", agent_id=agent.id).value == \
        "Very kind."
    made = http.post("/v1/blocks", json={"label": "projects/stateloop", "value": "Ship."})
    assert made.status_code == 200, made.text
    attach = http.patch(f"/v1/agents/{agent.id}/core-memory/blocks/attach/{made.json()['id']}")
    assert attach.status_code == 200, attach.text
    assert sorted(labels(http, agent.id)) == ["projects/stateloop", "skills/tea",
                                              "system/persona"]


@pytest.mark.parametrize("label", ["../persona", "skills/../human", "/etc/passwd", "a//b",
                                   "a/", "skills/a/b", "se\\cret", "x\x07y", "."])
def test_a_traversal_label_is_a_422_naming_it_and_changes_nothing(
        http: httpx.Client, label: str) -> None:
    agent_id = new_agent(http)
    before = http.get("/v1/blocks").json()
    for method, path, body in [
            ("POST", "/v1/agents", {"model": "openai/gpt-4o-mini",
                                    "memory_blocks": [{"label": label, "value": "v"}]}),
            ("POST", "/v1/blocks", {"label": label, "value": "v"}),
            ("PATCH", f"/v1/agents/{agent_id}/core-memory/blocks/human", {"label": label})]:
        answer = http.request(method, path, json=body)
        assert answer.status_code == 422, (method, path, answer.text)
        assert repr(label) in answer.text or json.dumps(label) in answer.text, answer.text
    assert http.get("/v1/blocks").json() == before
    assert labels(http, agent_id) == ["human"]


def test_an_export_carries_the_skills_given_and_an_import_makes_them_blocks(
        http: httpx.Client) -> None:
    agent_id = new_agent(http)
    skills = [{"name": "pdf", "files": {"SKILL.md": SKILL, "scripts/fill.py": "print(1)"},
               "source_url": None},
              {"name": "slack", "files": None, "source_url": "letta:slack"}]
    exported = http.post(f"/v1/agents/{agent_id}/export", json={"skills": skills})
    assert exported.status_code == 200, exported.text
    data = exported.json()
    assert data["skills"] == skills  # written as Letta writes them
    imported = http.post("/v1/agents/import", files={"file": ("a.af", exported.content)})
    assert imported.status_code == 200, imported.text
    [new_id] = imported.json()["agent_ids"]
    found = {b["label"]: b for b in http.get(f"/v1/agents/{new_id}/core-memory/blocks").json()}
    assert (found["skills/pdf"]["value"], found["skills/pdf"]["description"]) == (
        "Step 1: open the form.", "Fill PDF forms")
    notes = imported.json()["notes"]
    assert "skill 'pdf': its files other than SKILL.md left out (scripts/fill.py)" in notes
    assert any(n.startswith("skill 'slack' left out") and "letta:slack" in n for n in notes)


def test_a_skill_named_with_traversal_is_refused_on_export_and_import(
        http: httpx.Client) -> None:
    agent_id = new_agent(http)
    bad = [{"name": "../../etc", "files": {"SKILL.md": "x"}}]
    refused = http.post(f"/v1/agents/{agent_id}/export", json={"skills": bad})
    assert refused.status_code == 422 and "'../../etc'" in refused.text, refused.text
    data = http.get(f"/v1/agents/{agent_id}/export").json()
    data["skills"] = bad
    before = http.get("/v1/agents").json()
    strict = http.post("/v1/agents/import", data={"strict": "true"},
                       files={"file": ("a.af", json.dumps(data).encode())})
    assert strict.status_code == 400 and "'../../etc'" in strict.text, strict.text
    assert http.get("/v1/agents").json() == before
    lenient = http.post("/v1/agents/import", files={"file": ("a.af", json.dumps(data))})
    assert lenient.status_code == 200, lenient.text
    assert any("'../../etc'" in n for n in lenient.json()["notes"])
    [new_id] = lenient.json()["agent_ids"]
    assert labels(http, new_id) == ["human"]


def test_a_skill_over_a_blocks_limit_is_refused_over_rest(http: httpx.Client) -> None:
    agent_id = new_agent(http, {"label": "skills/s", "value": "short"})
    big = http.post("/v1/agents", json={"model": "openai/gpt-4o-mini", "memory_blocks": [
        {"label": "skills/big", "value": "x" * 100_001}]})
    assert big.status_code in (400, 422) and "skills/big" in big.text, big.text
    grow = http.patch(f"/v1/agents/{agent_id}/core-memory/blocks/skills/s",
                      json={"value": "x" * 100_001})
    assert grow.status_code == 422 and "limit" in grow.text, grow.text
    assert next(b["value"] for b in http.get(f"/v1/agents/{agent_id}/core-memory/blocks").json()
                if b["label"] == "skills/s") == "short"


def test_a_whole_revert_over_rest_gives_back_the_commits_tree(
        server: Server, http: httpx.Client, tmp_path: Path) -> None:
    agent_id = new_agent(http)
    repo = clone(server, agent_id, tmp_path / "memory")
    commit_file(repo, "notes/readme.txt", "not a block", "a plain file")
    git("push", "-q", "origin", "main", cwd=repo)
    at = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    tree = git("rev-parse", "HEAD^{tree}", cwd=repo).stdout.strip()
    git("rm", "-q", "notes/readme.txt", cwd=repo)
    commit_file(repo, "extra.md", "---\ndescription: later\n---\nMade later.", "later")
    git("push", "-q", "origin", "main", cwd=repo)
    assert "extra" in labels(http, agent_id)

    reverted = http.post(f"/v1/agents/{agent_id}/memory/revert", json={"commit": at})
    assert reverted.status_code == 200, reverted.text
    assert reverted.json()["commit"]["parent_sha"] != at
    git("pull", "-q", "--ff-only", cwd=repo)
    assert git("rev-parse", "HEAD^{tree}", cwd=repo).stdout.strip() == tree  # equal to X
    assert (repo / "notes/readme.txt").read_text() == "not a block"
    assert labels(http, agent_id) == ["human"]
    assert http.get("/v1/blocks", params={"label": "extra"}).json() == []  # deleted


def test_client_skills_are_listed_beside_the_agents_for_that_request_only(
        server: Server, http: httpx.Client, fake: FakeOpenAI, script: Script) -> None:
    """Letta's ``client_skills`` (Letta Code sends the skills it holds with each message):
    listed in that request's available skills, grouped by folder as Letta draws them, the
    agent's own winning a shared name; the next request without them lists the agent's."""
    agent_id = new_agent(http, {"label": "skills/pdf", "value": "Step 1.",
                                "description": "Fill PDF forms"})
    client = Letta(base_url=server.url, api_key=PASSWORD)
    script.set(reply("ok"))
    client.agents.messages.create(agent_id, messages=[{"role": "user", "content": "hi"}],
                                  client_skills=[
        {"name": "commit", "description": "Write a commit\nmessage",
         "location": "/work/.skills/commit/SKILL.md"},
        {"name": "pdf", "description": "theirs", "location": "/work/.skills/pdf/SKILL.md"},
        {"name": "odd", "description": "", "location": "/opt/odd.md"}])
    assert """\
<available_skills>
${MEMORY_DIR}/skills
└── pdf/
    └── SKILL.md (Fill PDF forms)

/opt
└── odd.md

/work/.skills
└── commit/
    └── SKILL.md (Write a commit)
</available_skills>""" in system_prompt(fake)
    script.set(reply("ok"))
    client.agents.messages.create(agent_id, messages=[{"role": "user", "content": "again"}])
    assert "commit/" not in system_prompt(fake)
    assert "└── SKILL.md (Fill PDF forms)\n</available_skills>" in system_prompt(fake)

    preview = http.post(f"/v1/agents/{agent_id}/messages/preview-raw-payload", json={
        "messages": [{"role": "user", "content": "x"}], "client_skills": [
            {"name": "commit", "description": "Commit", "location": "/w/commit/SKILL.md"}]})
    assert "/w\n└── commit/\n    └── SKILL.md (Commit)" in preview.json()["messages"][0]["content"]

    bad = http.post(f"/v1/agents/{agent_id}/messages", json={
        "messages": [{"role": "user", "content": "x"}], "client_skills": [{"name": ""}]})
    assert bad.status_code == 422 and "client_skills" in bad.text
