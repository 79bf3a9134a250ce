"""The server's side of a fleet of processes on one PostgreSQL (store/fleet.py): reaching a
run held by another process (cancel, steer), doing what other processes ask of this one, and
telling them of an agent changed here outside a run.

A run in flight belongs to the process whose turn it is in the run's thread; that process
alone can stop it or steer it, so the others send it word and it acts as if asked directly.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from ...agent import Agent, Thread
from ...store.fleet import Fleet
from ..middleware import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from .runtime import Runtime

logger = logging.getLogger("stateloop.server")

# Requests that change an agent outside a run: any but GET under /v1/agents/{id}, except
# sending (a run's turn says it) and reaching a run (cancel, steer).
_AGENT_PATH = re.compile(r"^/v1/agents/(agent-[^/]+)(/.*)?$")
_RUN_PATHS = re.compile(r"^/messages(/stream|/async|/cancel|/steer)?/?$")


def listen(runtime: Runtime) -> None:
    """Do what other processes ask of this one."""
    fleet = runtime.store.fleet
    if fleet is not None:
        fleet.subscribe(lambda message: _handle(runtime, message))


def _handle(runtime: Runtime, message: dict[str, Any]) -> None:
    op, agent_id = message.get("op"), message.get("agent_id")
    agent = runtime.live(agent_id) if isinstance(agent_id, str) else None
    if agent is None:
        return  # not live here: it is read from the store when next used
    if op == "changed":
        # Its settings may have changed: load it anew when next used (now, unless a run of
        # it is in flight here, whose turn reads the rest again when it ends).
        if not any(thread.running for thread in agent.threads):
            runtime.forget(agent.id)
        return
    thread = _thread(agent, message.get("conversation_id"))
    if thread is None:
        return
    if op == "cancel" and thread.running:
        thread.cancel()
    elif op == "steer":  # an idle thread starts a run with it, as when asked directly
        text = str(message.get("content", ""))
        if message.get("mode") == "follow_up":
            thread.follow_up(text)
        else:
            thread.steer(text, "interrupt" if message.get("mode") == "interrupt"
                         else "after_batch")


def _thread(agent: Agent, conversation_id: Any) -> Thread | None:
    if conversation_id is None:
        return agent
    return next((t for t in agent.threads if t.conversation_id == conversation_id), None)


async def held_elsewhere(runtime: Runtime, agent_id: str,
                         conversation_id: str | None = None) -> str | None:
    """The other process whose run of this thread is in flight, if one is."""
    fleet = runtime.store.fleet
    if fleet is None:
        return None
    holder = await fleet.holder(agent_id, conversation_id)
    return holder if holder != fleet.name else None


async def thread_runs(runtime: Runtime, agent_id: str, conversation_id: str | None = None,
                        *, status: str | None = "running") -> list[str]:
    """Ids of the thread's runs the store shows in flight (a run's row lands with its first
    step: one just started may not show yet), newest first; ``status=None``: its latest
    runs, whatever their state."""
    runs = await runtime.store.list_runs(agent_id, status=status, limit=50)
    return [run.id for run in runs if run.metadata.get("conversation_id") == conversation_id]


async def ask(runtime: Runtime, holder: str, op: str, agent_id: str,
              conversation_id: str | None = None, **fields: Any) -> None:
    """Send ``op`` for the thread's run to the process holding it."""
    fleet = runtime.store.fleet
    assert fleet is not None
    await fleet.send({"op": op, "to": holder, "agent_id": agent_id,
                      "conversation_id": conversation_id, **fields})


class AgentChanges:
    """ASGI middleware: after a request that changed an agent outside a run succeeds, the
    other processes are told, so they read the agent anew (its settings, tools, messages)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _changes(scope)
        runtime = getattr(scope["app"].state, "runtime", None) if match else None
        fleet: Fleet | None = runtime.store.fleet if runtime is not None else None
        if match is None or fleet is None:
            await self.app(scope, receive, send)
            return
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, sending)
        if 200 <= status < 300:
            try:
                await fleet.touch(match)
            except Exception:  # the change is stored; others see it at their next turn
                logger.warning("could not tell other processes that agent %s changed", match,
                               exc_info=True)


def _changes(scope: Scope) -> str | None:
    """The id of the agent this request changes outside a run, or None."""
    if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
        return None
    found = _AGENT_PATH.match(scope["path"])
    if found is None or _RUN_PATHS.match(found.group(2) or ""):
        return None
    return found.group(1)
