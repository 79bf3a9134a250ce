"""Message batches through letta-client (``/v1/messages/batches``: 1.12.1 has no resource
for them, so its generic ``get``/``post``/``patch``): requests to many agents run as their
runs, a bounded number at a time, results listed per request and their messages together;
cancelled; refused input named before anything runs; the callback called; on SQLite and
PostgreSQL."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from letta_client import Letta, NotFoundError, PermissionDeniedError, UnprocessableEntityError

from conftest import _TEMPLATE as TEMPLATE
from fake_script import Script
from letta_spec import assert_letta_shape
from stateloop.llm.base import ModelRequest
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import ScriptItem, reply
from test_server_callbacks import Receiver, receiver  # noqa: F401 (fixture)
from test_server_support import Server, new_agent, script, settings_for  # noqa: F401 (fixtures)

BATCHES = "/v1/messages/batches"
DIALECTS = ["sqlite", "postgresql"]


@pytest.fixture(scope="module")
def fake(script: Script) -> Iterator[FakeOpenAI]:
    """The fake model; while a test clears ``release``, each reply pauses after its first
    chunk (many may be in flight at once)."""
    with FakeOpenAI(script, chunk_size=4, hold_after=1) as server:
        server.release.set()
        yield server


@contextmanager
def holding(fake: FakeOpenAI) -> Iterator[None]:
    fake.release.clear()
    try:
        yield
    finally:
        fake.release.set()


def database(request: pytest.FixtureRequest, dialect: str, folder: Path) -> dict[str, Any]:
    """Settings naming a new database of ``dialect``: a SQLite file in ``folder``, or a copy
    of the session's migrated PostgreSQL database."""
    if dialect == "sqlite":
        return {"database_url": f"sqlite:///{folder / 'stateloop.db'}"}
    pg = request.getfixturevalue("pg_server")
    name = f"batches_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
    return {"database_url": str(pg.get_uri(name))}


@pytest.fixture(scope="module", params=DIALECTS)
def served(request: pytest.FixtureRequest, fake: FakeOpenAI,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("batches")
    with Server(settings_for(fake, folder / "unused.db", batch_concurrency=2,
                             batch_max_requests=6, callback_private_urls=True,
                             **database(request, request.param, folder))) as up:
        yield up


@pytest.fixture
def client(served: Server, script: Script) -> Letta:
    script.set()
    return Letta(base_url=served.url, api_key="unused", max_retries=0, timeout=30)


def create(client: Letta, requests: list[dict[str, Any]], **extra: Any) -> Any:
    return client.post(BATCHES, cast_to=object, body={"requests": requests, **extra})


def retrieve(client: Letta, batch_id: str) -> Any:
    return client.get(f"{BATCHES}/{batch_id}", cast_to=object)


def echo(request: ModelRequest) -> ScriptItem:
    """The model's answer to whichever request reaches it first: its input, echoed."""
    return reply(f"re: {request.messages[-1].text}")


def until(check: Callable[[], Any], what: str, limit: float = 30.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def ended(client: Letta, batch_id: str) -> Any:
    return until(lambda: (lambda b: b if b["status"] != "running" else None)(
        retrieve(client, batch_id)), f"batch {batch_id} ends")


def runs_of(client: Letta, agent_id: str) -> list[Any]:
    return list(client.runs.list(agent_id=agent_id, limit=100))


def test_a_batch_runs_each_request_and_lists_what_came_of_it(client: Letta,
                                                             script: Script) -> None:
    agents = [new_agent(client).id for _ in range(3)]
    script.set(*[echo] * 3)
    batch = create(client, [
        {"agent_id": agents[0], "input": "hello"},
        {"agent_id": agents[1], "messages": [{"role": "user", "content": "hi there"}],
         "max_steps": 3},
        {"agent_id": agents[2], "messages": [{"role": "user", "content": [
            {"type": "text", "text": "good day"}]}]}])
    assert_letta_shape(BATCHES, "post", batch)
    assert batch["status"] == "running" and batch["job_type"] == "batch"
    done = ended(client, batch["id"])
    assert_letta_shape(BATCHES + "/{batch_id}", "get", done)
    assert done["status"] == "completed" and done["completed_at"] is not None
    results = done["metadata"]["requests"]
    assert [r["agent_id"] for r in results] == agents
    assert [(r["status"], r["stop_reason"], r["error"]) for r in results] == [
        ("completed", "end_turn", None)] * 3
    for agent_id, result in zip(agents, results, strict=True):
        (run,) = runs_of(client, agent_id)  # an ordinary run of the agent, one each
        assert run.id == result["run_id"] and run.status == "completed"
        assert run.metadata["batch_id"] == batch["id"]
    assert sorted(r.messages[-1].text for r in script.requests) == [
        "good day", "hello", "hi there"]

    listed = client.get(f"{BATCHES}/{batch['id']}/messages", cast_to=object,
                        options={"params": {"order": "asc"}})
    assert_letta_shape(BATCHES + "/{batch_id}/messages", "get", listed)
    texts = {(m["agent_id"], m["role"], m["content"][0]["text"]) for m in listed["messages"]}
    assert {(agents[0], "user", "hello"), (agents[0], "assistant", "re: hello")} <= texts
    assert len(listed["messages"]) == 6
    assert {m["run_id"] for m in listed["messages"]} == {r["run_id"] for r in results}
    mine = client.get(f"{BATCHES}/{batch['id']}/messages", cast_to=object,
                      options={"params": {"agent_id": agents[1], "order": "asc"}})
    assert [(m["role"], m["content"][0]["text"]) for m in mine["messages"]] == [
        ("user", "hi there"), ("assistant", "re: hi there")]
    first = client.get(f"{BATCHES}/{batch['id']}/messages", cast_to=object,
                       options={"params": {"limit": 2}})
    after = client.get(f"{BATCHES}/{batch['id']}/messages", cast_to=object,
                       options={"params": {"limit": 10, "after": first["messages"][1]["id"]}})
    assert [m["id"] for m in first["messages"] + after["messages"]] == [
        m["id"] for m in reversed(listed["messages"])]


def test_a_batch_runs_a_bounded_number_at_a_time_and_is_listed_while_it_runs(
        client: Letta, script: Script, fake: FakeOpenAI) -> None:
    agents = [new_agent(client).id for _ in range(5)]
    script.set(*[reply("done") for _ in range(5)])
    with holding(fake):
        batch = create(client, [{"agent_id": a, "input": "work"} for a in agents])
        until(lambda: len(script.requests) == 2, "two requests reach the model")
        time.sleep(0.5)  # room for a third, were the bound not kept
        assert len(script.requests) == 2
        statuses = [r["status"] for r in retrieve(client, batch["id"])["metadata"]["requests"]]
        assert sorted(statuses) == ["pending"] * 3 + ["running"] * 2
        listed = client.get(BATCHES, cast_to=object)
        assert_letta_shape(BATCHES, "get", listed)
        assert batch["id"] in [b["id"] for b in listed]
        other = create(client, [{"agent_id": agents[0], "input": "more"}])
        first = client.get(BATCHES, cast_to=object, options={"params": {
            "limit": 1, "order": "asc"}})
        rest = client.get(BATCHES, cast_to=object, options={"params": {
            "after": first[0]["id"], "order": "asc"}})
        assert [b["id"] for b in first + rest][-2:] == [batch["id"], other["id"]]
        newest = client.get(BATCHES, cast_to=object, options={"params": {"limit": 1}})
        assert [b["id"] for b in newest] == [other["id"]]
    done = ended(client, batch["id"])
    assert [r["status"] for r in done["metadata"]["requests"]] == ["completed"] * 5
    ended(client, other["id"])
    assert len(script.requests) == 6
    assert batch["id"] not in [b["id"] for b in client.get(BATCHES, cast_to=object)]


def test_a_cancelled_batch_stops_its_runs_and_starts_no_more(
        client: Letta, script: Script, fake: FakeOpenAI) -> None:
    agents = [new_agent(client).id for _ in range(4)]
    script.set(*[reply("late") for _ in range(4)])
    with holding(fake):
        batch = create(client, [{"agent_id": a, "input": "work"} for a in agents])
        until(lambda: len(script.requests) == 2, "two requests reach the model")
        cancelled = client.patch(f"{BATCHES}/{batch['id']}/cancel", cast_to=object)
        assert cancelled["status"] == "cancelled"
        done = until(lambda: (lambda b: b if all(
            r["status"] != "running" for r in b["metadata"]["requests"]) else None)(
            retrieve(client, batch["id"])), "the running requests end")
    results = done["metadata"]["requests"]
    assert done["status"] == "cancelled"
    assert [r["status"] for r in results] == ["cancelled"] * 4
    started = [r for r in results if r["run_id"] is not None]
    assert len(started) == 2
    for result in started:  # cancelled as a run cancel cancels it
        run = client.runs.retrieve(result["run_id"])
        assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    time.sleep(0.5)
    assert len(script.requests) == 2  # the two not started never started
    for result in results:
        if result["run_id"] is None:
            assert runs_of(client, result["agent_id"]) == []
    again = client.patch(f"{BATCHES}/{batch['id']}/cancel", cast_to=object)
    assert again["status"] == "cancelled"


def test_bad_batches_are_refused_naming_the_problem_before_anything_runs(
        client: Letta, script: Script) -> None:
    agent = new_agent(client).id
    before = client.get(BATCHES, cast_to=object)
    with pytest.raises(UnprocessableEntityError):
        create(client, [])
    with pytest.raises(NotFoundError) as unknown:
        create(client, [{"agent_id": agent, "input": "hi"},
                        {"agent_id": "agent-00000000-0000-4000-8000-000000000000",
                         "input": "hi"}])
    assert "requests[1]" in str(unknown.value.body)
    with pytest.raises(UnprocessableEntityError) as many:
        create(client, [{"agent_id": agent, "input": "hi"}] * 7)
    assert "at most 6 requests" in str(many.value.body)
    with pytest.raises(UnprocessableEntityError) as empty:
        create(client, [{"agent_id": agent}])
    assert empty.value.body["detail"][0]["loc"] == ["body", "requests", "0"]
    with pytest.raises(UnprocessableEntityError) as large:
        create(client, [{"agent_id": agent, "input": "x" * (1024 * 1024 + 1)}])
    assert "bytes" in str(large.value.body)
    with pytest.raises(UnprocessableEntityError):
        create(client, [{"agent_id": agent, "input": "hi"}], callback_url="ftp://example.com")
    with pytest.raises(UnprocessableEntityError):  # each batch lists its requests
        client.get(BATCHES, cast_to=object, options={"params": {"limit": 101}})
    time.sleep(0.3)
    assert client.get(BATCHES, cast_to=object) == before
    assert runs_of(client, agent) == [] and script.requests == []
    for path in ("", "/messages"):
        with pytest.raises(NotFoundError):
            client.get(f"{BATCHES}/job-00000000-0000-4000-8000-000000000000{path}",
                       cast_to=object)
    with pytest.raises(NotFoundError):
        client.patch(f"{BATCHES}/job-00000000-0000-4000-8000-000000000000/cancel",
                     cast_to=object)


def test_a_request_its_agent_refuses_fails_alone(client: Letta, script: Script) -> None:
    agents = [new_agent(client).id for _ in range(2)]
    script.set(reply("fine"))
    batch = create(client, [
        {"agent_id": agents[0], "messages": [{"type": "approval", "approvals": [
            {"type": "approval", "tool_call_id": "call-x", "approve": True}]}]},
        {"agent_id": agents[1], "input": "hello"}])
    done = ended(client, batch["id"])
    refused, fine = done["metadata"]["requests"]
    assert refused["status"] == "failed" and refused["run_id"] is None
    assert refused["error"]
    assert (fine["status"], fine["stop_reason"]) == ("completed", "end_turn")
    assert done["status"] == "completed"


def test_the_callback_hears_that_the_batch_completed(client: Letta, script: Script,
                                                     receiver: Receiver) -> None:
    agent = new_agent(client).id
    script.set(reply("ok"))
    receiver.posts.clear()
    batch = create(client, [{"agent_id": agent, "input": "hi"}],
                   callback_url=f"{receiver.url}/ok")
    done = until(lambda: (lambda b: b if b["callback_sent_at"] else None)(
        retrieve(client, batch["id"])), "the callback is recorded")
    assert done["callback_status_code"] == 200 and done["callback_error"] is None
    assert done["callback_url"] == f"{receiver.url}/ok"
    ((path, payload),) = receiver.posts
    assert path == "/ok"
    assert payload == {"job_id": batch["id"], "status": "completed",
                       "completed_at": done["completed_at"]}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_batch_survives_a_restart_and_each_request_runs_once(
        request: pytest.FixtureRequest, dialect: str, fake: FakeOpenAI, script: Script,
        tmp_path: Path) -> None:
    """A server stopped with one request of a batch in flight and two not started: the next
    server on the database ends the first as its run ended (stopped with the server) and
    runs the other two, once each."""
    settings = settings_for(fake, tmp_path / "unused.db", batch_concurrency=1,
                            **database(request, dialect, tmp_path))
    script.set(*[echo] * 3)
    with holding(fake), Server(settings) as first:
        client = Letta(base_url=first.url, api_key="unused", max_retries=0, timeout=30)
        agents = [new_agent(client).id for _ in range(3)]
        batch = create(client, [{"agent_id": a, "input": f"job {i}"}
                                for i, a in enumerate(agents)])
        until(lambda: len(script.requests) == 1, "the first request reaches the model")
    with Server(settings) as second:
        client = Letta(base_url=second.url, api_key="unused", max_retries=0, timeout=30)
        done = ended(client, batch["id"])
        results = done["metadata"]["requests"]
        assert done["status"] == "completed"
        assert results[0]["status"] in ("cancelled", "failed")
        assert [r["status"] for r in results[1:]] == ["completed", "completed"]
        for agent_id, result in zip(agents, results, strict=True):
            (run,) = runs_of(client, agent_id)
            assert run.id == result["run_id"]
            assert run.metadata["batch_request_id"]
        assert sorted(r.messages[-1].text for r in script.requests) == [
            "job 0", "job 1", "job 2"]
        listed = client.get(f"{BATCHES}/{batch['id']}/messages", cast_to=object,
                            options={"params": {"agent_id": agents[2], "order": "asc"}})
        assert [m["content"][0]["text"] for m in listed["messages"]] == ["job 2", "re: job 2"]


def test_a_batch_is_a_job_retrieved_cancelled_and_deleted_at_v1_jobs(
        client: Letta, script: Script, fake: FakeOpenAI) -> None:
    agents = [new_agent(client).id for _ in range(3)]
    script.set(*[echo] * 3)
    with holding(fake):
        batch = create(client, [{"agent_id": a, "input": "work"} for a in agents])
        until(lambda: len(script.requests) == 2, "two requests reach the model")
        job = client.get(f"/v1/jobs/{batch['id']}", cast_to=object)
        assert_letta_shape("/v1/jobs/{job_id}", "get", job)
        assert (job["id"], job["job_type"], job["status"]) == (batch["id"], "batch", "running")
        assert client.get("/v1/jobs", cast_to=object) == []  # Letta lists jobs of type job
        cancelled = client.patch(f"/v1/jobs/{batch['id']}/cancel", cast_to=object)
        assert_letta_shape("/v1/jobs/{job_id}/cancel", "patch", cancelled)
        assert cancelled["status"] == "cancelled"
        until(lambda: all(r["status"] == "cancelled" for r in retrieve(
            client, batch["id"])["metadata"]["requests"]), "its runs are cancelled")
    deleted = client.delete(f"/v1/jobs/{batch['id']}", cast_to=object)
    assert deleted["id"] == batch["id"]
    for path in (f"/v1/jobs/{batch['id']}", f"{BATCHES}/{batch['id']}"):
        with pytest.raises(NotFoundError):
            client.get(path, cast_to=object)
    started = [run for a in agents for run in runs_of(client, a)]
    assert len(started) == 2  # the runs it started are kept


def test_a_request_queued_behind_its_agents_run_is_cancelled_as_it_starts(
        client: Letta, script: Script, fake: FakeOpenAI) -> None:
    agent = new_agent(client).id
    script.set(*[echo] * 2)
    with holding(fake):
        first = client.agents.messages.create_async(agent, input="before the batch")
        until(lambda: len(script.requests) == 1, "the agent's own run reaches the model")
        batch = create(client, [{"agent_id": agent, "input": "queued"}])
        until(lambda: retrieve(client, batch["id"])["metadata"]["requests"][0]["status"]
              == "running", "the request is claimed, its run queued behind the first")
        client.patch(f"{BATCHES}/{batch['id']}/cancel", cast_to=object)
        time.sleep(0.3)  # the runner has marked it
    (result,) = until(lambda: (lambda rs: rs if rs[0]["status"] != "running" else None)(
        retrieve(client, batch["id"])["metadata"]["requests"]), "the request ends")
    assert result["status"] == "cancelled" and result["run_id"] is not None
    run = client.runs.retrieve(result["run_id"])
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    assert client.runs.retrieve(first.id).status == "completed"  # the agent's own run


PASSWORD = "batches-password"


@pytest.fixture(scope="module", params=DIALECTS)
def guarded(request: pytest.FixtureRequest, fake: FakeOpenAI,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("projects")
    with Server(settings_for(fake, folder / "unused.db", server_password=PASSWORD,
                             **database(request, request.param, folder))) as up:
        yield up


def test_a_batch_belongs_to_the_project_that_made_it(guarded: Server, script: Script,
                                                     fake: FakeOpenAI) -> None:
    def letta(key: str, **project: str) -> Letta:
        return Letta(base_url=guarded.url, api_key=key, max_retries=0, timeout=30, **project)

    script.set()
    admin = letta(PASSWORD)
    keys = {name: admin.post("/v1/api-keys", cast_to=object, body={
        "name": name, "project": project, "role": role})["key"]
        for name, project, role in (("alpha", "alpha", "write"), ("reader", "alpha", "read"),
                                    ("beta", "beta", "write"))}
    alpha, reader, beta = letta(keys["alpha"]), letta(keys["reader"]), letta(keys["beta"])
    ours, theirs = new_agent(alpha).id, new_agent(beta).id
    never = ours[:-12] + "0" * 12

    # naming another project's agent is naming an unknown one: 404, nothing stored or run
    with httpx.Client(base_url=guarded.url, timeout=30,
                      headers={"Authorization": f"Bearer {keys['beta']}"}) as http:
        answers = [http.post(BATCHES, json={"requests": [
            {"agent_id": theirs, "input": "x"}, {"agent_id": named, "input": "x"}]})
            for named in (ours, never)]
    assert [a.status_code for a in answers] == [404, 404]
    assert "requests[1]" in answers[0].text
    assert answers[0].text.replace(ours, "X") == answers[1].text.replace(never, "X")
    with pytest.raises(PermissionDeniedError):  # a read key creates none
        create(reader, [{"agent_id": ours, "input": "x"}])
    assert admin.get(BATCHES, cast_to=object) == [] and script.requests == []

    script.set(reply("done"))
    with holding(fake):
        batch = create(alpha, [{"agent_id": ours, "input": "work"}])
        until(lambda: len(script.requests) == 1, "the request reaches the model")
        listed = {name: [b["id"] for b in who.get(BATCHES, cast_to=object)] for name, who in (
            ("alpha", alpha), ("reader", reader), ("beta", beta), ("admin", admin),
            ("admin in beta", letta(PASSWORD, project_id="beta")),
            ("admin in alpha", letta(PASSWORD, project="alpha")))}
        assert listed == {"alpha": [batch["id"]], "reader": [batch["id"]], "beta": [],
                          "admin": [batch["id"]], "admin in beta": [],
                          "admin in alpha": [batch["id"]]}
        assert retrieve(reader, batch["id"])["status"] == "running"
        with pytest.raises(PermissionDeniedError):  # nor cancels one
            reader.patch(f"{BATCHES}/{batch['id']}/cancel", cast_to=object)

        # another project's batch, by either of its names, is one that never was
        with httpx.Client(base_url=guarded.url, timeout=30,
                          headers={"Authorization": f"Bearer {keys['beta']}"}) as http:
            for method, path in (("GET", BATCHES + "/{}"), ("GET", BATCHES + "/{}/messages"),
                                 ("PATCH", BATCHES + "/{}/cancel"), ("GET", "/v1/jobs/{}"),
                                 ("PATCH", "/v1/jobs/{}/cancel"), ("DELETE", "/v1/jobs/{}")):
                known = batch["id"]
                unknown = known[:-12] + "0" * 12
                theirs_answer = http.request(method, path.format(known))
                none_answer = http.request(method, path.format(unknown))
                assert theirs_answer.status_code == 404, (method, path, theirs_answer.text)
                assert theirs_answer.text.replace(known, "X") == none_answer.text.replace(
                    unknown, "X"), (method, path)

        # a client-side token, even for the batch's own agent, reaches no batch route
        token = alpha.access_tokens.create(hostname="https://app.example", policy=[
            {"type": "agent", "id": ours, "access": ["read_messages", "write_messages",
                                                     "read_agent", "write_agent"]}])
        with httpx.Client(base_url=guarded.url, timeout=30,
                          headers={"Authorization": f"Bearer {token.token}"}) as http:
            for method, path in (("GET", BATCHES), ("GET", f"{BATCHES}/{batch['id']}"),
                                 ("PATCH", f"{BATCHES}/{batch['id']}/cancel"),
                                 ("GET", f"/v1/jobs/{batch['id']}")):
                assert http.request(method, path).status_code == 403, (method, path)
            assert http.post(BATCHES, json={"requests": [
                {"agent_id": ours, "input": "x"}]}).status_code == 403
    done = ended(alpha, batch["id"])
    assert done["status"] == "completed"  # none of the refused cancels reached it
    assert len(alpha.get(f"{BATCHES}/{batch['id']}/messages", cast_to=object)["messages"]) == 2
    assert len(script.requests) == 1  # the refused batches ran nothing
