"""An agent's memory history on the public face: ``memory_history`` (its commits, or a
block's), ``memory_at`` (the blocks as of a commit), ``memory_diff`` and ``revert_memory``
(a new commit), each with an ``a``-prefixed async form. Every block change of a persisted
agent is a commit in its memory repository (store/memory_repo.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ConfigError
from .persistence import run_blocking
from .store import memory_files
from .store.memory_history import MemoryCommitRecord, unified_diff
from .store.memory_repo import Author, changed_by

if TYPE_CHECKING:
    from .agent_memory import ThreadMemory
    from .store.sql import SqlStore


class MemoryHistory:
    """The memory history methods of ``Agent``."""

    if TYPE_CHECKING:
        id: str
        memory: ThreadMemory

        @property
        def store(self) -> SqlStore | None: ...

    def _history_store(self) -> SqlStore:
        store = self.store
        if store is None:
            raise ConfigError("memory history needs a persisted agent (Agent(store=...))")
        return store

    def memory_history(self, label: str | None = None, *, limit: int = 50,
                       before: int | None = None) -> list[MemoryCommitRecord]:
        """The agent's memory commits, newest first (only those that changed ``label``'s
        block, if given); ``before`` is a commit's ``seq``, for the next page."""
        return run_blocking(lambda: self.amemory_history(label, limit=limit, before=before))

    async def amemory_history(self, label: str | None = None, *, limit: int = 50,
                              before: int | None = None) -> list[MemoryCommitRecord]:
        """``memory_history`` for async code."""
        return await self._history_store().memory_commits(self.id, label=label, limit=limit,
                                                          before=before)

    def memory_at(self, commit: str = "HEAD") -> dict[str, str]:
        """Label -> value of each block as of ``commit`` (a sha, a prefix, ``HEAD``)."""
        return run_blocking(lambda: self.amemory_at(commit))

    async def amemory_at(self, commit: str = "HEAD") -> dict[str, str]:
        """``memory_at`` for async code."""
        _, files = await self._history_store().memory_files(self.id, commit)
        found = {}
        v2 = "MEMORY.md" in files
        for path, text in files.items():
            label = memory_files.label_of(path)
            if label is not None:
                found[label] = memory_files.parse(path, text, v2=v2).value
        return found

    def memory_diff(self, old: str, new: str = "HEAD") -> str:
        """A unified diff of the memory files from commit ``old`` to ``new``."""
        return run_blocking(lambda: self.amemory_diff(old, new))

    async def amemory_diff(self, old: str, new: str = "HEAD") -> str:
        """``memory_diff`` for async code."""
        store = self._history_store()
        _, before = await store.memory_files(self.id, old)
        _, after = await store.memory_files(self.id, new)
        return unified_diff(before, after)

    def revert_memory(self, commit: str, label: str | None = None) -> str | None:
        """Set the blocks (or the one with ``label``) back to ``commit``; the revert is a new
        commit, whose sha this returns (None if nothing differed)."""
        return run_blocking(lambda: self.arevert_memory(commit, label))

    async def arevert_memory(self, commit: str, label: str | None = None) -> str | None:
        """``revert_memory`` for async code."""
        token = changed_by.set(changed_by.get() or Author("user", "library", "revert_memory"))
        try:
            sha = await self._history_store().revert_memory(self.id, commit, label=label)
        finally:
            changed_by.reset(token)
        await self.memory.sync_blocks()  # the live blocks and prompt as the store has them
        return sha
