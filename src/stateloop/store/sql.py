"""The SQL store: opening it, and agents (``load_agent``: everything a live agent is made
from, in one read transaction). The rest is mixed in: blocks in blocks.py, messages, runs
and steps in history.py (their queued writes in checkpoints.py), archival passages in
archive.py, tools in tool_registry.py, steps across runs in steps.py, tags and counts in
catalog.py, identities in identities.py, runs' stream frames in run_frames.py, whether an
agent's blocks changed in block_changes.py."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.exc import ArgumentError, DBAPIError

from stateloop.messages import Message
from stateloop.store import rows, schema
from stateloop.store.access import AccessMixin
from stateloop.store.archive import ArchiveMixin
from stateloop.store.archives import ArchivesMixin
from stateloop.store.batches import BatchesMixin
from stateloop.store.block_changes import BlockChangesMixin, block_records
from stateloop.store.blocks import BlocksMixin, check_limit, link_block
from stateloop.store.catalog import CatalogMixin, agents_where
from stateloop.store.checkpoints import context_ids, set_in_context
from stateloop.store.conversations import ConversationsMixin
from stateloop.store.errors import (
    DatabaseOpenError,
    DuplicateError,
    NotFoundError,
)
from stateloop.store.fleet import Fleet
from stateloop.store.folders import (
    AgentFileRecord,
    FolderRecord,
    FoldersMixin,
    agent_file_views,
    agent_folders,
)
from stateloop.store.groups import GroupsMixin, managed_group
from stateloop.store.history import HistoryMixin, messages_by_id
from stateloop.store.identities import IdentitiesMixin
from stateloop.store.mcp_servers import MCPServersMixin
from stateloop.store.memory_history import MemoryHistoryMixin
from stateloop.store.memory_push import MemoryPushMixin
from stateloop.store.memory_repo import commit_agents, current_author
from stateloop.store.migrate import upgrade
from stateloop.store.paging import keyset
from stateloop.store.postgres import PostgresRunner, with_block_version
from stateloop.store.projects import creating_in
from stateloop.store.provider_traces import ProviderTracesMixin
from stateloop.store.providers import ProvidersMixin
from stateloop.store.records import (
    EVERYTHING,
    AgentRecord,
    BlockRecord,
    GroupRecord,
    Page,
    ToolRecord,
)
from stateloop.store.run_frames import RunFramesMixin
from stateloop.store.runner import AsyncRunner, Runner, SqliteRunner
from stateloop.store.schedules import SchedulesMixin
from stateloop.store.steps import StepsMixin
from stateloop.store.tool_registry import ToolRegistryMixin
from stateloop.store.url import DatabaseURL, resolve_url

a, b, ba, tags_t = schema.agents, schema.blocks, schema.blocks_agents, schema.agent_tags
i, ib, m = schema.identities, schema.identities_blocks, schema.messages
p, aa, r, t = schema.passages, schema.archives_agents, schema.runs, schema.tools

_AGENT_MUTABLE = frozenset(rows.AGENT_FIELDS) - {"id", "created_at"} | {"tags"}
_BLOCK_MUTABLE = frozenset(rows.BLOCK_FIELDS) - {"id", "created_at"}


async def open_store(url: str | None = None, *, migrate: bool = True) -> SqlStore:
    """Open (creating and migrating as needed) the database at ``url``.

    ``url`` defaults to ``STATELOOP_DATABASE_URL``, then ``~/.stateloop/stateloop.db``.
    ``sqlite:///PATH`` commits inline (fastest here); ``sqlite+aiosqlite:///PATH`` is fully async;
    ``postgresql://...`` runs on a server (postgres.py).
    """
    parsed = resolve_url(url)
    runner: Runner
    try:
        if parsed.path is None:
            runner = PostgresRunner(parsed.sync_url())
        else:
            parsed.path.parent.mkdir(parents=True, exist_ok=True)
            runner = (AsyncRunner(parsed.async_url(), parsed.path)
                      if parsed.driver == "aiosqlite"
                      else SqliteRunner(parsed.sync_url(), parsed.path))
    except DatabaseOpenError:
        raise
    except (OSError, ValueError, ArgumentError) as exc:  # a port that is not a number, ...
        raise parsed.error(exc) from None
    store = SqlStore(runner, parsed)
    try:
        if migrate:
            await runner.write(lambda conn: upgrade(conn, parsed.shown))
        else:
            await runner.read(lambda conn: conn.exec_driver_sql("SELECT 1").all())
        await store.open_vectors(create=migrate)
    except DBAPIError as exc:
        await runner.close()
        raise parsed.error(exc.orig) from None  # the driver's chain may quote the URL
    except BaseException:
        await runner.close()
        raise
    return store


@dataclasses.dataclass(slots=True)
class StoredAgent:
    """What a live agent is made from, as one snapshot of the store has it
    (``SqlStore.load_agent``)."""

    record: AgentRecord
    blocks: list[BlockRecord]  # in attach order
    context: list[Message]  # its in-context messages, in order
    tools: dict[str, ToolRecord]  # the registered tools among those it names, by name
    folders: list[FolderRecord]
    files: list[AgentFileRecord]  # its view of its folders' files
    recall_count: int  # messages it has stored, in context or not
    archival_count: int  # passages in the archives it reaches
    group: GroupRecord | None  # the group it manages (``managed_group``)
    running: list[str]  # its runs stored as created or running
    blocks_token: Any = None  # the store's ``change_token`` the blocks are as of


class SqlStore(BlocksMixin, HistoryMixin, StepsMixin, CatalogMixin, ArchiveMixin, ArchivesMixin,
               ToolRegistryMixin, IdentitiesMixin, GroupsMixin, MCPServersMixin,
               ConversationsMixin, FoldersMixin, RunFramesMixin, BlockChangesMixin,
               MemoryHistoryMixin, MemoryPushMixin, ProviderTracesMixin, ProvidersMixin,
               SchedulesMixin, BatchesMixin, AccessMixin):
    """The ``Store`` implementation over SQLAlchemy Core (SQLite or PostgreSQL)."""

    def __init__(self, runner: Runner, url: DatabaseURL) -> None:
        self._runner = runner
        self._database = url
        self.url = url.raw
        self._checking: asyncio.Future[None] | None = None
        self.path = url.path
        self.dialect = url.dialect
        self._in_flight = set()
        # Turns and word between processes sharing the database (PostgreSQL only).
        self.fleet: Fleet | None = None
        if isinstance(runner, PostgresRunner):
            self.fleet = Fleet(runner)

    def announce(self, address: str) -> None:
        """Tell other processes opening this SQLite file that the server at ``address`` holds
        it (``serving``): they talk to that server instead of forking its agents' histories."""
        self._runner.announce(address)

    async def close(self) -> None:
        """Close every connection; the store cannot be used afterwards."""
        if self.fleet is not None:
            await self.fleet.close()
        await self._runner.close()

    async def check(self) -> None:
        """Return when the store can serve; else raise ``DatabaseOpenError`` naming why,
        without the password. A query must answer; on PostgreSQL a new connection must be
        let in as the store's role, which must hold every right the store uses on its tables.
        Callers while a check runs share its outcome: a flood of checks is one at a time."""
        if self._checking is None:
            self._checking = asyncio.ensure_future(self._check())
            self._checking.add_done_callback(self._checked)
        await asyncio.shield(self._checking)

    def _checked(self, done: asyncio.Future[None]) -> None:
        self._checking = None
        if not done.cancelled():
            done.exception()  # its callers have it; none left is no error to report

    async def _check(self) -> None:
        url, role, missing = self._database, "", list[str]()
        try:
            await self._runner.read(lambda conn: conn.execute(select(a.c.id).limit(1)).all())
            if isinstance(self._runner, PostgresRunner):
                role, missing = await self._runner.missing_rights(list(schema.metadata.tables))
        except DatabaseOpenError as exc:
            raise url.error(exc) from None
        except DBAPIError as exc:
            raise url.error(exc.orig) from None
        if missing:
            raise DatabaseOpenError(f"database {url.shown!r}: role {role!r} lacks rights this "
                                    f"server uses on {'; '.join(missing)}")

    async def __aenter__(self) -> SqlStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- agents ---

    async def create_agent(self, agent: AgentRecord, blocks: Sequence[BlockRecord] = (), *,
                           unique_name: bool = False) -> AgentRecord:
        """Store a new agent with its new blocks attached, in one transaction. Names may
        repeat (as in Letta); ``unique_name`` refuses one already taken."""
        for block in blocks:
            check_limit(block)
        labels = [block.label for block in blocks]
        if len(set(labels)) != len(labels):
            raise DuplicateError(f"agent {agent.name!r}: block labels repeat: {labels}")

        who = current_author()
        project = creating_in()  # read here: the transaction may run in another thread

        def txn(conn: Connection) -> None:
            if unique_name:
                _ensure_name_free(conn, agent.name)
            conn.execute(insert(a), {**rows.agent_values(agent), "project": project})
            set_in_context(conn, agent.id, agent.in_context_message_ids)
            _write_tags(conn, agent.id, agent.tags)
            for block in blocks:
                conn.execute(insert(b), rows.block_values(block))
                link_block(conn, agent.id, block)
            commit_agents(conn, [agent.id], author=who, message="Create agent")

        await self._runner.write(txn)
        return agent

    async def get_agent(self, id_or_name: str) -> AgentRecord:
        """The agent with this id, else the newest agent with this name; ``NotFoundError``
        if none."""
        return await self._runner.read(lambda conn: _load_agent(conn, id_or_name))

    async def load_agent(self, id_or_name: str, *, by_name: bool = True) -> StoredAgent:
        """Everything a live agent is made from, read in one transaction (one snapshot, one
        query per table): the agent found as ``get_agent`` finds it (by id only, unless
        ``by_name``), its blocks, in-context
        messages, registered tools, folders and files, counts, and managed group. Runs it
        left running are marked failed first when no other process has the database open
        (``fail_interrupted_runs``)."""
        def read(conn: Connection) -> tuple[StoredAgent, list[str], dict[str, Any]]:
            return _stored_agent(conn, id_or_name, by_name)

        # The blocks' change token as of the snapshot, taken as ``read_blocks`` takes it, so
        # the agent's first step need not read them again.
        if self.dialect == "postgresql":
            writes = self._block_writes
            (stored, wanted, found), version = await self._runner.read(
                with_block_version(read, id_or_name))
            stored.blocks_token = (writes, version)
        else:
            token = self.change_token(id_or_name)
            stored, wanted, found = await self._runner.read(read)
            stored.blocks_token = token
        record = stored.record
        if set(stored.running) - self._in_flight and await self.fail_interrupted_runs(record.id):
            stored.running = []
        stored.context = await self._context_of(record.id, wanted, found)
        return stored

    async def list_agents(self, *, name: str | None = None, tags: Sequence[str] | None = None,
                          match_all_tags: bool = False, limit: int | None = None,
                          query_text: str | None = None, identity_id: str | None = None,
                          identifier_keys: Sequence[str] | None = None,
                          block_id: str | None = None, archive_id: str | None = None,
                          page: Page = EVERYTHING) -> list[AgentRecord]:
        """Agents on ``page`` (default: all, oldest first; ``limit`` caps it), filtered as
        ``agents_where`` says, read in SQL: a page reads its own rows only."""
        if limit is not None:
            page = dataclasses.replace(page, limit=limit)
        stmt = agents_where(select(a), name=name, tags=tags, match_all_tags=match_all_tags,
                            query_text=query_text, identity_id=identity_id,
                            identifier_keys=identifier_keys, block_id=block_id,
                            archive_id=archive_id)

        return await self._runner.read(
            lambda conn: _agents_from_rows(conn, conn.execute(keyset(conn, stmt, a, page)).all()))

    async def update_agent(self, agent_id: str, **changes: Any) -> AgentRecord:
        """Change the given fields (any ``AgentRecord`` field but id/created_at)."""
        unknown = set(changes) - _AGENT_MUTABLE
        if unknown:
            raise TypeError(f"update_agent: unknown or read-only fields {sorted(unknown)}")

        def txn(conn: Connection) -> AgentRecord:
            current = _load_agent(conn, agent_id, by_name=False)
            values = {k: v for k, v in changes.items() if k != "tags"}
            values["updated_at"] = time.time()
            columns = {k: v for k, v in values.items() if k != "in_context_message_ids"}
            conn.execute(update(a).where(a.c.id == agent_id).values(**columns))
            if "in_context_message_ids" in values:
                set_in_context(conn, agent_id, values["in_context_message_ids"],
                               now=values["updated_at"])
            if "tags" in changes:
                conn.execute(delete(tags_t).where(tags_t.c.agent_id == agent_id))
                _write_tags(conn, agent_id, changes["tags"])
            return dataclasses.replace(current, **values,
                                       tags=list(changes.get("tags", current.tags)))

        return await self._runner.write(txn)

    async def delete_agent(self, agent_id: str, *, delete_orphan_blocks: bool = True) -> None:
        """Delete an agent and its history; its blocks too unless another agent shares them."""

        def txn(conn: Connection) -> None:
            _load_agent(conn, agent_id, by_name=False)
            block_ids = conn.execute(
                select(ba.c.block_id).where(ba.c.agent_id == agent_id)).scalars().all()
            conn.execute(delete(a).where(a.c.id == agent_id))  # cascades
            if delete_orphan_blocks and block_ids:
                still_used = select(ba.c.block_id)
                conn.execute(delete(b).where(b.c.id.in_(block_ids))
                             .where(b.c.id.not_in(still_used)))

        await self._runner.write(txn)

    async def set_in_context(self, agent_id: str, message_ids: Sequence[str]) -> None:
        """Replace the ordered in-context message ids (compaction, reset)."""

        await self._runner.write(lambda conn: set_in_context(conn, agent_id, message_ids))


# --- transaction helpers (functions of a sync Connection) ---

def _load_agent(conn: Connection, id_or_name: str, *, by_name: bool = True) -> AgentRecord:
    row = conn.execute(select(a).where(a.c.id == id_or_name)).first()
    if row is None and by_name:  # names repeat: the newest agent of that name
        row = conn.execute(select(a).where(a.c.name == id_or_name)
                           .order_by(a.c.created_at.desc(), a.c.id.desc()).limit(1)).first()
    if row is None:
        raise NotFoundError(
            f"agent with id{' or name' if by_name else ''} {id_or_name!r} not found")
    return _agent_from_row(conn, row, _tags_for(conn, [row.id]).get(row.id, []))


def _stored_agent(conn: Connection, id_or_name: str, by_name: bool
                  ) -> tuple[StoredAgent, list[str], dict[str, Any]]:
    """``load_agent``'s read: the agent, the ids in its context and their rows found."""
    record = _load_agent(conn, id_or_name, by_name=by_name)
    agent_id = record.id
    blocks = block_records(conn, select(b).join(ba, ba.c.block_id == b.c.id)
                           .where(ba.c.agent_id == agent_id)
                           .order_by(ba.c.position, ba.c.block_id))
    tools = ({tool.name: tool for tool in (
                 rows.tool_from_row(row) for row in conn.execute(
                     select(t).where(t.c.name.in_(record.tool_names))))}
             if record.tool_names else {})
    wanted = list(record.in_context_message_ids)
    found = messages_by_id(conn, wanted) if wanted else {}
    folders = agent_folders(conn, agent_id)
    recall, archival = conn.execute(select(
        select(a.c.message_count).where(a.c.id == agent_id).scalar_subquery(),
        select(func.count()).select_from(p).where(p.c.archive_id.in_(
            select(aa.c.archive_id).where(aa.c.agent_id == agent_id))).scalar_subquery(),
    )).one()
    running = list(conn.execute(select(r.c.id).where(r.c.agent_id == agent_id)
                                .where(r.c.status.in_(("created", "running")))).scalars())
    stored = StoredAgent(
        record=record, blocks=blocks, context=[], tools=tools, folders=folders,
        files=agent_file_views(conn, agent_id) if folders else [],
        recall_count=int(recall), archival_count=int(archival),
        group=managed_group(conn, agent_id), running=running)
    return stored, wanted, found


def _agent_from_row(conn: Connection, row: Any, tags: list[str]) -> AgentRecord:
    agent = rows.agent_from_row(row, tags)
    agent.in_context_message_ids = context_ids(conn, agent.id, agent.in_context_message_ids,
                                               row.in_context_after_seq)
    return agent


def _agents_from_rows(conn: Connection, found: Sequence[Any]) -> list[AgentRecord]:
    """Agents of these rows, their tags and the ids their context gained since the stored
    list read in one query each."""
    ids = [row.id for row in found]
    tag_map = _tags_for(conn, ids)
    appended: dict[str, list[str]] = {}
    if ids:
        stmt = (select(m.c.agent_id, m.c.id).join(a, a.c.id == m.c.agent_id)
                .where(a.c.id.in_(ids)).where(m.c.conversation_id.is_(None))
                .where(m.c.seq > a.c.in_context_after_seq).order_by(m.c.agent_id, m.c.seq))
        for agent_id, message_id in conn.execute(stmt):
            appended.setdefault(agent_id, []).append(message_id)
    agents = []
    for row in found:
        agent = rows.agent_from_row(row, tag_map.get(row.id, []))
        agent.in_context_message_ids = [*agent.in_context_message_ids,
                                        *appended.get(row.id, [])]
        agents.append(agent)
    return agents


def _ensure_name_free(conn: Connection, name: str) -> None:
    found = conn.execute(select(a.c.id).where(a.c.name == name).limit(1)).scalar()
    if found is not None:
        raise DuplicateError(f"an agent named {name!r} already exists (id {found})")


def _tags_for(conn: Connection, agent_ids: list[str]) -> dict[str, list[str]]:
    if not agent_ids:
        return {}
    found: dict[str, list[str]] = {}
    stmt = (select(tags_t.c.agent_id, tags_t.c.tag).where(tags_t.c.agent_id.in_(agent_ids))
            .order_by(tags_t.c.tag))
    for agent_id, tag in conn.execute(stmt):
        found.setdefault(agent_id, []).append(tag)
    return found


def _write_tags(conn: Connection, agent_id: str, tags: Sequence[str]) -> None:
    unique = sorted(set(tags))
    if unique:
        conn.execute(insert(tags_t), [{"agent_id": agent_id, "tag": tag} for tag in unique])
