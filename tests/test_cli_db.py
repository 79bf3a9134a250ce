"""``stateloop migrate``: the schema brought to head on PostgreSQL and SQLite, once; a
database from a newer stateloop or an unreachable server refused with a clear error."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
from sqlalchemy import create_engine

from stateloop.store.migrate import HEAD, known_revisions, upgrade
from stateloop.store.url import resolve_url
from test_cli_support import Cli, cli, fake, script  # noqa: F401 (fixtures)


def revision_of(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        assert row is not None
        return str(row[0])


def test_migrate_upgrades_a_postgresql_database_named_by_the_environment(
        cli: Cli, pg_database: Callable[..., str]) -> None:
    url = cli.env["STATELOOP_DATABASE_URL"] = pg_database(migrated=False)
    first = cli("migrate")  # the console script, as a deploy runs it
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == HEAD and "created the schema" in first.stderr
    assert revision_of(url) == HEAD

    again = cli.inline("migrate")
    assert again.exit_code == 0 and again.stdout.strip() == HEAD
    assert "at the newest revision already" in again.stderr


def test_migrate_upgrades_an_older_database_from_its_revision(
        cli: Cli, pg_database: Callable[..., str]) -> None:
    url = pg_database(migrated=False)
    older = known_revisions()[-2]
    engine = create_engine(resolve_url(url).sync_url())  # as an older stateloop left it
    with engine.begin() as conn:
        upgrade(conn, url, older)
    engine.dispose()
    assert revision_of(url) == older

    done = cli.inline("migrate", "--database", url)
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == HEAD and f"upgraded from revision {older}" in done.stderr
    assert revision_of(url) == HEAD


def test_migrate_creates_a_sqlite_file_given_as_a_path(cli: Cli) -> None:
    path = cli.db.parent / "fresh" / "agents.db"
    path.parent.mkdir()  # a given path's directory must exist, as for every command
    done = cli.inline("migrate", "--db", str(path))
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == HEAD and path.exists()
    assert cli.inline("agents", "list", "--db", str(path)).exit_code == 0


def test_migrate_refuses_a_newer_schema_and_an_unreachable_server(
        cli: Cli, pg_database: Callable[..., str]) -> None:
    url = pg_database()
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    try:
        newer = cli.inline("migrate", "--db", url)
        assert newer.exit_code == 2
        assert "newer than this stateloop" in newer.stderr
        assert "Nothing was changed" in newer.stderr and revision_of(url) == "9999"
    finally:  # the database is emptied and handed to a later test
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE alembic_version SET version_num = %s", (HEAD,))

    gone = cli.inline("migrate", env={
        "STATELOOP_DATABASE_URL": "postgresql://ada:s3cret@127.0.0.1:1/agents"})
    assert gone.exit_code == 3
    assert "cannot open database 'postgresql://ada:***@127.0.0.1:1/agents'" in gone.stderr
    assert "s3cret" not in gone.output


def test_migrate_refuses_a_path_in_a_missing_directory_as_every_command_does(
        cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "dir"
    db = str(missing / "x.db")
    for args in (("migrate", "--db", db), ("agents", "list", "--db", db)):
        done = cli.inline(*args)
        assert done.exit_code == 2, (args, done.output)
        assert done.stderr == (f"error: --db {db}: the directory {str(missing)!r} does not "
                               "exist; create it first, or give another path\n")
    assert not (tmp_path / "missing").exists()  # nothing made
