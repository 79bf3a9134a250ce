"""Which relationships of Letta's ``AgentState`` a request asks for.

As Letta 0.16.8 does: ``include`` names them (``agent.blocks``, ``agent.tools``, ...); the
legacy ``include_relationships`` names them the older way (``memory``, ``tools``, ...). A
1.x SDK (letta-client sends ``X-Stainless-Package-Version``, or a ``letta-client/1.x``
User-Agent; a request with no User-Agent counts as one) gets only what ``include`` names;
any other caller that names neither (the web page, curl, an older SDK) gets every
relationship, as before 1.0.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query, Request

AgentRelationship = Literal[
    "agent.blocks", "agent.identities", "agent.managed_group", "agent.pending_approval",
    "agent.secrets", "agent.sources", "agent.tags", "agent.tools",
]
EVERY: frozenset[str] = frozenset(AgentRelationship.__args__)  # type: ignore[attr-defined]

# The legacy names, and what each brings (Letta loads tags with memory).
_LEGACY = {
    "memory": ("agent.blocks", "agent.tags"), "tags": ("agent.tags",),
    "tools": ("agent.tools",), "sources": ("agent.sources",),
    "identity_ids": ("agent.identities",), "multi_agent_group": ("agent.managed_group",),
    "tool_exec_environment_variables": ("agent.secrets",), "secrets": ("agent.secrets",),
}


def sdk_1x(request: Request) -> bool:
    """Whether the caller is a 1.x Letta SDK, as Letta tells (``is_1_0_sdk_version``)."""
    if request.headers.get("x-stainless-package-version"):
        return True
    agent = request.headers.get("user-agent")
    if not agent:
        return True
    parts = agent.split("/")
    if parts[:-1] not in (["letta-client"], ["@letta-ai", "letta-client"]):
        return False
    version = parts[-1].split("-")[0].split("a")[0].split("b")[0]
    return "." in version and version.split(".")[0] == "1"


def wanted(request: Request,
           include: Annotated[list[AgentRelationship] | None, Query(
               description="Relationships to include: none by default for a 1.x SDK")] = None,
           include_relationships: Annotated[list[str] | None, Query(
               deprecated=True, description="The legacy way to name them")] = None,
           ) -> frozenset[str]:
    """The relationships to build (a FastAPI dependency of the routes that list agents)."""
    if include_relationships is None and not sdk_1x(request):
        return EVERY
    named = {part for name in include_relationships or () for part in _LEGACY.get(name, ())}
    return frozenset(named | set(include or ()))


def included(request: Request,
             include: Annotated[list[AgentRelationship] | None, Query(
                 description="Relationships to include: none by default for a 1.x SDK")] = None,
             ) -> frozenset[str]:
    """``wanted``, for the routes where Letta takes ``include`` only."""
    return wanted(request, include)


# A route's parameter: the relationships of an AgentState its request asks for.
Relationships = Annotated[frozenset[str], Depends(wanted)]
Included = Annotated[frozenset[str], Depends(included)]
