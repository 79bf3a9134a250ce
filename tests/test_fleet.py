"""The fleet proof: three ``stateloop serve`` processes share one PostgreSQL and take 500
messages for 20 agents, each message through a process picked at random, while one process
is SIGKILLed mid-run (as its model hands out a tool call) and started again on its port.

Each agent first gets messages one after another (the next once the last was answered,
each to any process), then a burst: five sends, each to the next process, each once the one
before was taken (its process numbered it in ``fleet_tickets``: the order of arrival), whose
runs take long enough to be in flight together and queue across processes. A send whose
process died is sent again to another process only if its text is not stored yet, as a
client's idempotent retry would.
Afterwards the database must show: every message stored once, each agent's messages in the
order they arrived, every answer right after the message it answers, every tool call
answered by one result right after it, each agent's memory block holding exactly the edits
its stored steps made, the final context of each agent holding every message it took,
every run ended (those of the dead process within the dead-process bound), and every agent
still answering.
"""

from __future__ import annotations

import asyncio
import collections
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from patience import ANSWERS, STARTS, STOPS
from started import wait_until_healthy
from stateloop.llm.base import ModelRequest
from stateloop.messages import Message
from stateloop.store import open_store
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.invariants import transcript_problems
from stateloop.testing.scripted import ScriptItem, call, reply
from test_cli_support import base_env, console_script, free_port

AGENTS = 20
SEQUENTIAL = 20  # per agent: one after another, each to a process picked at random
BURST = 5  # per agent, then: in flight together, each to the next process
# A send's place in its agent's queue is taken as its process takes the request: the order
# is the order of intake, which trails the client's sends by the time a busy event loop
# takes to reach a request (over 1.2 s on a loaded machine). So a burst's next send waits
# for the ticket of the one before, and its answers are streamed slowly enough (chunks
# CHUNK_DELAY apart) to keep several of its runs in flight together.
BURST_REPLY = 3200  # characters of a burst answer: 400 chunks, about 2 s
CHUNK_DELAY = 0.005  # seconds between the chunks of a streamed answer
KILL_AFTER = 150  # answers before the victim is killed
LATENCY = 0.02  # seconds per model call, before its first chunk
TOOL_EVERY = 4  # message n of an agent with n % TOOL_EVERY == 1 makes the model edit memory
DEAD_BOUND = 10.0  # seconds: a dead process's runs end failed within this
TERMINAL = ("completed", "failed", "cancelled")
NAMED = re.compile(r"\b(m\d+-\d+|final-\d+)\b")  # the message a reply answers


def text_of(agent: int, n: int) -> str:
    return f"m{agent}-{n}"


class Model:
    """The script every process's fake provider plays: a memory edit for every TOOL_EVERY-th
    message and a burst's, then a reply naming the message it answers (a long one for a
    burst's). It records what each agent's final request held, and fires ``called`` when it
    hands out a tool call while ``armed``."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.called = threading.Event()
        self.finals: dict[str, list[str]] = {}  # "final-N" -> the user texts in its context
        self.runs: list[str] = []  # the messages whose runs called the model, in call order

    def play(self, *, watched: bool) -> Callable[[ModelRequest], ScriptItem]:
        def answer(request: ModelRequest) -> ScriptItem:
            said = [m.text for m in request.messages if m.role == "user"]
            current = said[-1] if said else ""
            if current.startswith("final-"):
                self.finals[current] = said
            if request.messages[-1].role == "user":
                self.runs.append(current)
            if not current.startswith("m"):
                return reply(f"ok {current}")
            n = int(current.rsplit("-", 1)[1])
            last = max(i for i, m in enumerate(request.messages) if m.role == "user")
            edits = sum(m.role == "tool" for m in request.messages[last:])
            if not edits and (n >= SEQUENTIAL or n % TOOL_EVERY == 1):
                if watched and self.armed.is_set():
                    self.called.set()
                return call("memory_insert", label="notes", new_string=current)
            slow = "." * BURST_REPLY if n >= SEQUENTIAL else ""
            return reply(f"{'noted' if edits else 'ok'} {current} {slow}")

        return answer


@dataclass
class Server:
    """One ``stateloop serve`` on a fixed loopback port, its output in ``log``."""

    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [*console_script(), "serve", "--port", str(self.port)], env=self.env,
                stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = STARTS) -> None:
        assert self.process is not None
        wait_until_healthy(self.url, self.process, self.log.read_text, timeout)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOPS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def fleet(pg_database: Callable[..., str], tmp_path: Path
          ) -> Iterator[tuple[str, list[Server], Model]]:
    """Three processes on one new database, each with its own fake provider (the first
    one's is watched for the moment to kill it); the database's URL, the servers, the model."""
    url = pg_database()
    model = Model()
    fakes = [FakeOpenAI(model.play(watched=i == 0), latency=LATENCY,
                        chunk_delay=CHUNK_DELAY).start() for i in range(3)]
    servers = []
    for i, fake in enumerate(fakes):
        env = base_env(tmp_path)
        env.update(STATELOOP_DATABASE_URL=url, OPENAI_BASE_URL=fake.base_url,
                   OPENAI_API_KEY="test-key")
        servers.append(Server(env, tmp_path / f"serve{i}.log"))
    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_ready()
        yield url, servers, model
    finally:
        for server in servers:
            server.stop()
        for fake in fakes:
            fake.stop()


@dataclass
class Traffic:
    """What the clients sent and saw."""

    urls: list[str]
    expected: dict[str, list[str]] = field(default_factory=dict)  # agent id -> arrival order
    answered: set[str] = field(default_factory=set)  # texts whose send was answered (200)
    resent: set[str] = field(default_factory=set)  # sent again: to another process, later
    restarted: asyncio.Event = field(default_factory=asyncio.Event)  # the victim is back
    problems: list[str] = field(default_factory=list)


async def stored(http: httpx.AsyncClient, traffic: Traffic, agent_id: str, text: str) -> bool:
    """Whether ``text`` is among the agent's messages, asked of any live process."""
    while True:
        url = random.choice(traffic.urls)
        try:
            page = await http.get(f"{url}/v1/agents/{agent_id}/messages",
                                  params={"limit": 1000, "order": "desc"})
        except httpx.TimeoutException:
            raise
        except httpx.TransportError:
            await asyncio.sleep(0.05)
            continue
        assert page.status_code == 200, page.text
        return any(m.get("message_type") == "user_message" and m.get("content") == text
                   for m in page.json())


async def send(http: httpx.AsyncClient, traffic: Traffic, agent_id: str, text: str,
               url: str | None = None) -> None:
    """Send ``text`` (to ``url``, else to any process) and wait for the answer; on a dead
    process, resend elsewhere unless it was stored before the process died."""
    avoid = None
    while True:
        url = url or random.choice([u for u in traffic.urls if u != avoid])
        try:
            response = await http.post(f"{url}/v1/agents/{agent_id}/messages",
                                       json={"input": text})
            break
        except httpx.TimeoutException:
            raise
        except httpx.TransportError:  # its process died
            if await stored(http, traffic, agent_id, text):
                return
            traffic.resent.add(text)
            url, avoid = None, url
    if response.status_code != 200:
        traffic.problems.append(f"{text}: {response.status_code} {response.text[:300]}")
        return
    body = response.json()
    said = [m.get("content") for m in body["messages"]
            if m.get("message_type") == "assistant_message"]
    if body["stop_reason"]["stop_reason"] != "end_turn" or not said or (
            NAMED.findall(said[-1]) != [text]):
        traffic.problems.append(f"{text}: answered {body['stop_reason']} {said}")
    traffic.answered.add(text)


class Intake:
    """The fleet's tickets (store/fleet.py): a send has arrived once its process numbered it."""

    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self._connection = connection
        self._lock = asyncio.Lock()  # one statement at a time on the connection

    async def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        async with self._lock:
            row = await (await self._connection.execute(sql, params)).fetchone()
        return row[0] if row else None

    async def last(self) -> int:
        """The newest ticket now (every later one is numbered higher)."""
        return int(await self._one("SELECT coalesce(max(ticket), 0) FROM fleet_tickets"))

    async def taken(self, agent_id: str, after: int) -> bool:
        """Whether a send to this agent was numbered after ``after``."""
        return bool(await self._one("SELECT 1 FROM fleet_tickets WHERE agent_id = %s AND "
                                    "ticket > %s LIMIT 1", (agent_id, after)))


async def burst(http: httpx.AsyncClient, traffic: Traffic, intake: Intake, agent_id: str,
                texts: list[str]) -> None:
    """Send ``texts``, each to the next process, without waiting for the answers: each once
    the one before has arrived (its ticket numbered, or it was answered); return once all
    are answered."""
    traffic.expected[agent_id] += texts
    first = random.randrange(len(traffic.urls))
    sends = []
    for i, text in enumerate(texts):
        after = await intake.last()
        url = traffic.urls[(first + i) % len(traffic.urls)]
        sending = asyncio.create_task(send(http, traffic, agent_id, text, url))
        sends.append(sending)
        deadline = time.monotonic() + ANSWERS
        while not (sending.done() or await intake.taken(agent_id, after)):
            assert time.monotonic() < deadline, f"{text} never arrived"
            await asyncio.sleep(0.05)
    await asyncio.gather(*sends)


async def client(http: httpx.AsyncClient, traffic: Traffic, intake: Intake, number: int,
                 agent_id: str, model: Model) -> None:
    """One agent's traffic: the sequential sends, then the burst. The first send after the
    victim's restart goes to it, as a load balancer hands a new process work (and so the
    burst never meets a process that has not loaded the agent yet)."""
    order = traffic.expected.setdefault(agent_id, [])
    welcomed = False
    for n in range(SEQUENTIAL):
        text = text_of(number, n)
        order.append(text)
        if n == SEQUENTIAL - 1:  # the last one waits for the restart
            await asyncio.wait_for(traffic.restarted.wait(), 120)
        url = None
        if traffic.restarted.is_set() and not welcomed:
            url, welcomed = traffic.urls[0], True
        await send(http, traffic, agent_id, text, url)
        if len(traffic.answered) >= KILL_AFTER:
            model.armed.set()
    await burst(http, traffic, intake, agent_id,
                [text_of(number, n) for n in range(SEQUENTIAL, SEQUENTIAL + BURST)])


@dataclass
class Kill:
    """When the victim died and how long its runs took to end."""

    at: float = 0.0
    in_flight: list[str] = field(default_factory=list)
    ended_after: float = -1.0


async def kill_and_restart(victim: Server, model: Model, url: str, kill: Kill,
                           restarted: asyncio.Event) -> None:
    """SIGKILL the victim just after its model hands out a tool call, while the call is
    being executed or stored; start it again a second later on the same port; time how long
    the runs in flight at the kill take to end."""
    async with await open_store(url, migrate=False) as store:
        deadline = time.monotonic() + 300
        while not model.armed.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        deadline = time.monotonic() + 5  # a tool call comes every few messages
        while not model.called.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        await asyncio.sleep(LATENCY + random.uniform(0, 0.08))  # streaming, running, storing
        victim.kill()
        kill.at = time.monotonic()
        for status in ("created", "running"):
            kill.in_flight += [r.id for r in await store.list_runs(status=status, limit=1000)]
        await asyncio.sleep(1.0)
        victim.start()
        ready = asyncio.create_task(asyncio.to_thread(victim.wait_ready))
        ready.add_done_callback(lambda _: restarted.set())
        waiting = set(kill.in_flight)
        while waiting and time.monotonic() - kill.at < DEAD_BOUND + 1:
            waiting = {i for i in waiting if (await store.get_run(i)).status not in TERMINAL}
            await asyncio.sleep(0.1)
        kill.ended_after = time.monotonic() - kill.at
        await ready


def named(message: Message) -> list[str]:
    """The messages an assistant message says it answers (or edits memory for)."""
    found = NAMED.findall(message.text or "")
    for tool_call in message.tool_calls:
        found += NAMED.findall(str(tool_call.arguments.get("new_string", "")))
    return found


def agent_problems(agent_id: str, messages: list[Message], block: str,
                   traffic: Traffic, final: list[str] | None, ran: list[str]) -> list[str]:
    """Everything wrong with one agent's stored transcript and memory."""
    problems = [f"{agent_id}: {p}" for p in transcript_problems(messages)]
    said = [m.text for m in messages if m.role == "user" and m.text.startswith("m")]
    sent = traffic.expected[agent_id]
    if [t for t in said if t not in traffic.resent] != [t for t in sent if t not in
                                                        traffic.resent]:
        problems.append(f"{agent_id}: stored {said}, sent {sent}, ran {ran}")
    current, edits = None, []
    for index, message in enumerate(messages):
        if message.role == "user":
            current = message.text
        elif message.role == "assistant" and any(n != current for n in named(message)):
            problems.append(f"{agent_id}: {named(message)} answered while {current} was "
                            "the last message")
        elif message.role == "tool" and not message.is_error and index > 0:
            edits += [str(c.arguments.get("new_string")) for c in messages[index - 1].tool_calls
                      if c.id == message.tool_call_id and c.name == "memory_insert"]
    if block.split("\n") != edits and not (block == "" and not edits):
        problems.append(f"{agent_id}: block holds {block.split(chr(10))}, steps made {edits}")
    taken = [t for t in traffic.expected[agent_id] if t in traffic.answered]
    if final is None:
        problems.append(f"{agent_id}: its final message never reached the model")
    elif [t for t in final if t in traffic.answered and t.startswith("m")] != taken:
        problems.append(f"{agent_id}: final context holds {final}, answered {taken}, "
                        f"ran {ran}")
    return problems


def test_three_processes_keep_every_message_once_in_order_through_a_sigkill(
        fleet: tuple[str, list[Server], Model]) -> None:
    url, servers, model = fleet
    traffic = Traffic([s.url for s in servers])
    kill = Kill()

    async def drive() -> list[str]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=60)
        async with (httpx.AsyncClient(timeout=ANSWERS, limits=limits) as http,
                    await psycopg.AsyncConnection.connect(url, autocommit=True) as tickets):
            intake = Intake(tickets)
            ids = []
            for number in range(AGENTS):
                made = await http.post(random.choice(traffic.urls) + "/v1/agents", json={
                    "name": f"a{number}", "model": "openai/gpt-4o-mini",
                    "memory_blocks": [{"label": "notes", "value": ""}]})
                assert made.status_code == 200, made.text
                ids.append(made.json()["id"])
            await asyncio.gather(
                kill_and_restart(servers[0], model, url, kill, traffic.restarted),
                *(client(http, traffic, intake, n, agent_id, model)
                  for n, agent_id in enumerate(ids)))
            # every agent still answers, through any process
            await asyncio.gather(*(send(http, traffic, agent_id, f"final-{n}")
                                   for n, agent_id in enumerate(ids)))
        return ids

    ids = asyncio.run(drive())
    problems = list(traffic.problems)
    if kill.ended_after > DEAD_BOUND:
        problems.append(f"the runs in flight at the kill ended after {kill.ended_after:.1f}s")

    async def check() -> None:
        async with await open_store(url, migrate=False) as store:
            deadline = time.monotonic() + DEAD_BOUND
            while True:  # every run ended (the last ones may be finishing their bookkeeping)
                open_runs = [r for s in ("created", "running")
                             for r in await store.list_runs(status=s, limit=1000)]
                if not open_runs or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            problems.extend(f"run {r.id} of {r.agent_id} left {r.status}" for r in open_runs)
            failed = await store.list_runs(status="failed", limit=1000)
            if not failed or not kill.in_flight:
                problems.append("no run was failed: the kill landed on no run in flight")
            counts: collections.Counter[str] = collections.Counter()
            for number, agent_id in enumerate(ids):
                messages = await store.list_messages(agent_id, limit=100_000)
                counts.update(m.text for m in messages if m.role == "user")
                block = (await store.get_agent_block(agent_id, "notes")).value
                ran = [t for t in model.runs if t.startswith(f"m{number}-")]
                problems.extend(agent_problems(agent_id, messages, block, traffic,
                                               model.finals.get(f"final-{number}"), ran))
            sent = [text_of(a, n) for a in range(AGENTS) for n in range(SEQUENTIAL + BURST)]
            problems.extend(f"{t} stored {counts[t]} times" for t in sent if counts[t] != 1)

    asyncio.run(check())
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
