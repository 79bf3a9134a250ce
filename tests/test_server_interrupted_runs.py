"""A server starting on a database marks the runs a stopped process left running as failed,
and leaves alone those of a process that still has the database open."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from pathlib import Path
from typing import Any

from letta_client import Letta

from killed_child import hanging, kill_when_hanging
from test_server_support import Server, client, fake, script, server, settings_for  # noqa: F401 (fixtures)


def hanging_run(db: Path, marker: Path) -> str:
    """A child whose run hangs in a tool once its run's row has committed."""
    return f"""
        import asyncio, time
        from pathlib import Path
        from stateloop import Agent, tool
        from stateloop.testing import ScriptedModel, call, reply

        @tool
        async def hang() -> str:
            '''Hang until killed.'''
            await asyncio.sleep(0.05)  # the queued run start commits meanwhile
            Path({str(marker)!r}).write_text("started")
            time.sleep(600)
            return "unreachable"

        agent = Agent(model=ScriptedModel([call("hang"), reply("x")]), tools=[hang],
                      store="sqlite:///{db}", name="crashing")
        agent.run_sync("go")
    """


def connect(server: Server) -> Letta:
    return Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


def test_a_starting_server_fails_the_runs_of_a_killed_process(fake: Any,
                                                              tmp_path: Path) -> None:
    db = tmp_path / "stateloop.db"
    kill_when_hanging(hanging_run(db, tmp_path / "hanging"), tmp_path / "hanging")
    with Server(settings_for(fake, db)) as server:
        client = connect(server)
        [run] = client.runs.list()
        assert (run.status, run.stop_reason) == ("failed", "error")
        assert client.runs.retrieve(run.id).status == "failed"
        frames = list(client.runs.messages.stream(run.id))  # its end, not 409 "in flight"
        assert [f.message_type for f in frames][:1] == ["stop_reason"]


def test_a_starting_server_leaves_the_runs_of_a_live_process_running(fake: Any,
                                                                     tmp_path: Path) -> None:
    db, marker = tmp_path / "stateloop.db", tmp_path / "hanging"
    with hanging(hanging_run(db, marker), marker), Server(settings_for(fake, db)) as server:
        [run] = connect(server).runs.list()
        assert run.status == "running"  # its process still has the database open
