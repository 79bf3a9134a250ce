"""The real ``git`` program against a served memory repository: clone, pull, push (a change
reaching the agent's next model request), and what is refused with a message git prints
(bad files, limits, read-only blocks, a stale push, other branches, no credentials, too
large a push); on SQLite, and on PostgreSQL across two server processes."""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_script import Script
from stateloop.server.services.git_http import GitLimits, check_pack
from stateloop.store import open_store
from stateloop.store.memory_push import PushRefused
from stateloop.store.records import AgentRecord, BlockRecord
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, settings_for

PASSWORD = "s3cret-pass"
HEADERS = {"Authorization": f"Bearer {PASSWORD}"}


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(script) as server:
        yield server


@pytest.fixture(scope="module")
def server(fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("git") / "stateloop.db"
    with Server(settings_for(fake, db, server_password=PASSWORD, max_body_bytes=64 * 1024,
                             git_max_objects=50)) as running:
        yield running


def git(*args: str, cwd: Path | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": str(cwd or Path.cwd()), "GIT_AUTHOR_NAME": "Ada Ops",
           "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada Ops",
           "GIT_COMMITTER_EMAIL": "ada@example.com"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def repo_url(server: Server, agent_id: str, password: str = PASSWORD) -> str:
    return (server.url.replace("http://", f"http://ada:{password}@")
            + f"/v1/git/{agent_id}/state.git")


def new_agent(server: Server, **block: Any) -> str:
    blocks = [{"label": "human", "value": "Name: Ann"},
              {"label": "persona", "value": "Careful.", "read_only": True}]
    if block:
        blocks.append(block)
    made = httpx.post(f"{server.url}/v1/agents", headers=HEADERS, timeout=30, json={
        "model": "openai/gpt-4o-mini", "memory_blocks": blocks, "include_base_tools": False})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


def block(server: Server, agent_id: str, label: str) -> dict[str, Any]:
    found = httpx.get(f"{server.url}/v1/agents/{agent_id}/core-memory/blocks",
                      headers=HEADERS, timeout=30)
    assert found.status_code == 200, found.text
    return next(dict(b) for b in found.json() if b["label"] == label)


def clone(server: Server, agent_id: str, where: Path) -> Path:
    git("clone", "-q", repo_url(server, agent_id), str(where), cwd=where.parent)
    return where


def commit_file(repo: Path, path: str, text: str, message: str = "edit") -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", message, cwd=repo)


def test_clone_push_and_pull_round_trip(server: Server, fake: FakeOpenAI, script: Script,
                                        tmp_path: Path) -> None:
    agent_id = new_agent(server)
    script.set("hello")
    warm = httpx.post(f"{server.url}/v1/agents/{agent_id}/messages", headers=HEADERS,
                      timeout=60, json={"messages": [{"role": "user", "content": "hi"}]})
    assert warm.status_code == 200, warm.text  # the agent is live before the push
    repo = clone(server, agent_id, tmp_path / "memory")
    assert (repo / "human.md").read_text() == "---\ndescription: null\n---\nName: Ann"
    assert (repo / "persona.md").read_text() == (
        "---\ndescription: null\nread_only: true\n---\nCareful.")
    commit_file(repo, "human.md", "---\ndescription: the user\n---\nName: Ann\nLikes tea.",
                "Ann likes tea")
    commit_file(repo, "projects/stateloop.md", "---\ndescription: a project\n---\nShip it.",
                "a project")
    pushed = git("push", "-q", "origin", "main", cwd=repo)
    assert pushed.returncode == 0
    human = block(server, agent_id, "human")
    assert (human["value"], human["description"]) == ("Name: Ann\nLikes tea.", "the user")
    assert block(server, agent_id, "projects/stateloop")["value"] == "Ship it."
    history = httpx.get(f"{server.url}/v1/agents/{agent_id}/memory/commits", headers=HEADERS,
                        timeout=30).json()
    assert [(c["message"], c["author_name"], c["author_id"]) for c in history[:2]] == [
        ("a project", "Ada Ops", "ada@example.com"),
        ("Ann likes tea", "Ada Ops", "ada@example.com")]

    script.set("hello")  # the pushed memory is in the next model request
    sent = httpx.post(f"{server.url}/v1/agents/{agent_id}/messages", headers=HEADERS,
                      timeout=60, json={"messages": [{"role": "user", "content": "hi"}]})
    assert sent.status_code == 200, sent.text
    system = str(fake.requests[-1].body["messages"][0]["content"])
    assert "Likes tea." in system and "Ship it." in system

    edit = httpx.patch(f"{server.url}/v1/agents/{agent_id}/core-memory/blocks/human",
                       headers=HEADERS, timeout=30, json={"value": "Name: Ann\nLikes coffee."})
    assert edit.status_code == 200
    git("pull", "-q", "--ff-only", cwd=repo)
    assert (repo / "human.md").read_text().endswith("Likes coffee.")
    log = git("log", "-1", "--format=%an <%ae>|%s", cwd=repo).stdout.strip()
    assert log == "REST API <user:api>|Update human"


def test_a_bad_push_is_refused_whole_with_a_message_git_prints(
        server: Server, tmp_path: Path) -> None:
    agent_id = new_agent(server, label="short", value="x", limit=20)
    repo = clone(server, agent_id, tmp_path / "memory")
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    cases = [
        ("human.md", "---\ndescription: [unclosed\n---\nv", "frontmatter is not valid YAML"),
        ("short.md", "---\ndescription: null\n---\n" + "y" * 21, "over its limit of 20"),
        ("persona.md", "---\ndescription: null\nread_only: true\n---\nReckless.",
         "block 'persona' is read-only"),
        ("bad label!.md", "v", "block label 'bad label!' must be letters, digits"),
        ("%2e2e/x.md", "v", "block label '../x' is not a plain path"),
        ("%zz.md", "v", "'%zz' is not an encoded label segment"),
        ("skills/big/SKILL.md", "---\nname: big\ndescription: d\n---\n" + "z" * 100_001,
         "block 'skills/big': value is 100001 characters, over its limit of 100000"),
        ("skills/pdf/SKILL.md", "---\nname: other\n---\nv", "name must be the skill's folder"),
    ]
    for path, text, message in cases:
        commit_file(repo, "human.md", "---\ndescription: null\n---\nName: Changed too")
        commit_file(repo, path, text)
        refused = git("push", "origin", "main", cwd=repo, check=False)
        assert refused.returncode != 0
        assert "remote rejected" in refused.stderr and message in refused.stderr, refused.stderr
        assert block(server, agent_id, "human")["value"] == "Name: Ann"  # nothing changed
        git("reset", "-q", "--hard", head, cwd=repo)
    git("rm", "-q", "persona.md", cwd=repo)
    git("commit", "-qm", "drop persona", cwd=repo)
    refused = git("push", "origin", "main", cwd=repo, check=False)
    assert "read-only and cannot be deleted" in refused.stderr
    git("reset", "-q", "--hard", head, cwd=repo)
    commit_file(repo, "human.md", "v")
    other = git("push", "origin", "main:refs/heads/other", cwd=repo, check=False)
    assert "only refs/heads/main can be pushed" in other.stderr
    history = httpx.get(f"{server.url}/v1/agents/{agent_id}/memory/commits", headers=HEADERS,
                        timeout=30).json()
    assert [c["message"] for c in history] == ["Create agent"]


def test_a_stale_push_is_refused_and_loses_nothing(server: Server, tmp_path: Path) -> None:
    agent_id = new_agent(server)
    first = clone(server, agent_id, tmp_path / "first")
    second = clone(server, agent_id, tmp_path / "second")
    commit_file(first, "human.md", "---\ndescription: null\n---\nName: First")
    git("push", "-q", "origin", "main", cwd=first)
    commit_file(second, "human.md", "---\ndescription: null\n---\nName: Second")
    stale = git("push", "origin", "main", cwd=second, check=False)
    assert stale.returncode != 0 and "fetch first" in stale.stderr, stale.stderr
    forced = git("push", "--force", "origin", "main", cwd=second, check=False)
    assert forced.returncode != 0 and "non-fast-forward" in forced.stderr, forced.stderr
    assert block(server, agent_id, "human")["value"] == "Name: First"


def test_git_needs_the_servers_credentials(server: Server, tmp_path: Path) -> None:
    agent_id = new_agent(server)
    wrong = git("clone", repo_url(server, agent_id, "nope"), str(tmp_path / "x"),
                cwd=tmp_path, check=False)
    assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr, wrong.stderr
    bare = f"{server.url}/v1/git/{agent_id}/state.git"
    assert git("clone", bare, str(tmp_path / "y"), cwd=tmp_path, check=False).returncode != 0
    bearer = git("-c", f"http.extraHeader=Authorization: Bearer {PASSWORD}", "clone", "-q",
                 bare, str(tmp_path / "z"), cwd=tmp_path)
    assert bearer.returncode == 0 and (tmp_path / "z" / "human.md").exists()
    missing = git("clone", repo_url(server, "agent-nope"), str(tmp_path / "w"), cwd=tmp_path,
                  check=False)
    assert missing.returncode != 0 and "not found" in missing.stderr
    refs = httpx.get(f"{bare}/info/refs", headers=HEADERS, timeout=30)
    assert refs.status_code == 403 and "smart HTTP" in refs.json()["detail"]


def test_a_page_on_another_origin_cannot_push_or_revert(server: Server) -> None:
    """A browser holding the credentials still sends its page's Origin: a push or a revert
    from another site is refused before it reads the body, and memory is unchanged."""
    agent_id = new_agent(server)
    elsewhere = {**HEADERS, "Origin": "https://elsewhere.example"}
    pushed = httpx.post(f"{server.url}/v1/git/{agent_id}/state.git/git-receive-pack",
                        headers={**elsewhere,
                                 "Content-Type": "application/x-git-receive-pack-request"},
                        content=b"0000", timeout=30)
    assert pushed.status_code == 403, pushed.text
    reverted = httpx.post(f"{server.url}/v1/agents/{agent_id}/memory/revert",
                          headers=elsewhere, json={"commit": "HEAD"}, timeout=30)
    assert reverted.status_code == 403, reverted.text
    assert block(server, agent_id, "human")["value"] == "Name: Ann"


def test_too_large_a_push_is_refused(server: Server, tmp_path: Path) -> None:
    agent_id = new_agent(server)
    repo = clone(server, agent_id, tmp_path / "memory")
    for i in range(60):  # over the server's 50 objects (git_max_objects)
        commit_file(repo, "human.md", f"---\ndescription: null\n---\nName: {i}")
    many = git("push", "origin", "main", cwd=repo, check=False)
    assert many.returncode != 0 and "the limit is 50" in many.stderr, many.stderr
    git("reset", "-q", "--hard", "origin/main", cwd=repo)
    commit_file(repo, "human.md", os.urandom(200_000).hex())  # over the 64 KB body limit
    large = git("push", "origin", "main", cwd=repo, check=False)
    assert large.returncode != 0 and "413" in large.stderr, large.stderr
    assert block(server, agent_id, "human")["value"] == "Name: Ann"


def test_a_push_bomb_stops_at_its_declared_sizes() -> None:
    size = 50 * 1024 * 1024  # 50 MB of zeros: about 50 KB deflated
    data = zlib.compress(b"\0" * size, 9)
    header = bytearray([0x30 | (size & 15) | 0x80])  # a blob, its size as a varint
    rest = size >> 4
    while rest:
        header.append((rest & 0x7F) | (0x80 if rest >> 7 else 0))
        rest >>= 7
    pack = b"PACK" + struct.pack(">II", 2, 1) + bytes(header) + data
    with pytest.raises(PushRefused, match="the limit is 1048576"):
        check_pack(pack, GitLimits())
    lying = b"PACK" + struct.pack(">II", 2, 1) + bytes([0x35]) + data  # declares 5 bytes
    with pytest.raises(PushRefused, match="larger than it declares"):
        check_pack(lying, GitLimits())


def test_two_processes_on_postgresql_serve_one_history(
        fake: FakeOpenAI, script: Script, pg_database: Any, tmp_path: Path) -> None:
    url = pg_database()
    with Server(settings_for(fake, tmp_path / "unused.db", database_url=url,
                             server_password=PASSWORD)) as one, \
            Server(settings_for(fake, tmp_path / "unused.db", database_url=url,
                                server_password=PASSWORD)) as two:
        agent_id = new_agent(one)
        script.set("ok")
        warm = httpx.post(f"{one.url}/v1/agents/{agent_id}/messages", headers=HEADERS,
                          timeout=60, json={"messages": [{"role": "user", "content": "hi"}]})
        assert warm.status_code == 200, warm.text  # the agent is live in process one
        first = clone(one, agent_id, tmp_path / "first")
        second = clone(two, agent_id, tmp_path / "second")
        commit_file(first, "human.md", "---\ndescription: null\n---\nName: Via two")
        git("push", "-q", repo_url(two, agent_id), "main", cwd=first)
        assert block(one, agent_id, "human")["value"] == "Name: Via two"
        commit_file(second, "human.md", "---\ndescription: null\n---\nName: Stale")
        stale = git("push", repo_url(one, agent_id), "main", cwd=second, check=False)
        assert stale.returncode != 0 and "fetch first" in stale.stderr, stale.stderr
        git("pull", "-q", "--rebase=false", "-X", "theirs", repo_url(one, agent_id), "main",
            cwd=second, check=False)
        git("reset", "-q", "--hard", "FETCH_HEAD", cwd=second)
        assert (second / "human.md").read_text().endswith("Name: Via two")
        script.set("ok")  # process one's live agent sees the push made through two
        sent = httpx.post(f"{one.url}/v1/agents/{agent_id}/messages", headers=HEADERS,
                          timeout=60, json={"messages": [{"role": "user", "content": "hi"}]})
        assert sent.status_code == 200, sent.text
        assert "Name: Via two" in str(fake.requests[-1].body["messages"][0]["content"])
        history = httpx.get(f"{one.url}/v1/agents/{agent_id}/memory/commits",
                            headers=HEADERS, timeout=30).json()
        assert [c["message"] for c in history] == ["edit", "Create agent"]


def test_health_answers_while_a_large_history_is_cloned(fake: FakeOpenAI,
                                                        tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    agent = AgentRecord(name="historian")
    human = BlockRecord(label="human", value="n=0")

    async def fill() -> None:
        store = await open_store(f"sqlite:///{db}")
        await store.create_agent(agent, [human])
        for i in range(1, 1500):
            await store.update_block(human.id, value=f"n={i}")
        await store.close()

    asyncio.run(fill())
    with Server(settings_for(fake, db)) as running:
        cloned: list[subprocess.CompletedProcess[str]] = []
        url = f"{running.url}/v1/git/{agent.id}/state.git"
        worker = threading.Thread(target=lambda: cloned.append(
            git("clone", "-q", url, str(tmp_path / "big"), cwd=tmp_path, check=False)))
        worker.start()
        slowest = 0.0
        with httpx.Client(base_url=running.url, timeout=30) as http:
            while worker.is_alive():
                started = time.perf_counter()
                assert http.get("/v1/health").status_code == 200
                slowest = max(slowest, time.perf_counter() - started)
                time.sleep(0.02)
        worker.join()
    assert cloned[0].returncode == 0, cloned[0].stderr
    count = git("rev-list", "--count", "HEAD", cwd=tmp_path / "big").stdout.strip()
    assert count == "1500"
    assert slowest < 5.0, slowest  # the pack is made off the event loop


def test_a_push_too_deep_or_with_a_symlink_is_refused(server: Server, tmp_path: Path) -> None:
    agent_id = new_agent(server)
    repo = clone(server, agent_id, tmp_path / "memory")
    commit_file(repo, "/".join(["d"] * 40) + "/deep.md", "v")
    deep = git("push", "origin", "main", cwd=repo, check=False)
    assert deep.returncode != 0 and "nest at most 32 deep" in deep.stderr, deep.stderr
    git("reset", "-q", "--hard", "origin/main", cwd=repo)
    (repo / "link.md").symlink_to("/etc/passwd")
    git("add", "link.md", cwd=repo)
    git("commit", "-qm", "a link", cwd=repo)
    link = git("push", "origin", "main", cwd=repo, check=False)
    assert link.returncode != 0 and "only plain files and folders" in link.stderr, link.stderr
    assert block(server, agent_id, "human")["value"] == "Name: Ann"


def test_letta_codes_layout_keeps_a_pushed_name_and_the_settings_it_cannot_carry(
        server: Server, tmp_path: Path) -> None:
    """An agent with a root index (block MEMORY) is served as Letta Code's memfs-v2:
    MEMORY.md without frontmatter, every other file with exactly ``name`` and
    ``description``. A name a push gives a file stays through later edits made on the
    server; ``read_only`` and ``metadata``, which the layout cannot carry, stay in the store
    and still hold."""
    agent_id = new_agent(server, label="MEMORY", value="# Memory\n- [human](human.md)\n",
                         description="Root memory index.")
    tagged = httpx.patch(f"{server.url}/v1/agents/{agent_id}/core-memory/blocks/MEMORY",
                         headers=HEADERS, timeout=30, json={"metadata": {"k": 1}})
    assert tagged.json()["metadata"] == {"k": 1}
    repo = clone(server, agent_id, tmp_path / "memory")
    assert (repo / "MEMORY.md").read_text() == "# Memory\n- [human](human.md)\n"
    assert (repo / "human.md").read_text() == (
        '---\nname: "Human"\ndescription: "(no description)"\n---\nName: Ann')
    assert (repo / "persona.md").read_text().startswith('---\nname: "Persona"\n')
    commit_file(repo, "human.md", '---\nname: "Ann\'s profile"\ndescription: "The user"\n'
                '---\nName: Ann\nLikes tea.', "Ann likes tea")
    commit_file(repo, "MEMORY.md", "# Memory\n- [human](human.md): who Ann is\n", "index")
    git("push", "-q", "origin", "main", cwd=repo)
    human = block(server, agent_id, "human")
    assert (human["value"], human["description"]) == ("Name: Ann\nLikes tea.", "The user")
    index = block(server, agent_id, "MEMORY")
    assert (index["description"], index["metadata"]) == ("Root memory index.", {"k": 1})
    assert block(server, agent_id, "persona")["read_only"] is True

    edited = httpx.patch(f"{server.url}/v1/agents/{agent_id}/core-memory/blocks/human",
                         headers=HEADERS, timeout=30, json={"value": "Name: Ann\nLikes tea!"})
    assert edited.status_code == 200, edited.text
    git("pull", "-q", "origin", "main", cwd=repo)
    assert (repo / "human.md").read_text() == (
        '---\nname: "Ann\'s profile"\ndescription: "The user"\n---\nName: Ann\nLikes tea!')

    commit_file(repo, "persona.md", '---\nname: "Persona"\ndescription: "x"\n---\nReckless.')
    refused = git("push", "origin", "main", cwd=repo, check=False)
    assert refused.returncode != 0 and "block 'persona' is read-only" in refused.stderr
    git("reset", "-q", "--hard", "origin/main", cwd=repo)
    commit_file(repo, "human.md", '---\nname: ""\ndescription: "The user"\n---\nName: Ann')
    refused = git("push", "origin", "main", cwd=repo, check=False)
    assert refused.returncode != 0 and "human.md: name must be text, not empty" in refused.stderr
    assert block(server, agent_id, "human")["value"] == "Name: Ann\nLikes tea!"
