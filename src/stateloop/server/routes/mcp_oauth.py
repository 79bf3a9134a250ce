"""``/v1/tools/mcp/oauth/callback``: where an OAuth provider sends the browser back to after
an MCP server's authorisation. stateloop starts no OAuth flow (MCP servers take their
credentials as headers), so no ``state`` is one it knows; the answers are Letta's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

router = APIRouter(prefix="/v1/tools/mcp/oauth", tags=["tools"])


@router.get("/callback")
async def mcp_oauth_callback(code: str | None = None, state: str | None = None,
                             error: str | None = None,
                             error_description: str | None = None) -> dict[str, Any]:
    """Letta's ``{"status": "error", "message": ...}`` for a missing or unknown state."""
    if not state:
        return {"status": "error", "message": "Missing state parameter"}
    return {"status": "error", "message": "Invalid or expired state parameter"}
