"""``Agent.import_file`` and ``agent.export_file``: Agent Files from Python.

An imported agent is loaded as ``Agent.load`` loads one; its tools with source run in the
bubblewrap sandbox (``tools.sandbox``), unless ``tools=[...]`` gives a Python function of the
same name. Without bubblewrap they refuse to run, as the server's do, unless ``isolation``
says how to run them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..agent_options import tool_map
from ..errors import ConfigError
from ..persistence import block_record, get_store
from ..tools import Tool
from ..tools.builtin import builtin_names
from ..tools.bwrap import bwrap_mode
from ..tools.sandbox import Isolation, SandboxedToolError, sandboxed_tool
from .exporter import Snapshot, agent_file, stored_snapshot
from .importer import ImportResult, import_agents
from .memory_history import HISTORY_KEY, exported_history
from .plan import ImportOptions
from .reading import Source
from .tools import RETURN_CHAR_LIMIT, live_record

if TYPE_CHECKING:
    from ..agent import Agent
    from ..store.sql import SqlStore

logger = logging.getLogger("stateloop")


async def import_file(cls: Any, source: Source, *, store: str | SqlStore,
                      tools: Iterable[Tool | Callable[..., Any] | str] = (),
                      isolation: Isolation | None = None, options: ImportOptions,
                      **settings: Any) -> Agent:
    """Import the file's agents; the first one, loaded. What was left out or repaired is
    logged as a warning (``import_agents`` returns it)."""
    result = await import_agents(source, store=store, options=options)
    for note in result.notes:
        logger.warning("agent file: %s", note)
    agent: Agent = await load_imported(cls, result, 0, store=store, tools=tools,
                                       isolation=isolation, **settings)
    return agent


async def load_imported(cls: Any, result: ImportResult, index: int, *, store: str | SqlStore,
                        tools: Iterable[Tool | Callable[..., Any] | str] = (),
                        isolation: Isolation | None = None, **settings: Any) -> Agent:
    """Agent ``index`` of an import, loaded with its source tools bound to the sandbox."""
    db = await get_store(store)
    record = await db.get_agent(result.agent_ids[index])
    given = tool_map(tools)
    if isolation is not None:  # else ``aload`` binds them with the default isolation
        given.update(await stored_source_tools(db, record.tool_names, given, isolation))
    agent: Agent = await cls.aload(record.id, store=db, tools=list(given.values()),
                                   **settings)
    return agent


async def stored_source_tools(db: SqlStore, names: Iterable[str], given: Mapping[str, Any],
                              isolation: Isolation | None = None) -> dict[str, Tool]:
    """The stored tools with source among ``names`` that ``given`` does not bind, as
    sandboxed ``Tool``s (how ``Agent.load`` binds tools imported or created over REST)."""
    wanted = [n for n in names if n not in given and n not in builtin_names()]
    if not wanted:
        return {}
    return {r.name: source_tool(r, isolation) for r in await db.list_tools(wanted)
            if r.source_code}


def source_tool(record: Any, isolation: Isolation | None) -> Tool:
    """A stored tool's source as a sandboxed ``Tool``."""
    problem = None
    if isolation is None:
        own_uid, problem = _bwrap_mode(bwrap_mode)
        isolation = Isolation(own_uid=own_uid)
    tool = sandboxed_tool(record.source_code, record.json_schema, isolation=isolation,
                          return_char_limit=record.return_char_limit or RETURN_CHAR_LIMIT)
    if problem:
        reason = (f"tool {record.name!r} comes from source and bubblewrap cannot isolate it "
                  f"here ({problem}); pass isolation=Isolation(bwrap=None) to run it without")

        async def refuse(**_: Any) -> Any:
            raise SandboxedToolError(reason)

        tool.function = refuse
    return tool


@functools.cache
def _bwrap_mode(probe: Callable[[], tuple[bool, str | None]]) -> tuple[bool, str | None]:
    return probe()


async def export_file(agent: Agent, *, include_secrets: bool = False,
                      strip_messages: bool = False,
                      memory_history: bool = False) -> dict[str, Any]:
    """The agent as an Agent File dict: from the store when it is persisted (after what is
    queued lands), else from the live agent; with ``memory_history``, its memory history
    too (a persisted agent's)."""
    if memory_history and agent.store is None:
        raise ConfigError("memory history needs a persisted agent (Agent(store=...))")
    if agent.store is not None:
        await agent.save()
        snapshot = await stored_snapshot(agent.store, agent.id)
    else:
        record = agent.to_record()
        record.pending_approval = (agent.pending_approval.to_dict()
                                   if agent.pending_approval else None)

        snapshot = Snapshot(record, [block_record(b) for b in agent.blocks], agent.messages,
                            [live_record(t) for t in agent.tools.values()])
    data = agent_file([snapshot], include_secrets=include_secrets,
                      strip_messages=strip_messages)
    if memory_history:
        data[HISTORY_KEY] = [await exported_history(agent.store, agent.id,
                                                    data["agents"][0]["id"])]
    return data


def options_from(name: str | None, settings: dict[str, Any]) -> ImportOptions:
    """The ``ImportOptions`` among ``import_file``'s keyword arguments (removed from them)."""
    fields = ImportOptions.__dataclass_fields__
    chosen = {key: settings.pop(key) for key in list(settings) if key in fields
              and key not in ("name", "model")}
    if "model" in settings and isinstance(settings["model"], str):
        chosen["model"] = settings["model"]
    try:
        return ImportOptions(name=name, **chosen)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
