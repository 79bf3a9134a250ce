"""Exceptions. Model failures are typed so the loop can tell transient from final."""

from __future__ import annotations


class StateloopError(Exception):
    """Base of every error stateloop raises on purpose."""


class ConfigError(StateloopError, ValueError):
    """Bad configuration: an argument, an environment variable, a model string."""


class InputTooLarge(StateloopError, ValueError):
    """Run input larger than the context window leaves it: more tokens than remain after the
    system prompt, the tool definitions and the answer's reserve, which no compaction frees.
    Raised before the run starts: nothing is stored and the agent stays as it was."""

    def __init__(self, message: str, *, tokens: int, room: int, window: int) -> None:
        super().__init__(message)
        self.tokens = tokens  # the input's
        self.room = room  # what the window leaves for input
        self.window = window


class ToolDefinitionError(StateloopError, TypeError):
    """A function that cannot become a tool (its signature has no JSON schema)."""


class AgentBusyError(StateloopError):
    """A run is already in flight for this agent and the agent rejects rather than queues."""


class ModelError(StateloopError):
    """A model call failed. ``transient`` errors are retried by the loop."""

    transient = False
    kind = "error"

    def __init__(self, message: str, *, provider: str | None = None,
                 status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.retry_after = retry_after  # seconds, from the provider's Retry-After


class RateLimited(ModelError):
    transient = True
    kind = "rate_limit"


class Overloaded(ModelError):
    transient = True
    kind = "overloaded"


class Unavailable(ModelError):
    """5xx, connection refused or dropped, timeouts."""

    transient = True
    kind = "server_error"


class ContextWindowExceeded(ModelError):
    kind = "context_overflow"


class InvalidRequest(ModelError):
    kind = "invalid_request"


class AuthenticationError(ModelError):
    kind = "authentication"


class InvalidResponse(ModelError):
    """An empty or unparseable response; retried, then ``invalid_llm_response``."""

    transient = True
    kind = "invalid_response"


MODEL_ERRORS: dict[str, type[ModelError]] = {
    cls.kind: cls
    for cls in (RateLimited, Overloaded, Unavailable, ContextWindowExceeded, InvalidRequest,
                AuthenticationError, InvalidResponse)
}


class CheckpointError(StateloopError):
    """A step's write to the store failed: the run stops with stop reason ``error``, and the
    agent goes on from what was last stored."""
