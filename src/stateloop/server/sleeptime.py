"""``enable_sleeptime`` over REST: turning an agent's memory agent on (made on first use,
as Letta does) and off, on the store and on the live agent."""

from __future__ import annotations

from ..sleeptime import Sleeptime, create_memory_agent, stored_link
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

