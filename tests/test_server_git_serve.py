"""Skills through ``stateloop serve`` itself (a real process): a ``SKILL.md`` pushed with the
real ``git`` program is listed in the agent's next model request, and the agent opening it
puts its instructions in the request after."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path

import httpx

from fake_script import Script
from stateloop.testing import call, reply
from stateloop.testing.fake_openai import FakeOpenAI
from test_cli_support import Cli, cli, fake, script, serving  # noqa: F401 (fixtures)
from test_server_git import commit_file, git

SKILL = "---\nname: tea\ndescription: Brew tea well\n---\nBoil water. Steep 3 minutes."


def test_a_pushed_skill_reaches_the_served_agent_and_opens_whole(
        cli: Cli, fake: FakeOpenAI, script: Script, tmp_path: Path) -> None:
    with serving(cli) as url, httpx.Client(base_url=url, timeout=60) as http:
        made = http.post("/v1/agents", json={
            "model": "openai/gpt-4o-mini", "include_base_tools": False,
            "tools": ["open_skill"], "memory_blocks": [{"label": "human", "value": "Ann"}]})
        assert made.status_code == 200, made.text
        agent_id = made.json()["id"]
        repo = tmp_path / "memory"
        git("clone", "-q", f"{url}/v1/git/{agent_id}/state.git", str(repo), cwd=tmp_path)
        commit_file(repo, "skills/tea/SKILL.md", SKILL, "teach tea")
        git("push", "-q", "origin", "main", cwd=repo)

        script.set(call("open_skill", name="tea"), reply("Brewing."))
        sent = http.post(f"/v1/agents/{agent_id}/messages",
                         json={"messages": [{"role": "user", "content": "make tea"}]})
        assert sent.status_code == 200, sent.text
    listed, opened = fake.requests[-2:]
    system = str(listed.body["messages"][0]["content"])
    assert "└── tea/\n    └── SKILL.md (Brew tea well)\n</available_skills>" in system
    assert "Steep 3 minutes" not in system
    assert [m["content"] for m in opened.body["messages"] if m["role"] == "tool"] == [
        "Boil water. Steep 3 minutes."]
