"""``/v1/ready`` asks the database as the server's role: 200 while PostgreSQL lets the role in
and grants what the server uses, 503 naming the refusal (never the password) when it does
not, while ``/v1/health`` still answers."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import make_url

from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, script, server, settings_for  # noqa: F401 (fixtures)

PASSWORD = "role-s3cret-pw"
_roles = itertools.count()


@pytest.fixture
def role_db(pg_server: Any, pg_database: Callable[..., str]) -> Iterator[tuple[str, str]]:
    """A migrated database and the URL of a role of its own that may use it (with a
    password, which the test server's local connections do not ask for)."""
    url = pg_database()
    role = f"ready_role_{next(_roles)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        conn.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
    yield url, make_url(url).set(username=role, password=PASSWORD).render_as_string(
        hide_password=False)
    with psycopg.connect(pg_server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     f"WHERE usename = '{role}'")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_ready_answers_503_naming_what_postgresql_refuses_the_role(
        fake: FakeOpenAI, role_db: tuple[str, str]) -> None:
    admin_url, role_url = role_db
    role = make_url(role_url).username
    database = make_url(admin_url).database

    def admin(sql: str) -> None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql)

    settings = settings_for(fake, Path("unused"), database_url=role_url)
    with Server(settings) as server:
        def ready() -> httpx.Response:
            answer = httpx.get(f"{server.url}/v1/ready", timeout=30)
            assert PASSWORD not in answer.text
            assert httpx.get(f"{server.url}/v1/health", timeout=5).status_code == 200
            return answer

        healthy = ready()
        assert healthy.status_code == 200, healthy.text

        admin(f"ALTER ROLE {role} NOLOGIN")  # the pool's connections stay open
        refused = ready()
        assert refused.status_code == 503
        assert f'role "{role}" is not permitted to log in' in refused.json()["detail"]
        assert f"cannot open database 'postgresql://{role}:***@" in refused.json()["detail"]
        admin(f"ALTER ROLE {role} LOGIN")
        assert ready().status_code == 200

        admin(f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC")
        refused = ready()
        assert refused.status_code == 503
        assert f"permission denied for database \"{database}\"" in refused.json()["detail"]
        admin(f"GRANT CONNECT ON DATABASE {database} TO PUBLIC")
        assert ready().status_code == 200

        admin(f"REVOKE INSERT, DELETE ON messages FROM {role}")
        admin(f"REVOKE USAGE ON SEQUENCE messages_seq_seq FROM {role}")
        refused = ready()
        assert refused.status_code == 503
        assert refused.json()["detail"].endswith(
            f"role {role!r} lacks rights this server uses on messages (INSERT, DELETE); "
            "messages_seq_seq (USAGE)")
        admin(f"GRANT INSERT, DELETE ON messages TO {role}")
        admin(f"GRANT USAGE ON SEQUENCE messages_seq_seq TO {role}")
        assert ready().status_code == 200
