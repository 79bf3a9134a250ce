"""Group commit: step writes queued on the event loop and committed together.

A step's checkpoint is queued, not committed on the spot. The queue is committed at the
next turn of the event loop, before any other read or write; a step that begins while its
own agent's writes are still queued waits for that commit (a crash may lose the step in
flight, never an earlier one). Steps of agents that finish in the same turn thus share one
transaction: with many agents stepping at once, a few commits rather than one per step.
Consecutive items of one batch function are written by one call of it (each table's rows in
one statement). Every step still lands whole or not at all: when a combined call fails, its
items are retried one by one inside savepoints, so only the failing one is undone. Items of
one chain (an agent's steps) build on each other: once one fails, the later ones of its
chain fail too, so what lands of a chain is always a prefix of it.

A ``tx`` with a ``batch`` (PostgreSQL's, postgres.py) sends the first attempt's statements
together, COMMIT included: the group costs one round trip when its batch functions wait for
no reply (fastpath.py). Any failure there undoes the whole attempt, and the group is written
again statement by statement, as above.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from stateloop.store.dialect import SQLITE_TX

# Told each group's commit: its seconds and how many items it wrote (the server's metrics).
CommitWatcher = Callable[[float, int], None]
_commit_watchers: list[CommitWatcher] = []


def watch_commits(watcher: CommitWatcher) -> None:
    """Have ``watcher(seconds, items)`` told of every group commit from now on (on the
    thread that commits)."""
    _commit_watchers.append(watcher)


def unwatch_commits(watcher: CommitWatcher) -> None:
    """Stop telling ``watcher``."""
    if watcher in _commit_watchers:
        _commit_watchers.remove(watcher)


def _no_chain(_item: Any) -> Any:
    return None


class BatchFn:
    """A batched write, ``fn(conn, items)``; ``chain`` names the chain an item belongs to
    (None: none)."""

    __slots__ = ("chain", "write")

    def __init__(self, write: Callable[[Any, list[Any]], None],
                 chain: Callable[[Any], Any] = _no_chain) -> None:
        self.write, self.chain = write, chain

    def __call__(self, conn: Any, items: list[Any]) -> None:
        self.write(conn, items)


class Queued:
    """One queued item's outcome, filled in when its group commits."""

    __slots__ = ("_done", "_error", "_times")

    def __init__(self) -> None:
        self._done = False
        self._error: BaseException | None = None
        self._times: tuple[int, int] | None = None

    def commit_times(self) -> tuple[int, int] | None:
        """When its group's commit began and ended (ns, wall clock); None until it landed."""
        return self._times if self._done and self._error is None else None

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._error


class GroupCommit:
    """The queue; ``commit`` writes it in one transaction on a DBAPI connection, which
    ``tx`` begins and ends (dialect.SQLITE_TX, postgres.PIPELINED_TX)."""

    def __init__(self, tx: Any = None) -> None:
        self._items: list[tuple[BatchFn, Any, Queued]] = []
        self._tx = tx or SQLITE_TX

    def __len__(self) -> int:
        return len(self._items)

    def add(self, fn: BatchFn, item: Any) -> Queued:
        """Queue ``item`` for ``fn``."""
        queued = Queued()
        self._items.append((fn, item, queued))
        return queued

    def commit(self, conn: Any, dbapi: Any, then: Callable[[Any], Any] | None = None) -> Any:
        """Write everything queued, then ``then(conn)`` if given, in one transaction; each
        queued item's outcome is recorded. Returns what ``then`` returned, or raises what it
        raised (the queued items still land)."""
        return self.commit_items(self.take(), conn, dbapi, then)

    def take(self) -> list[tuple[BatchFn, Any, Queued]]:
        """Empty the queue; what it held, for ``commit_items`` (on another thread, say)."""
        items, self._items = self._items, []
        return items

    def commit_items(self, items: list[tuple[BatchFn, Any, Queued]], conn: Any, dbapi: Any,
                     then: Callable[[Any], Any] | None = None) -> Any:
        """``commit`` of items already taken from the queue."""
        began, began_ns = time.perf_counter(), time.time_ns()
        tx = self._tx
        units: list[list[tuple[BatchFn, Any, Queued]]] = []
        for entry in items:
            if units and units[-1][0][0] is entry[0]:
                units[-1].append(entry)
            else:
                units.append([entry])
        errors: dict[int, BaseException] = {}
        result: Any = None
        then_error: BaseException | None = None
        committed = False
        try:
            tx.begin(dbapi)
            try:  # no savepoints on the happy path: SQLite journals every page under one
                # ``then`` is left out of a batch: it may wait for replies as it goes
                batch = getattr(tx, "batch", None) if then is None else None
                with batch(dbapi) if batch is not None else nullcontext():
                    for unit in units:
                        unit[0][0](conn, [item for _, item, _ in unit])
                committed = batch is not None
                if then is not None:
                    result = then(conn)
                failed = False
            except Exception:
                failed = True
            if failed:
                # Start over, each part in a savepoint of its own, so only what fails is
                # undone (outside the except block: its errors are not chained to this one).
                tx.rollback(dbapi)
                tx.begin(dbapi)
                broken: dict[Any, BaseException] = {}  # chain -> why it broke
                for unit in units:
                    _guarded(conn, dbapi, unit, errors, broken)
                if then is not None:
                    dbapi.execute("SAVEPOINT queued")
                    try:
                        result = then(conn)
                    except Exception as exc:
                        then_error = exc
                        dbapi.execute("ROLLBACK TO queued")
                    dbapi.execute("RELEASE queued")
            if not committed:
                tx.commit(dbapi)
        except BaseException as exc:  # nothing landed: every item reports why
            if tx.in_transaction(dbapi):
                tx.rollback(dbapi)
            for _, _, queued in items:
                errors.setdefault(id(queued), exc)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt and the like are not the items' to keep
            then_error = exc
        finally:
            times = (began_ns, time.time_ns())
            for _, _, queued in items:
                queued._error = errors.get(id(queued))
                queued._done = True
                queued._times = times
            if items:
                took = time.perf_counter() - began
                for watcher in _commit_watchers:
                    watcher(took, len(items))
        if then_error is not None and then is not None:
            raise then_error
        return result


def _guarded(conn: Any, dbapi: Any, unit: list[tuple[BatchFn, Any, Queued]],
             errors: dict[int, BaseException], broken: dict[Any, BaseException]) -> None:
    """Run ``unit`` in a savepoint; if it fails, undo it and retry its items alone. Items
    of a ``broken`` chain fail with the error that broke it."""
    if broken:
        unit = [entry for entry in unit if not _blocked(entry, errors, broken)]
        if not unit:
            return
    dbapi.execute("SAVEPOINT queued")
    try:
        unit[0][0](conn, [item for _, item, _ in unit])
    except Exception as exc:
        dbapi.execute("ROLLBACK TO queued")
        dbapi.execute("RELEASE queued")
        if len(unit) == 1:
            fn, item, queued = unit[0]
            errors[id(queued)] = exc
            chain = fn.chain(item)
            if chain is not None:
                broken.setdefault(chain, exc)
        else:
            for entry in unit:
                _guarded(conn, dbapi, [entry], errors, broken)
        return
    dbapi.execute("RELEASE queued")


def _blocked(entry: tuple[BatchFn, Any, Queued], errors: dict[int, BaseException],
             broken: dict[Any, BaseException]) -> bool:
    fn, item, queued = entry
    cause = broken.get(fn.chain(item))
    if cause is None:
        return False
    errors[id(queued)] = cause
    return True
