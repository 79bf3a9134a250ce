"""Counting and cross-cutting reads of ``SqlStore``: tags in use, how many agents, blocks
or tools match a filter, and the filters of agents' lists (``agents_where``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, func, select

from stateloop.store import schema
from stateloop.store.paging import between
from stateloop.store.projects import acting_project
from stateloop.store.records import EVERYTHING, Page
from stateloop.store.runner import Runner

a, b, ba, tags_t = schema.agents, schema.blocks, schema.blocks_agents, schema.agent_tags
i, ia = schema.identities, schema.identities_agents
aa = schema.archives_agents


class CatalogMixin:
    """Tag, count and block-sharing reads of ``SqlStore``."""

    _runner: Runner

    async def list_tags(self, text: str | None = None, page: Page = EVERYTHING) -> list[str]:
        """The tags some agent has on ``page`` (by default all, alphabetically), whose
        cursors are tags, as in Letta; ``text`` keeps those containing it
        (case-insensitive). Read in SQL, on the tags' index."""
        tag = tags_t.c.tag
        stmt = select(tag).distinct()
        if text:
            stmt = stmt.where(func.lower(tag).contains(text.lower(), autoescape=True))
        stmt = between(stmt, (tag,), page, None if page.after is None else (page.after,),
                       None if page.before is None else (page.before,))
        return await self._runner.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def agent_models(self) -> list[str]:
        """Every model handle some agent uses, alphabetically."""
        stmt = select(a.c.model).distinct().where(a.c.model.is_not(None)).order_by(a.c.model)
        return await self._runner.read(lambda conn: list(conn.execute(stmt).scalars()))

    async def count_agents(self, *, name: str | None = None, tags: Sequence[str] | None = None,
                           match_all_tags: bool = False, query_text: str | None = None,
                           identity_id: str | None = None,
                           identifier_keys: Sequence[str] | None = None) -> int:
        """How many agents match ``agents_where``'s filters, counted in SQL."""
        stmt = agents_where(select(func.count()).select_from(a), name=name, tags=tags,
                            match_all_tags=match_all_tags, query_text=query_text,
                            identity_id=identity_id, identifier_keys=identifier_keys)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))

    async def count_blocks(self, *, label: str | None = None) -> int:
        """How many blocks there are (with this label)."""
        stmt = select(func.count()).select_from(b)
        if (project := acting_project.get()) is not None:
            stmt = stmt.where(b.c.project == project)
        if label is not None:
            stmt = stmt.where(b.c.label == label)
        return await self._runner.read(lambda conn: int(conn.execute(stmt).scalar_one()))


def agents_where(stmt: Select[Any], *, name: str | None = None,
                 tags: Sequence[str] | None = None, match_all_tags: bool = False,
                 query_text: str | None = None, identity_id: str | None = None,
                 identifier_keys: Sequence[str] | None = None,
                 block_id: str | None = None, archive_id: str | None = None) -> Select[Any]:
    """``stmt`` (over ``agents``) keeping the agents with this exact name, a name containing
    ``query_text`` (any case), these tags (any, or all), linked to this identity and/or to
    an identity with one of these keys, sharing this block, attached to this archive; of
    the acting project alone when the request acts in one."""
    project = acting_project.get()
    if project is not None:
        stmt = stmt.where(a.c.project == project)
    if name is not None:
        stmt = stmt.where(a.c.name == name)
    if query_text:
        stmt = stmt.where(func.lower(a.c.name).contains(query_text.lower(), autoescape=True))
    if tags:
        tagged = select(tags_t.c.agent_id).where(tags_t.c.tag.in_(list(tags)))
        if match_all_tags:
            tagged = (tagged.group_by(tags_t.c.agent_id)
                      .having(func.count(func.distinct(tags_t.c.tag)) == len(set(tags))))
        stmt = stmt.where(a.c.id.in_(tagged))
    if identity_id is not None or identifier_keys:
        stmt = stmt.where(a.c.id.in_(
            identities_linked(ia.c.agent_id, ia.c.identity_id, identity_id, identifier_keys)))
    if block_id is not None:
        stmt = stmt.where(a.c.id.in_(select(ba.c.agent_id).where(ba.c.block_id == block_id)))
    if archive_id is not None:
        stmt = stmt.where(a.c.id.in_(select(aa.c.agent_id).where(aa.c.archive_id == archive_id)))
    return stmt


def identities_linked(linked: Any, identity: Any, identity_id: str | None,
                      identifier_keys: Sequence[str] | None) -> Select[Any]:
    """The ``linked`` ids (agents or blocks, from their identities link table, whose
    ``identity`` column names the identity) of this identity and/or of an identity with one
    of these keys."""
    query = select(linked).join(i, i.c.id == identity)
    if identity_id is not None:
        query = query.where(i.c.id == identity_id)
    if identifier_keys:
        query = query.where(i.c.identifier_key.in_(list(identifier_keys)))
    return query
