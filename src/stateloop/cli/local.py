"""Local mode: agents in a database file, run in this process."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..agent import Agent
from ..approvals import Approval
from ..events import (
    AnyEvent,
    Compaction,
    ReasoningDelta,
    RunEnd,
    TextDelta,
    ToolCallEnd,
    ToolExecutionEnd,
)
from ..live_agents import library_agents
from ..memory.blocks import Block
from ..memory.window import context_rows
from ..store import open_store, serving
from ..store.records import Page
from ..store.url import configured_url, default_path, hide_password, resolve_url
from .context_view import local_messages_text, overview_text
from .exits import USAGE, AmbiguousName, fail
from .items import (
    Decision,
    Item,
    Note,
    PendingCall,
    RawSink,
    Reasoning,
    Sink,
    Text,
    ToolCallShown,
    ToolResultShown,
    TurnEnd,
)
from .provider import check_provider, no_model_error
from .spec import AgentSpec
from .windows import resolved, warn_if_unknown

if TYPE_CHECKING:
    from ..server.services.messages import StreamConverter
    from ..store.records import AgentRecord, BlockRecord
    from ..store.sql import SqlStore

T = TypeVar("T")


def database_url(db: str | None) -> str:
    """``--db`` as given, else the environment's (``STATELOOP_DATABASE_URL`` or the file
    ``STATELOOP_DATABASE_URL_FILE`` names), else the default file (whose directory is made on
    first use; a given one's must exist)."""
    given = db or configured_url()
    if given:
        check_database_dir(given)
    return given or f"sqlite:///{default_path()}"


def holding_server(url: str | None) -> str | None:
    """The URL of the stateloop server that has the database at ``url`` (None: the default)
    open, if one does:
    the CLI talks to it, since an agent run here as well would fork its history."""
    return serving(url)


def check_database_dir(url: str) -> None:
    """Refuse a database whose directory does not exist: a typo must not make directories."""
    path = resolve_url(url).path
    if path is None:  # a server, not a file
        return
    directory = path.parent
    if not directory.is_dir():
        fail(f"--db {hide_password(url)}: the directory {str(directory)!r} does not exist; "
             "create it first, or give another path", USAGE)


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def summary(record: AgentRecord, blocks: list[BlockRecord]) -> dict[str, Any]:
    """An agent as the CLI prints it (the same keys in server mode)."""
    return {
        "id": record.id, "name": record.name, "model": record.model,
        "agent_type": record.agent_type, "tags": list(record.tags),
        "created_at": iso(record.created_at), "system": record.system,
        "blocks": [{"label": b.label, "value": b.value, "limit": b.limit,
                    "read_only": b.read_only} for b in blocks],
        "tools": list(record.tool_names), "tool_rules": list(record.tool_rules),
        "messages_in_context": len(record.in_context_message_ids),
        "pending_approval": record.pending_approval is not None,
        "last_stop_reason": record.last_stop_reason,
    }


class LocalBackend:
    """Agents in the database at ``url``, all work on one event loop for the command."""

    server_url = None

    def __init__(self, db: str | None) -> None:
        self.url = database_url(db)
        self._runner = asyncio.Runner()
        self._store: SqlStore | None = None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the command's event loop (the store is bound to it)."""
        return self._runner.run(coroutine)

    async def store(self) -> SqlStore:
        """The database, opened (and migrated) on first use; closed with the backend."""
        if self._store is None:
            self._store = await open_store(self.url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self.run(self._store.close())
            self._store = None
        self._runner.close()

    async def record(self, name: str) -> AgentRecord:
        """The agent with id ``name``, else the one agent of that name; ``AmbiguousName``
        (listing their ids) when several have it."""
        db = await self.store()
        named = await db.list_agents(name=name, limit=AmbiguousName.SHOWN + 1)
        if len(named) > 1:
            raise AmbiguousName(name, [(r.id, iso(r.created_at)) for r in named])
        return named[0] if named else await db.get_agent(name)

    # -- agents ------------------------------------------------------------------------

    def list_agents(self, tags: list[str], *, limit: int,
                    after: str | None = None) -> list[dict[str, Any]]:
        """At most ``limit`` agents (with any of ``tags``) after the one with id ``after``,
        oldest first: a page, read in a few queries however many agents there are."""
        async def go() -> list[dict[str, Any]]:
            db = await self.store()
            records = await db.list_agents(tags=tags or None,
                                           page=Page(after=after, limit=limit))
            blocks = await db.agents_blocks([r.id for r in records])
            return [summary(r, blocks[r.id]) for r in records]

        return self.run(go())

    def show_agent(self, name: str) -> dict[str, Any]:
        """One agent by name or id."""

        async def go() -> dict[str, Any]:
            db = await self.store()
            record = await self.record(name)
            return summary(record, await db.list_blocks(record.id))

        return self.run(go())

    def create_agent(self, spec: AgentSpec) -> dict[str, Any]:
        """Create and persist an agent."""
        async def go() -> dict[str, Any]:
            db = await self.store()
            agent = await library_agents(db, Agent).create(
                resolved(spec.model, spec.context_window), name=spec.name,
                system=spec.system, blocks=[Block(label, value) for label, value in spec.blocks],
                tags=spec.tags, agent_type=spec.agent_type, tool_rules=spec.tool_rules(),
                context_window=spec.context_window)
            record = await db.get_agent(agent.id)
            return summary(record, await db.list_blocks(record.id))

        return self.run(go())

    def configure(self, name: str, model: str | None, context_window: int | None) -> None:
        """Store a new model and/or context window for an agent (``stateloop up --model``)."""

        async def go() -> None:
            db = await self.store()
            record = await self.record(name)
            chosen = model or record.model
            window = context_window or record.llm_config.get("context_window_override")
            if chosen == record.model and window == record.llm_config.get(
                    "context_window_override"):
                return
            if chosen and chosen != record.model:
                warn_if_unknown(chosen, window)
            size = window or (resolved(chosen, None).context_window if chosen else None)
            await db.update_agent(record.id, model=chosen, llm_config={
                **record.llm_config, "model": chosen, "context_window": size,
                "context_window_override": window})

        self.run(go())

    def delete_agent(self, name: str) -> dict[str, Any]:
        """Delete an agent, its history and its unshared blocks; returns what it was."""

        async def go() -> dict[str, Any]:
            db = await self.store()
            record = await self.record(name)
            found = summary(record, await db.list_blocks(record.id))
            await db.delete_agent(record.id)
            return found

        return self.run(go())

    def session(self, name: str, *, model: str | None = None, base_url: str | None = None,
                context_window: int | None = None, check: bool = True) -> LocalSession:
        """Load the agent to talk to it; ``check`` first verifies a provider is configured.
        A ``context_window`` is stored with the agent."""
        async def go() -> Agent:
            db = await self.store()
            record = await self.record(name)
            chosen = model or record.model
            if not chosen:
                raise no_model_error(record.name)
            if check:
                check_provider(chosen, base_url)
            if context_window is not None:
                record = await db.update_agent(record.id, llm_config={
                    **record.llm_config, "context_window": context_window,
                    "context_window_override": context_window})
            window = record.llm_config.get("context_window_override")
            options = {"base_url": base_url} if base_url else {}
            return await library_agents(db, Agent).load(
                record.id, model=resolved(chosen, window, **options), **options)

        return LocalSession(self, self.run(go()))


class LocalSession:
    """A loaded ``Agent``; each turn streams its events on the backend's loop."""

    def __init__(self, backend: LocalBackend, agent: Agent) -> None:
        self.backend = backend
        self.agent = agent
        self.name = agent.name

    def turn(self, text: str | None, *, decisions: list[Decision] | None = None,
             on_item: Sink, on_raw: RawSink | None = None) -> TurnEnd:
        """Run the agent on ``text`` (or resume it with ``decisions``); Ctrl-C cancels it."""
        return self.backend.run(self._turn(text, decisions, on_item, on_raw))

    async def _turn(self, text: str | None, decisions: list[Decision] | None, on_item: Sink,
                    on_raw: RawSink | None) -> TurnEnd:
        approvals = [Approval(d.tool_call_id, approve=d.approve, reason=d.reason)
                     for d in decisions or ()]
        loop = asyncio.get_running_loop()
        try:  # Ctrl-C stops the run cleanly (every call answered) instead of killing us
            loop.add_signal_handler(signal.SIGINT, self.agent.cancel)
            trapped = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            trapped = False
        end: TurnEnd | None = None
        frames = letta_frames(self.agent) if on_raw is not None else None
        sent = 0
        try:
            async for event in self.agent.stream(text, approvals=approvals or None):
                if frames is not None and on_raw is not None:
                    for frame in frames.feed(event):
                        sent += 1
                        on_raw({**frame, "seq_id": sent})  # numbered from 1, as a server's
                if isinstance(event, RunEnd):
                    end = turn_end(event)
                    continue
                item = as_item(event)
                if item is not None:
                    on_item(item)
        finally:
            if trapped:
                loop.remove_signal_handler(signal.SIGINT)
        assert end is not None
        return end

    def pending(self) -> list[PendingCall]:
        pending = self.agent.pending_approval
        if pending is None:
            return []
        return [PendingCall(c.id, c.name, c.arguments) for c in pending.requested_calls]

    def blocks(self) -> list[tuple[str, str]]:
        return [(block.label, block.value) for block in self.agent.blocks]

    def context_data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.agent.context_overview().to_dict()
        return data

    def context_view(self) -> str:
        """Letta's figures, then the assembled context message by message with tokens."""
        data = self.context_data()
        rows = context_rows(self.agent.messages, self.agent.model.name)
        return overview_text(data) + "\n\n" + local_messages_text(data, rows)

    def reset(self) -> None:
        self.backend.run(self._reset())

    async def _reset(self) -> None:
        self.agent.reset()
        await self.agent.save()  # so /reset then /quit sticks

    def close(self) -> None:
        pass


def letta_frames(agent: Agent) -> StreamConverter:
    """What turns the run's events into the frames a server streams (``--json`` prints the
    same objects with or without ``--server``)."""
    from ..server.services.messages import (  # lazy: the server package costs 0.05 s; --json only
        StreamConverter,
        approval_names,
    )

    return StreamConverter(stream_tokens=True, approval_names=approval_names(agent))


def as_item(event: AnyEvent) -> Item | None:
    """What the user sees of one event (None: nothing)."""
    if isinstance(event, TextDelta):
        return Text(event.delta)
    if isinstance(event, ReasoningDelta):
        return Reasoning(event.delta)
    if isinstance(event, ToolCallEnd):
        call = event.tool_call
        shown = call.arguments if call.parse_error is None else (call.raw_arguments or "")
        return ToolCallShown(call.id, call.name, shown)
    if isinstance(event, ToolExecutionEnd):
        return ToolResultShown(event.tool_call.name, event.result.text, event.result.is_error)
    if isinstance(event, Compaction):
        return Note(f"context compacted: {event.tokens_before} -> {event.tokens_after} "
                    f"tokens, {event.messages_evicted} messages moved to recall")
    return None


def turn_end(end: RunEnd) -> TurnEnd:
    """The end of a run as the CLI reports it."""
    pending = end.pending_approval
    calls = ([PendingCall(c.id, c.name, c.arguments) for c in pending.requested_calls]
             if pending is not None else [])
    return TurnEnd(end.stop_reason, end.error, end.output, calls)
