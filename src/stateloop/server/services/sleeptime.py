"""``enable_sleeptime`` over REST: turning an agent's memory agent on (made with its
sleeptime group on first use, as Letta does) and off, on the store and on the live agent;
what deleting either agent of the pair, or their group, does; blocks attached to the main
agent reaching the memory agent; and keeping the live main agent in step with its group
when ``/v1/groups`` changes it."""

from __future__ import annotations

import logging

from ...agent import Agent
from ...sleeptime import (
    MANAGER_TYPE,
    MEMORY_AGENT_TYPE,
    Sleeptime,
    SleeptimeLink,
    create_memory_agent,
    stored_link,
)
from ...store import DuplicateError, NotFoundError
from ...store.groups import GroupRecord
from .runtime import Runtime

logger = logging.getLogger("stateloop.server")


async def set_sleeptime(runtime: Runtime, agent_id: str, on: bool) -> None:
    """Turn the agent's memory agent on (making it and its group the first time) or off;
    off keeps both, idle, as Letta does."""
    store = runtime.store
    record = await store.get_agent(agent_id)
    link = await stored_link(store, agent_id)
    if on and link is None:
        link, _ = await create_memory_agent(Agent, store, agent_id, record.model or
                                            runtime.settings.default_model,
                                            **runtime.agent_options())
    elif record.enable_sleeptime != on:
        await store.update_agent(agent_id, enable_sleeptime=on)
    live = runtime.live(agent_id)
    if live is not None and link is not None:
        if live.sleeptime is None:
            live.sleeptime = Sleeptime(live, link)
            live.sleeptime.loader = runtime.agent
        live.sleeptime.enabled = on


async def share_block(runtime: Runtime, agent_id: str, block_id: str) -> None:
    """A block just attached to an agent with a memory agent is attached to the memory agent
    too, as Letta does (detaching it from the main agent leaves the memory agent's, as
    there). A memory agent already holding another block of that label keeps its own."""
    group = await runtime.store.managed_group(agent_id)
    if group is None or group.manager_type != MANAGER_TYPE:
        return
    for member in group.agent_ids:
        try:
            if (await runtime.store.get_agent(member)).agent_type != MEMORY_AGENT_TYPE:
                continue
            if block_id not in {b.id for b in await runtime.store.list_blocks(member)}:
                await runtime.store.attach_block(member, block_id)
        except NotFoundError:
            continue  # deleted meanwhile
        except DuplicateError as exc:
            logger.warning("block %s not shared with memory agent %s: %s", block_id, member,
                           exc)


async def follow_group(runtime: Runtime, group: GroupRecord,
                       before: GroupRecord | None = None) -> None:
    """A sleeptime group was created or changed over ``/v1/groups``: its live main agent
    takes the new frequency and member at once (a former main agent lets it go)."""
    if group.manager_type != MANAGER_TYPE:
        return
    if before is not None and before.manager_agent_id not in (None, group.manager_agent_id):
        former = runtime.live(before.manager_agent_id)
        if former is not None and former.sleeptime is not None \
                and former.sleeptime.link.group_id == group.id:
            await former.sleeptime.close()
            former.sleeptime = None
    if group.manager_agent_id is None:
        return
    live = runtime.live(group.manager_agent_id)
    link = SleeptimeLink.from_group(group)
    if live is None or link is None:
        return
    if live.sleeptime is None or live.sleeptime.link.group_id != group.id:
        if live.sleeptime is not None:
            return  # it has a sleeptime group of its own; that one stays its link
        record = await runtime.store.get_agent(live.id)
        live.sleeptime = Sleeptime(live, link, enabled=record.enable_sleeptime)
        live.sleeptime.loader = runtime.agent
        return
    live.sleeptime.follow(link)


async def end_group(runtime: Runtime, group: GroupRecord) -> None:
    """Delete a group; a sleeptime group's main agent stops using it (its run in flight is
    cancelled) and has ``enable_sleeptime`` off. As Letta does, the memory agent stays."""
    main_id = group.manager_agent_id if group.manager_type == MANAGER_TYPE else None
    if main_id is not None:
        live = runtime.live(main_id)
        if live is not None and live.sleeptime is not None \
                and live.sleeptime.link.group_id == group.id:
            await live.sleeptime.close()  # first: it would store the group again
            live.sleeptime = None
    await runtime.store.delete_group(group.id)
    if main_id is not None:
        try:
            await runtime.store.update_agent(main_id, enable_sleeptime=False)
        except NotFoundError:
            pass  # the main agent is being deleted


async def drop_sleeptime(runtime: Runtime, agent_id: str) -> None:
    """Before an agent is deleted, as Letta does: a main agent's memory agent and group go
    with it (its run in flight cancelled); a memory agent's group goes, and its main agent
    has ``enable_sleeptime`` off."""
    store = runtime.store
    record = await store.get_agent(agent_id)
    group = await store.managed_group(agent_id)
    if group is not None and group.manager_type == MANAGER_TYPE:
        await end_group(runtime, group)
        for memory_id in group.agent_ids:
            try:
                await store.delete_agent(memory_id)
            except NotFoundError:
                pass  # deleted before
            runtime.forget(memory_id)
        return
    if record.agent_type != MEMORY_AGENT_TYPE:
        return
    for found in await store.list_groups(manager_type=MANAGER_TYPE, agent_id=agent_id,
                                         show_hidden=True):
        if agent_id in found.agent_ids:
            await end_group(runtime, found)
