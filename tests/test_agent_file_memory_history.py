"""An Agent File carries an agent's memory history when asked (library and REST), under a
key Letta's importer ignores, and an import into a fresh store keeps it: the same commits
(same shas: the file holds git's own objects), messages, authors, times and contents, and a
revert works after it. A huge or malformed history is refused whole, naming the field, and
nothing is stored."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from dulwich.objects import Blob, Commit, ShaFile, Tree

from letta_spec import letta_spec
from stateloop import Agent, Block
from stateloop.agent_file import AgentFileError, import_agents
from stateloop.agent_file.memory_history import HISTORY_KEY, MAX_FILES_CHECKED, MAX_OBJECTS
from stateloop.errors import ConfigError
from stateloop.store import open_store
from stateloop.testing import ScriptedModel, call, reply
from test_server_support import Server, fake, script, server  # noqa: F401 (fixtures)


def edited_agent(url: str) -> Agent:
    model = ScriptedModel([
        call("core_memory_append", label="human", content="Likes tea."),
        call("memory", command="create", path="/memories/notes", description="n",
             file_text="Buy milk."),
        call("memory_replace", label="human", old_string="tea", new_string="green tea"),
        reply("ok")])
    agent = Agent(model=model, system="sys", name="ada", store=url,
                  tools=["core_memory_append", "memory", "memory_replace"],
                  blocks=[Block("human", "Name: Ann", description="the user"),
                          Block("skills/tea", "Boil water.", description="Brew tea")])
    agent.run_sync("remember")
    return agent


def history(agent: Agent) -> list[tuple[Any, ...]]:
    return [(c.sha, c.parent_sha, c.message, c.author_type, c.author_id, c.author_name,
             c.timestamp, c.files_changed, c.additions, c.deletions)
            for c in agent.memory_history(limit=1000)]


def test_an_export_with_history_imports_into_a_fresh_store_with_the_same_commits(
        tmp_path: Path) -> None:
    source = edited_agent(f"sqlite:///{tmp_path / 'a.db'}")
    plain = source.export_file()
    assert HISTORY_KEY not in plain  # only when asked
    data = source.export_file(memory_history=True)
    assert {k: v for k, v in data.items() if k not in (HISTORY_KEY, "created_at")} == {
        k: v for k, v in plain.items() if k != "created_at"}
    # Letta's importer: the history is the one key its AgentFileSchema does not declare, at
    # the top, where it ignores keys it does not know (its entities forbid them).
    top = letta_spec()["components"]["schemas"]["AgentFileSchema"]
    assert set(data) - set(top["properties"]) == {HISTORY_KEY}
    assert top.get("additionalProperties") is not False

    copy_ = Agent.import_file(json.loads(json.dumps(data)),
                              store=f"sqlite:///{tmp_path / 'b.db'}",
                              model=ScriptedModel([reply("hi")]))
    assert copy_.id != source.id
    assert history(copy_) == history(source)  # same shas, messages, authors, times
    for commit in source.memory_history(limit=1000):
        assert copy_.memory_at(commit.sha) == source.memory_at(commit.sha)
    first = source.memory_history(limit=1000)[-1].sha
    assert copy_.memory_diff(first) == source.memory_diff(first)
    sha = copy_.revert_memory(first)
    assert sha is not None and copy_.memory_history()[0].parent_sha == history(source)[0][0]
    assert {b.label: b.value for b in copy_.blocks} == {"human": "Name: Ann",
                                                       "skills/tea": "Boil water."}


def test_history_needs_a_persisted_agent() -> None:
    agent = Agent(model=ScriptedModel([]), system="sys", blocks=[Block("human")])
    with pytest.raises(ConfigError, match="persisted agent"):
        agent.export_file(memory_history=True)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    source = edited_agent(f"sqlite:///{tmp_path_factory.mktemp('src') / 'a.db'}")
    return source.export_file(memory_history=True)


def _object(obj: ShaFile) -> dict[str, Any]:
    return {"sha": obj.id.decode(), "type": obj.type_num,
            "data": base64.b64encode(obj.as_raw_string()).decode()}


def _forged(name: bytes, text: bytes) -> Callable[[dict[str, Any]], None]:
    """A history of one commit, well formed as git objects, whose tree holds ``name``."""
    def spoil(data: dict[str, Any]) -> None:
        blob = Blob.from_string(text)
        tree = Tree()
        tree.add(name, 0o100644, blob.id)
        commit = Commit()
        commit.tree, commit.parents = tree.id, []
        commit.author = commit.committer = b"x <user:x>"
        commit.author_time = commit.commit_time = 0
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"forged\n"
        sha = commit.id.decode()
        data[HISTORY_KEY][0].update(
            objects=[_object(o) for o in (blob, tree, commit)], head=sha,
            commits=[{"sha": sha, "author_type": "user", "author_id": "x",
                      "author_name": "x", "timestamp": 0}])
    return spoil


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("not a list", lambda d: d.__setitem__(HISTORY_KEY, {"x": 1}), HISTORY_KEY),
    ("unknown agent", lambda d: d[HISTORY_KEY][0].__setitem__("agent_id", "agent-9"),
     f"{HISTORY_KEY}.0.agent_id"),
    ("a sha its data does not hash to",
     lambda d: d[HISTORY_KEY][0]["objects"][0].__setitem__("sha", "0" * 40),
     f"{HISTORY_KEY}.0.objects.0.sha"),
    ("bad base64", lambda d: d[HISTORY_KEY][0]["objects"][0].__setitem__("data", "%%%"),
     f"{HISTORY_KEY}.0.objects.0.data"),
    ("a tag object", lambda d: d[HISTORY_KEY][0]["objects"][0].__setitem__("type", 4),
     f"{HISTORY_KEY}.0.objects.0"),
    ("an object over 1 MB", lambda d: d[HISTORY_KEY][0]["objects"].append(
        {"sha": "0" * 40, "type": 3, "data": "A" * 1_400_000}), "data"),
    ("commits out of order", lambda d: d[HISTORY_KEY][0]["commits"].reverse(),
     f"{HISTORY_KEY}.0.commits.0.sha"),
    ("a head that is not the last commit",
     lambda d: d[HISTORY_KEY][0].__setitem__("head", d[HISTORY_KEY][0]["commits"][0]["sha"]),
     f"{HISTORY_KEY}.0.head"),
    ("a missing tree", lambda d: d[HISTORY_KEY][0].__setitem__("objects", [
        o for o in d[HISTORY_KEY][0]["objects"] if o["type"] != 2]), "missing"),
    ("a bad author type", lambda d: d[HISTORY_KEY][0]["commits"][0].__setitem__(
        "author_type", "root"), f"{HISTORY_KEY}.0.commits.0.author_type"),
    ("a time that is no number", lambda d: d[HISTORY_KEY][0]["commits"][0].__setitem__(
        "timestamp", "yesterday"), f"{HISTORY_KEY}.0.commits.0.timestamp"),
    ("a block file that does not parse",
     _forged(b"human.md", b"---\ndescription: [unclosed\n---\nv"),
     "human.md: frontmatter is not valid YAML"),
    ("a label reaching outside", _forged(b"%2e2e.md", b"v"), "'..' is not a plain path"),
    ("a file named by a list", _forged(b"x.md", b"---\nname: [y]\n---\nv"),
     "x.md: name must be text"),
    ("an unknown field", _forged(b"x.md", b"---\nowner: y\n---\nv"),
     "unknown frontmatter fields"),
]


@pytest.mark.parametrize(("case", "spoil", "named"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_a_malformed_history_is_refused_naming_it_and_stores_nothing(
        exported: dict[str, Any], tmp_path: Path, case: str,
        spoil: Callable[[dict[str, Any]], None], named: str) -> None:
    data = copy.deepcopy(exported)
    spoil(data)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with pytest.raises(AgentFileError) as refused:
        await import_agents(data, store=url)
    assert named in str(refused.value), str(refused.value)
    assert await (await open_store(url)).list_agents() == []


async def test_a_history_whose_trees_cost_too_much_to_check_is_refused(
        exported: dict[str, Any], tmp_path: Path) -> None:
    """Few objects, much work: one tree of 1,000 files under 2,001 commits."""
    blob = Blob.from_string(b"x")
    tree = Tree()
    for number in range(1000):
        tree.add(f"f{number}.txt".encode(), 0o100644, blob.id)
    commits: list[Commit] = []
    for number in range(MAX_FILES_CHECKED // 1000 + 1):
        commit = Commit()
        commit.tree, commit.parents = tree.id, [commits[-1].id] if commits else []
        commit.author = commit.committer = b"x <user:x>"
        commit.author_time = commit.commit_time = number
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"again\n"
        commits.append(commit)
    data = copy.deepcopy(exported)
    data[HISTORY_KEY][0].update(
        objects=[_object(o) for o in (blob, tree, *commits)], head=commits[-1].id.decode(),
        commits=[{"sha": c.id.decode(), "author_type": "user", "author_id": "x",
                  "author_name": "x", "timestamp": 0} for c in commits])
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with pytest.raises(AgentFileError, match=rf"{HISTORY_KEY}.0.commits: .* over "
                                             rf"{MAX_FILES_CHECKED} files"):
        await import_agents(data, store=url)
    assert await (await open_store(url)).list_agents() == []


def test_a_huge_history_is_a_400_over_rest_and_stores_nothing(
        exported: dict[str, Any], server: Server) -> None:
    data = copy.deepcopy(exported)
    tiny = _object(Blob.from_string(b"x"))
    data[HISTORY_KEY][0]["objects"] += [tiny] * MAX_OBJECTS
    http = httpx.Client(base_url=server.url, timeout=120, headers={"X-Requested-With": "test"})
    before = http.get("/v1/agents").json()
    answer = http.post("/v1/agents/import", files={"file": ("a.af", json.dumps(data))})
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert f"{HISTORY_KEY}.0.objects" in detail and f"over the {MAX_OBJECTS}" in detail
    assert http.get("/v1/agents").json() == before


def test_rest_exports_the_history_when_asked_and_an_import_keeps_it(server: Server) -> None:
    http = httpx.Client(base_url=server.url, timeout=60, headers={"X-Requested-With": "test"})
    made = http.post("/v1/agents", json={"model": "openai/gpt-4o-mini",
                                         "memory_blocks": [{"label": "human", "value": "A"}]})
    agent_id = made.json()["id"]
    for value in ("B", "C"):
        http.patch(f"/v1/agents/{agent_id}/core-memory/blocks/human", json={"value": value})
    assert HISTORY_KEY not in http.get(f"/v1/agents/{agent_id}/export").json()
    assert HISTORY_KEY not in http.post(f"/v1/agents/{agent_id}/export", json={}).json()
    data = http.post(f"/v1/agents/{agent_id}/export",
                     json={"include_memory_history": True}).json()
    imported = http.post("/v1/agents/import", files={"file": ("a.af", json.dumps(data))})
    assert imported.status_code == 200, imported.text
    [new_id] = imported.json()["agent_ids"]

    def commits(agent: str) -> list[tuple[Any, ...]]:
        return [(c["sha"], c["message"], c["author_name"], c["timestamp"]) for c in
                http.get(f"/v1/agents/{agent}/memory/commits").json()]

    assert commits(new_id) == commits(agent_id)
    first = commits(agent_id)[-1][0]
    reverted = http.post(f"/v1/agents/{new_id}/memory/revert", json={"commit": first})
    assert reverted.status_code == 200, reverted.text
    assert http.get(f"/v1/agents/{new_id}/core-memory/blocks/human").json()["value"] == "A"
