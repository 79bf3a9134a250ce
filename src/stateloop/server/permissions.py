"""What each route requires, from its method and path template alone, and whether a
principal has it: the one rule every route is checked by (``guard``, a dependency of the
whole app), and the table the access guide prints.

API keys have a role: ``read`` may call what changes nothing, ``write`` anything but the
admin routes, ``admin`` everything (the environment's credentials are admins). A client-side
access token may reach only routes under ``/v1/agents/{agent_id}`` of an agent its policy
names, each needing one access of Letta's four; an agent it does not name is not found (404,
as an unknown id is: nothing tells it exists), an operation its policy lacks is forbidden."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from fastapi import HTTPException, Request

from ..store.access import OWNED_PARAMETERS
from ..store.projects import acting_project
from .credentials import Principal

if TYPE_CHECKING:
    from ..store.sql import SqlStore

Need = Literal["read", "write", "admin"]
Access = Literal["read_messages", "write_messages", "read_agent", "write_agent"]
ACCESSES: tuple[Access, ...] = ("read_messages", "write_messages", "read_agent", "write_agent")

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ADMIN_PREFIXES = ("/v1/api-keys", "/v1/audit", "/v1/usage", "/metrics")
# POSTs that change nothing: searches, a stream resumed, a payload previewed, an export, a
# git fetch.
READ_POSTS = frozenset({
    "/v1/tools/search", "/v1/tools/generate-schema", "/v1/messages/search",
    "/v1/agents/messages/search", "/v1/passages/search", "/v1/runs/{run_id}/stream",
    "/v1/conversations/{conversation_id}/stream",
    "/v1/conversations/{conversation_id}/messages/preview-raw-payload",
    "/v1/agents/{agent_id}/export", "/v1/agents/{agent_id}/messages/preview-raw-payload",
    "/v1/agents/{agent_id}/mcp-servers/tools/search",
    "/v1/git/{agent_id}/state.git/git-upload-pack",
})
AGENT = "/v1/agents/{agent_id}"
_SENDS = frozenset({"/messages", "/messages/stream", "/messages/async", "/messages/cancel",
                    "/messages/steer"})
_HIDDEN_FROM_TOKENS = frozenset({"/export", "/secrets"})


def need(method: str, template: str) -> Need:
    """The role a route needs of an API key."""
    if template.startswith(ADMIN_PREFIXES) or (
            template.startswith("/v1/providers") and method in WRITES):
        return "admin"
    if method not in WRITES or (method == "POST" and template in READ_POSTS):
        return "read"
    return "write"


def token_access(method: str, template: str) -> Access | None:
    """The access a client-side token needs for a route, None when no token may call it."""
    if not template.startswith(AGENT + "/") and template != AGENT:
        return None
    rest = template[len(AGENT):]
    if rest.startswith("/messages"):
        if method == "GET":
            return "read_messages"
        if (method == "POST" and rest in _SENDS) or (
                method == "PATCH" and rest == "/messages/{message_id}"):
            return "write_messages"
        return None
    if method == "GET" and rest not in _HIDDEN_FROM_TOKENS:
        return "read_agent"
    if method == "PATCH" and rest in ("", "/core-memory/blocks/{block_label}"):
        return "write_agent"
    return None


def refusal(principal: Principal, method: str, template: str,
            params: Mapping[str, str]) -> HTTPException | None:
    """Why ``principal`` may not call the route, as the error to answer; None: it may."""
    if principal.admin:
        return None
    if principal.role == "token":
        agent = params.get("agent_id")
        if agent is not None and agent not in principal.grants:
            return HTTPException(404, f"agent with id {agent!r} not found")
        access = token_access(method, template)
        if access is None or agent is None:
            return HTTPException(403, f"a client-side access token may not call {method} "
                                 f"{template}: it reaches only the messages and settings of "
                                 "the agents its policy names")
        if access not in principal.grants[agent]:
            granted = ", ".join(sorted(principal.grants[agent])) or "nothing"
            return HTTPException(403, f"this client-side access token's policy for agent "
                                 f"{agent} grants {granted}; {method} {template} needs "
                                 f"{access}")
        return None
    needed = need(method, template)
    if needed == "admin":
        return HTTPException(403, f"{method} {template} needs an admin credential; this is "
                             f"API key {principal.id.removeprefix('key-')} with role "
                             f"{principal.role!r}")
    if needed == "write" and principal.role == "read":
        return HTTPException(403, f"API key {principal.id.removeprefix('key-')} may only "
                             f"read (role 'read'): {method} {template} changes data")
    return None


async def guard(request: Request) -> None:
    """A dependency of every route: 403/404 for a principal that may not call it, 404 for an
    agent of another project than the request acts in. Async, so FastAPI calls it in place
    (no thread hop)."""
    scope = request.scope
    held = scope.get("stateloop.access")
    if held is None:
        return
    template: str = getattr(scope.get("route"), "path_format", "")  # no ":path" convertors
    held.route = template
    params = scope.get("path_params", {})
    refused = refusal(held.principal, request.method, template, params)
    if refused is not None:
        raise refused
    if acting_project.get() is not None:
        store = request.app.state.runtime.store
        for name, value in params.items():
            if not await in_project(store, name, value):  # as unknown as one that never was
                raise HTTPException(404, unknown(name, value))


def unknown(parameter: str, value: str) -> str:
    """What the routes answer (most of them, word for word) for an id that names nothing."""
    if parameter == "agent_id":
        return f"agent with id or name {value!r} not found"
    if parameter == "batch_id":
        return f"batch with id {value!r} not found"
    if parameter == "job_id":
        return f"Job with id {value!r} not found"
    if parameter in ("archive_id", "folder_id", "source_id"):
        return f"no {parameter.removesuffix('_id').replace('source', 'folder')} {value!r}"
    return f"no {parameter.removesuffix('_id')} with id {value!r}"


async def in_project(store: SqlStore, parameter: str, value: str) -> bool:
    """Whether what a path parameter names (an agent, a run, step, conversation or message
    of one, or what has a project of its own: a block, a message batch...) is of the project
    the request acts in, or of none (not found: the route says so); True for a parameter
    naming something else."""
    project = acting_project.get()
    if project is None:
        return True
    if parameter == "agent_id":
        found = await store.agent_project(value)
    elif parameter in OWNED_PARAMETERS:
        found = await store.owner_project(parameter, value)
    else:
        return True
    return found is None or found == project


def table(routes: Iterable[tuple[str, str]]) -> list[tuple[str, str, Need, Access | None]]:
    """``(method, path, role needed, token access)`` of each route, in path order."""
    return sorted(((method, path, need(method, path), token_access(method, path))
                   for method, path in routes), key=lambda row: (row[1], row[0]))
