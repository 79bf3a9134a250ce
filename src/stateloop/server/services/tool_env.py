"""An agent's tool environment variables (Letta's ``secrets``, formerly
``tool_exec_environment_variables``): kept in the agent record's ``extra``, given to the
agent's source tools over the server's ``STATELOOP_TOOL_ENV``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ...store import AgentRecord

# In ``AgentRecord.extra``: [{"id": "agent-env-...", "key": ..., "value": ...}], in the
# order given. Not Letta's .af field names, so an Agent File's own fields never collide.
EXTRA_KEY = "tool_env"


def stored_env(record: AgentRecord) -> list[dict[str, str]]:
    """The agent's variables as stored, each with its id."""
    variables: list[dict[str, str]] = record.extra.get(EXTRA_KEY) or []
    return variables


def agent_env(record: AgentRecord) -> dict[str, str]:
    """The agent's variables, name to value."""
    return {variable["key"]: variable["value"] for variable in stored_env(record)}


def replace_env(record: AgentRecord, variables: Mapping[str, str]) -> dict[str, Any]:
    """The record's ``extra`` with its variables replaced by ``variables`` (a PATCH replaces
    the whole set, as Letta's does); a variable that stays keeps its id."""
    ids = {variable["key"]: variable["id"] for variable in stored_env(record)}
    stored = [{"id": ids.get(key) or f"agent-env-{uuid.uuid4()}", "key": key, "value": value}
              for key, value in variables.items()]
    return {**record.extra, EXTRA_KEY: stored}
