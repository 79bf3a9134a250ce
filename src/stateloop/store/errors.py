"""Errors the store raises on purpose; each names the thing that was wrong."""

from __future__ import annotations

from stateloop.errors import ConfigError, StateloopError


class StoreError(StateloopError):
    """Base of every error the persistence layer raises on purpose."""


class DatabaseOpenError(StoreError, ConfigError):
    """The database URL cannot be opened (bad scheme, unreachable path, not a database)."""


class SchemaTooNewError(StoreError):
    """The database was written by a newer stateloop; opening it would risk its data."""


class NotFoundError(StoreError, LookupError):
    """An agent, block, run, passage or tool that does not exist."""


class DuplicateError(StoreError, ValueError):
    """A name or label that must be unique is already taken."""


class BlockLimitError(StoreError, ValueError):
    """A block value longer than the block's character limit."""


class EmbeddingMismatchError(StoreError, ValueError):
    """Passages embedded with different models (or dimensions) mixed in one archive."""
