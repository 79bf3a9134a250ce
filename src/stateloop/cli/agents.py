"""``stateloop agents list|create|show|delete``."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ..agent_types import AGENT_TYPES
from . import options
from .backend import open_backend
from .console import err, out, shorten
from .exits import USAGE, fail, handled
from .spec import DEFAULT_MODEL, DEFAULT_SYSTEM, AgentSpec, parse_blocks, text_or_file
from .windows import warn_if_unknown

app = typer.Typer(help="Create, list, show and delete agents.", no_args_is_help=True)


def print_json(data: Any) -> None:
    out.file.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


@app.command("list")
@handled
def list_agents(
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t",
                                                  help="Only agents with this tag.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000,
                                       help="At most this many agents.")] = 50,
    after: Annotated[str | None, typer.Option(
        "--after", help="The agents after the one with this id (the last a list showed).")
    ] = None,
    as_json: options.Json = False,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """List agents, oldest first, a page at a time (--limit, then --after the last id)."""
    with open_backend(db, server, token) as backend:
        found = backend.list_agents(tag or [], limit=limit + 1, after=after)
    agents = found[:limit]
    if len(found) > limit:
        err.print(f"{limit} agents shown; the next ones: --after {agents[-1]['id']}")
    if as_json:
        print_json(agents)
        return
    if not agents:
        err.print("no more agents" if after else
                  "no agents yet; create one with `stateloop agents create NAME`")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("NAME", "ID", "MODEL", "TAGS", "CREATED"):
        table.add_column(column, no_wrap=True)
    for agent in agents:
        table.add_row(escape(agent["name"] or ""), agent["id"], escape(agent["model"] or "-"),
                      escape(",".join(agent["tags"])) or "-", agent["created_at"] or "-")
    out.print(table)


@app.command()
@handled
def create(
    name: Annotated[str, typer.Argument(
        help="The agent's name. The local database refuses one already taken; a server, as "
             "Letta, lets names repeat (then name the agent by its id).")],
    model: Annotated[str, typer.Option(
        "--model", "-m", envvar="STATELOOP_MODEL",
        help="PROVIDER/MODEL, e.g. openai/gpt-4o-mini, or openai/NAME for a local "
             "OpenAI-compatible server.")] = DEFAULT_MODEL,
    system: Annotated[str, typer.Option(
        "--system", "-s", help="System prompt, or @FILE to read it.")] = DEFAULT_SYSTEM,
    block: Annotated[list[str] | None, typer.Option(
        "--block", "-b", help="Memory block LABEL=VALUE (or LABEL=@FILE); repeatable "
                              "\\[default: human and persona].")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="A tag; repeatable.")
                   ] = None,
    approve: Annotated[list[str] | None, typer.Option(
        "--approve", help="A tool whose calls wait for your approval; repeatable.")] = None,
    agent_type: Annotated[str, typer.Option(
        "--agent-type", help=f"One of: {', '.join(AGENT_TYPES)}."
    )] = "letta_v1_agent",
    context_window: options.ContextWindow = None,
    as_json: options.Json = False,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Create an agent with a model, system prompt and memory blocks."""
    spec = AgentSpec(name=name, model=model, system=text_or_file(system, "--system"),
                     tags=tag or [], approve=approve or [], agent_type=agent_type,
                     context_window=context_window)
    if block:
        spec.blocks = parse_blocks(block)
    with open_backend(db, server, token) as backend:
        agent = backend.create_agent(spec)
    warn_if_unknown(model, context_window)
    if as_json:
        print_json(agent)
    else:
        out.print(f"created agent {escape(agent['name'])} ({agent['id']}) "
                  f"with model {escape(agent['model'] or '-')}")


@app.command()
@handled
def show(
    agent: Annotated[str, typer.Argument(help="Name or id.")],
    as_json: options.Json = False,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Show an agent: model, tags, tools, memory blocks, system prompt."""
    with open_backend(db, server, token) as backend:
        found = backend.show_agent(agent)
    if as_json:
        print_json(found)
        return
    rows = [("name", found["name"]), ("id", found["id"]), ("model", found["model"] or "-"),
            ("type", found["agent_type"]), ("tags", ", ".join(found["tags"]) or "-"),
            ("created", found["created_at"] or "-"),
            ("tools", ", ".join(found["tools"]) or "-"),
            ("in context", f"{found['messages_in_context']} messages"),
            ("last stop", found["last_stop_reason"] or "-")]
    if found["tool_rules"]:
        rows.append(("tool rules", ", ".join(
            f"{r.get('type')}:{r.get('tool_name')}" for r in found["tool_rules"])))
    if found["pending_approval"]:
        rows.append(("waiting", "a tool call awaits approval (stateloop chat answers it)"))
    for key, value in rows:
        out.print(f"[bold]{key:<11}[/]{escape(str(value))}")
    out.print(f"[bold]{'system':<11}[/]{escape(shorten(found['system'], 200))}")
    for memory in found["blocks"]:
        value = memory["value"] or "(empty)"
        out.print(f"[bold]{'block':<11}[/]{escape(memory['label'])}: {escape(shorten(value))}")


@app.command()
@handled
def delete(
    agent: Annotated[str, typer.Argument(help="Name or id.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")
                   ] = False,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Delete an agent with its history and the memory blocks it does not share."""
    if not yes:
        if not sys.stdin.isatty():
            fail("refusing to delete without confirmation; pass --yes", USAGE)
        if not typer.confirm(f"delete agent {agent!r} and its history?"):
            err.print("nothing deleted")
            return
    with open_backend(db, server, token) as backend:
        gone = backend.delete_agent(agent)
    out.print(f"deleted agent {escape(gone['name'])} ({gone['id']})")
