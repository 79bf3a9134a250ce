"""``enable_sleeptime`` over REST: turning an agent's memory agent on (made on first use,
as Letta does) and off, on the store and on the live agent; and what deleting either agent
of the pair does to the other."""

from __future__ import annotations

from ..sleeptime import EXTRA_KEY, MEMORY_AGENT_TYPE, Sleeptime, create_memory_agent, stored_link
from ..store import NotFoundError
from .runtime import Runtime


async def set_sleeptime(runtime: Runtime, agent_id: str, on: bool) -> None:
    """Turn the agent's memory agent on (making it and its group the first time) or off;
    off keeps both, idle, as Letta does."""
    store = runtime.store
    record = await store.get_agent(agent_id)
    link = stored_link(record.extra)
    if on and link is None:
        link, _ = await create_memory_agent(store, agent_id, record.model or
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



async def drop_sleeptime(runtime: Runtime, agent_id: str) -> None:
    """Before an agent is deleted, as Letta does: a main agent's memory agent goes with it
    (its run in flight cancelled); a memory agent's main agent loses the link."""
    store = runtime.store
    record = await store.get_agent(agent_id)
    link = stored_link(record.extra)
    live = runtime.live(agent_id)
    if link is not None:
        if live is not None and live.sleeptime is not None:
            await live.sleeptime.close()
            live.sleeptime = None
        try:
            await store.delete_agent(link.memory_agent_id)
        except NotFoundError:
            pass  # deleted before
        runtime.forget(link.memory_agent_id)
        return
    if record.agent_type != MEMORY_AGENT_TYPE:
        return
    for main in await store.list_agents():
        found = stored_link(main.extra)
        if found is not None and found.memory_agent_id == agent_id:
            owner = runtime.live(main.id)
            if owner is not None and owner.sleeptime is not None:
                await owner.sleeptime.close()  # first: it would store the link again
                owner.sleeptime = None
            extra = {k: v for k, v in main.extra.items() if k != EXTRA_KEY}
            await store.update_agent(main.id, extra=extra, enable_sleeptime=False)
