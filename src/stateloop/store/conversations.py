"""Conversations: the threads of an agent besides its default one. A conversation owns its
messages (``messages.conversation_id``), its in-context list and pending approval, and the
blocks it isolates (copies not attached to the agent); everything else is the agent's."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, case, delete, func, insert, or_, select, update

from stateloop.messages import Message
from stateloop.store import rows, schema
from stateloop.store.access import in_acting_project
from stateloop.store.checkpoints import MAX_SEQ, SET_CONVERSATION, context_ids
from stateloop.store.errors import NotFoundError
from stateloop.store.fastpath import InsertRows
from stateloop.store.records import BlockRecord, ConversationRecord
from stateloop.store.runner import Runner

c, m, b = schema.conversations, schema.messages, schema.blocks


_INSERT_MESSAGES = InsertRows(m, rows.MESSAGE_COLUMNS, key="seq")
_UPDATABLE = ("summary", "model", "model_settings")


class ConversationsMixin:
    """Conversation operations of ``SqlStore``."""

    _runner: Runner

    async def create_conversation(self, record: ConversationRecord,
                                  isolated: Sequence[BlockRecord],
                                  messages: Sequence[Message]) -> ConversationRecord:
        """Store a new conversation with copies of the blocks it isolates and its first
        messages (its context), in one transaction."""
        record.isolated_block_ids = [block.id for block in isolated]
        record.in_context_message_ids = [message.id for message in messages]

        def txn(conn: Connection) -> None:
            if conn.execute(select(schema.agents.c.id).where(
                    schema.agents.c.id == record.agent_id)).first() is None:
                raise NotFoundError(f"agent with id {record.agent_id!r} not found")
            for block in isolated:
                conn.execute(insert(b), rows.block_values(block))
            conn.execute(insert(c), {**_values(record), "in_context_after_seq": 0})
            after = conn.execute(select(MAX_SEQ)).scalar_one()
            if messages:
                seqs = _INSERT_MESSAGES.execute(conn, [rows.message_row(
                    record.agent_id, message, None, None) for message in messages])
                SET_CONVERSATION.execute(conn, {"low": seqs[0] - 1, "high": seqs[-1],
                                                "conv": record.id})
                after = seqs[-1]
            conn.execute(update(c).where(c.c.id == record.id).values(in_context_after_seq=after))

        await self._runner.write(txn)
        return record

    async def get_conversation(self, conversation_id: str) -> ConversationRecord:
        """The conversation with this id (NotFoundError if none)."""
        return await self._runner.read(lambda conn: _load(conn, conversation_id))

    async def list_conversations(self, agent_id: str | None = None, *, after: str | None = None,
                                 limit: int = 50, order: str = "desc",
                                 order_by: str = "created_at",
                                 summary_search: str | None = None) -> list[ConversationRecord]:
        """A page of conversations (of one agent, if given); ``after`` is an id cursor."""
        column = c.c.last_message_at if order_by == "last_message_at" else c.c.created_at
        desc = order == "desc"
        stmt = select(c).order_by(column.desc() if desc else column.asc(),
                                  c.c.id.desc() if desc else c.c.id.asc()).limit(limit)
        if agent_id is not None:
            stmt = stmt.where(c.c.agent_id == agent_id)
        if (project := in_acting_project(c.c.agent_id)) is not None:
            stmt = stmt.where(project)
        if summary_search:
            stmt = stmt.where(func.lower(c.c.summary).contains(summary_search.lower()))

        def txn(conn: Connection) -> list[ConversationRecord]:
            query = stmt
            if after is not None:
                cursor = conn.execute(select(column, c.c.id).where(c.c.id == after)).first()
                if cursor is None:
                    raise NotFoundError(f"no conversation with id {after!r}")
                key, ident = cursor
                if key is None:
                    query = query.where(c.c.id < ident if desc else c.c.id > ident)
                elif desc:
                    query = query.where((column < key) | ((column == key) & (c.c.id < ident)))
                else:
                    query = query.where((column > key) | ((column == key) & (c.c.id > ident)))
            return [_from_row(conn, row) for row in conn.execute(query)]

        return await self._runner.read(txn)

    async def update_conversation(self, conversation_id: str,
                                  **changes: Any) -> ConversationRecord:
        """Change a conversation's summary, model or model settings."""
        unknown = set(changes) - set(_UPDATABLE)
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)} of a conversation")

        def txn(conn: Connection) -> ConversationRecord:
            _load(conn, conversation_id)
            if changes:
                conn.execute(update(c).where(c.c.id == conversation_id)
                             .values(**changes, updated_at=time.time()))
            return _load(conn, conversation_id)

        return await self._runner.write(txn)

    async def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation, its messages and its isolated blocks; nothing of the agent."""

        def txn(conn: Connection) -> None:
            record = _load(conn, conversation_id)
            conn.execute(delete(m).where(m.c.conversation_id == conversation_id))
            if record.isolated_block_ids:
                conn.execute(delete(b).where(b.c.id.in_(record.isolated_block_ids)))
            conn.execute(delete(c).where(c.c.id == conversation_id))

        await self._runner.write(txn)

    async def list_conversation_messages(self, conversation_id: str, *,
                                         before: str | None = None, after: str | None = None,
                                         limit: int = 100, order: str = "desc"
                                         ) -> list[Message]:
        """A page of a conversation's stored messages; ``before``/``after`` are id cursors.
        As in Letta, where a recompile rewrites the conversation's system message in place,
        the one in context now is listed, as the first message, and those it replaced are
        not."""

        def txn(conn: Connection) -> list[Message]:
            record = _load(conn, conversation_id)
            current = record.in_context_message_ids[:1] or [""]
            rank = case((m.c.id == current[0], 0), else_=1)
            stmt = select(*schema.MESSAGE_READ).where(
                m.c.conversation_id == conversation_id,
                or_(m.c.role != "system", m.c.id == current[0]))
            for cursor, newer in ((before, False), (after, True)):
                if cursor is None:
                    continue
                seq = conn.execute(select(m.c.seq).where(m.c.id == cursor)).scalar_one_or_none()
                if seq is None:  # as in Letta, a cursor that names nothing filters nothing
                    continue
                at = 0 if cursor == current[0] else 1
                stmt = stmt.where(or_(rank > at, and_(rank == at, m.c.seq > seq)) if newer
                                  else or_(rank < at, and_(rank == at, m.c.seq < seq)))
            key = (rank.asc(), m.c.seq.asc()) if order == "asc" else (rank.desc(),
                                                                      m.c.seq.desc())
            return [rows.message_from_row(row)
                    for row in conn.execute(stmt.order_by(*key).limit(limit))]

        return await self._runner.read(txn)


def _values(record: ConversationRecord) -> dict[str, Any]:
    return {"id": record.id, "agent_id": record.agent_id, "summary": record.summary,
            "in_context_message_ids": record.in_context_message_ids,
            "pending_approval": record.pending_approval,
            "isolated_block_ids": record.isolated_block_ids, "model": record.model,
            "model_settings": record.model_settings, "last_message_at": record.last_message_at,
            "created_at": record.created_at, "updated_at": record.updated_at}


def _load(conn: Connection, conversation_id: str) -> ConversationRecord:
    row = conn.execute(select(c).where(c.c.id == conversation_id)).first()
    if row is None:
        raise NotFoundError(f"no conversation with id {conversation_id!r}")
    return _from_row(conn, row)


def _from_row(conn: Connection, row: Any) -> ConversationRecord:
    ids = context_ids(conn, row.agent_id, list(row.in_context_message_ids),
                      row.in_context_after_seq, conversation_id=row.id)
    return ConversationRecord(
        agent_id=row.agent_id, id=row.id, summary=row.summary, in_context_message_ids=ids,
        pending_approval=row.pending_approval, isolated_block_ids=list(row.isolated_block_ids),
        model=row.model, model_settings=row.model_settings,
        last_message_at=row.last_message_at, created_at=row.created_at,
        updated_at=row.updated_at)
