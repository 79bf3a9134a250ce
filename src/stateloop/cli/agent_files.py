"""``stateloop import FILE.af`` and ``stateloop export AGENT > FILE.af``: Agent Files on
the local database or a server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.markup import escape

from . import options
from .backend import open_backend
from .console import err, out
from .exits import USAGE, CliError, handled

if TYPE_CHECKING:
    from .local import LocalBackend
    from .remote import RemoteBackend


@handled
def import_file(
    path: Annotated[Path, typer.Argument(help="The Agent File (.af) to import.",
                                         show_default=False)],
    name: Annotated[str | None, typer.Option(
        "--name", help="Name the imported agent(s) this \\[default: the file's name with "
                       "_copy added, as Letta's REST import names it].")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse a file holding anything stateloop cannot import (a tool "
                         "whose source does not compile, a block or tool rule it cannot "
                         "read) instead of importing the rest and naming what was left "
                         "out.")] = False,
    strip_messages: Annotated[bool, typer.Option(
        "--strip-messages", help="Import without the conversation history.")] = False,
    secrets: Annotated[str | None, typer.Option(
        "--secrets", help='Tool variables as JSON, e.g. \'{"API_KEY": "..."}\'.')] = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Use this model instead of the file's, e.g. "
                              "openai/gpt-4o-mini.")] = None,
    as_json: options.Json = False,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Import the agents of an Agent File (.af), as Letta writes them. What was left out,
    kept or repaired (a block's limit raised to fit its value) is printed as notes."""
    variables = _secrets(secrets)
    with open_backend(db, server, token) as backend:
        if backend.server_url:
            result = _import_remote(cast("RemoteBackend", backend), path, name, strict,
                                    strip_messages, variables, model)
        else:
            result = _import_local(cast("LocalBackend", backend), path, name, strict,
                                   strip_messages, variables, model)
    if as_json:
        out.file.write(json.dumps(result, indent=2) + "\n")
        return
    for note in result["notes"]:
        err.print(f"[yellow]note:[/] {escape(note)}")
    for agent_id, agent_name in zip(result["agent_ids"], result["names"], strict=True):
        out.print(f"imported agent {escape(agent_name)} ({agent_id})")


@handled
def export_file(
    agent: Annotated[str, typer.Argument(help="Name or id.", show_default=False)],
    include_secrets: Annotated[bool, typer.Option(
        "--include-secrets", help="Write the agent's tool variables' values (local "
                                  "database only; left empty otherwise).")] = False,
    strip_messages: Annotated[bool, typer.Option(
        "--strip-messages", help="Write no conversation history.")] = False,
    memory_history: Annotated[bool, typer.Option(
        "--memory-history", help="Write the memory's commits too (an import into stateloop "
                                 "keeps them; Letta ignores them).")] = False,
    db: options.Db = None, server: options.Server = None, token: options.Token = None,
) -> None:
    """Write an agent as an Agent File (.af) on stdout: `stateloop export NAME > NAME.af`."""
    with open_backend(db, server, token) as backend:
        if backend.server_url:
            if include_secrets:
                raise CliError("--include-secrets works on the local database only: a "
                               "server never hands out an agent's secrets")
            remote = cast("RemoteBackend", backend)
            state = remote.agent_state(agent)
            data = remote.request("POST", f"/v1/agents/{state['id']}/export",
                                  json={"scrub_messages": strip_messages,
                                        "include_memory_history": memory_history})
        else:
            data = _export_local(cast("LocalBackend", backend), agent, include_secrets,
                                 strip_messages, memory_history)
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _import_local(backend: LocalBackend, path: Path, name: str | None, strict: bool,
                  strip_messages: bool, secrets: dict[str, str] | None,
                  model: str | None) -> dict[str, Any]:
    from ..agent_file import ImportOptions, import_agents  # lazy: SQLAlchemy costs 0.25 s

    async def go() -> dict[str, Any]:
        result = await import_agents(path, store=await backend.store(), options=ImportOptions(
            name=name, append_copy_suffix=True, strict=strict,
            strip_messages=strip_messages, secrets=secrets, model=model))
        return {"agent_ids": result.agent_ids, "names": result.names, "notes": result.notes}

    return backend.run(go())


def _import_remote(backend: RemoteBackend, path: Path, name: str | None, strict: bool,
                   strip_messages: bool, secrets: dict[str, str] | None,
                   model: str | None) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    form: dict[str, Any] = {"strip_messages": str(strip_messages).lower(),
                            "strict": str(strict).lower()}
    for key, value in (("name", name), ("model", model),
                       ("secrets", json.dumps(secrets) if secrets else None)):
        if value is not None:
            form[key] = value
    from .remote import check  # lazy: httpx costs 0.05 s; only server mode uses it

    response = backend.http.post("/v1/agents/import", data=form,
                                 files={"file": (path.name, data)})
    check(response)
    answer = response.json()
    ids = answer["agent_ids"]
    names = [backend.request("GET", f"/v1/agents/{i}")["name"] for i in ids]
    return {"agent_ids": ids, "names": names, "notes": answer.get("notes") or []}


def _export_local(backend: LocalBackend, agent: str, include_secrets: bool,
                  strip_messages: bool, memory_history: bool) -> dict[str, Any]:
    from ..agent_file import export_agents  # lazy: SQLAlchemy costs 0.25 s

    async def go() -> dict[str, Any]:
        db = await backend.store()
        record = await backend.record(agent)
        return await export_agents([record.id], store=db, include_secrets=include_secrets,
                                   strip_messages=strip_messages,
                                   memory_history=memory_history)

    return backend.run(go())


def _secrets(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise CliError('--secrets takes a JSON object, e.g. \'{"API_KEY": "..."}\'', USAGE)
    return {str(k): str(v) for k, v in value.items()}
