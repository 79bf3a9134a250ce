"""Scale: a store seeded in bulk with N agents and M messages, then served by
``stateloop serve`` and timed through letta-client, on SQLite and on PostgreSQL.

Seeding writes rows straight through the store's connection (not the HTTP API): agents
cloned from one made by the library (its blocks, tags and system message each, and one
finished run each), M messages (a tenth of them in one agent's long history, the rest
spread evenly), the recall index brought up to date; on PostgreSQL, messages written many
to a statement and the database vacuumed and analysed after, as autovacuum leaves it. Then
the server is started on the database and each operation is timed ``--samples`` times with
letta-client over one connection: a page of agents (as letta-client asks: no relationships;
and with every relationship, as callers before 1.x get it), of blocks and of runs at the
start, middle and end of each table, one agent, a page of the long history at its newest
end and in its middle, a send to a cold agent (not yet loaded: a new one each time) and to
a warm one, and a search over every message. Last, ``--messaged`` distinct agents are sent
a message each and the server's RSS is read (the live agents it keeps are bounded by
``STATELOOP_LIVE_AGENTS``). The model is ``demo/echo`` (no provider), so a send times the
server's own work. Prints a Markdown table: p50 and p95 in ms, the server's start time and
RSS, and the size of the database per table.

    python bench/scale.py                                   # both stores, 2,000 / 20,000
    python bench/scale.py --stores sqlite --agents 100000 --messages 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from letta_client import Letta
from sqlalchemy import Connection, func, insert, select, text, update

from stateloop import Agent, Block
from stateloop.messages import assistant, user
from stateloop.store import open_store, rows, schema
from stateloop.store.dialect import catch_up_recall
from stateloop.store.records import RunRecord, new_record_id

MODEL = "demo/echo"
BATCH = 1000  # agents written per transaction
PG_ROWS = 2000  # messages a statement on PostgreSQL (its parameters stay under 65,535)
T0 = 1_700_000_000.0
WORDS = 997  # "topicN": each word is in about M / WORDS messages


@dataclasses.dataclass
class Seeded:
    agents: list[str]  # oldest first
    blocks: list[str]  # oldest first
    runs: list[str]  # oldest first
    deep: str  # the agent with the long history
    deep_messages: list[str]  # its message ids, oldest first
    seconds: float
    sizes: dict[str, int]  # bytes on disk per table (indexes included)


def rss_mb(pid: int) -> tuple[float, float]:
    """A process's resident memory now and at its peak, in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def seed(url: str, agents: int, messages: int) -> Seeded:
    """``agents`` agents and ``messages`` messages, written in bulk."""
    started = time.perf_counter()
    store = await open_store(url)
    try:
        template = await Agent.acreate(
            MODEL, store=store, name="scale-template",
            blocks=[Block(label="human", value="The user's name is not known yet."),
                    Block(label="persona", value="A helpful assistant. " * 8)])
        record = await store.get_agent(template.id)
        blocks = await store.list_blocks(template.id)
        first = template.messages[0]
        deep_count = messages // 10
        each = (messages - deep_count) // max(agents - 1, 1)
        ids = [template.id]
        block_ids = [b.id for b in blocks]
        run_ids: list[str] = []
        deep, deep_ids = "", []
        number = 0
        for start in range(1, agents, BATCH):
            agent_rows, block_rows, links, tags, message_rows = [], [], [], [], []
            run_rows = []
            for n in range(start, min(start + BATCH, agents)):
                at = T0 + n
                agent_id = new_record_id("agent")
                prompt = dataclasses.replace(first, id=new_record_id("message"), created_at=at)
                agent_rows.append(rows.agent_values(dataclasses.replace(
                    record, id=agent_id, name=f"scale-{n}", created_at=at, updated_at=at,
                    in_context_message_ids=[prompt.id])))
                for position, block in enumerate(blocks):
                    block_id = new_record_id("block")
                    block_rows.append(rows.block_values(dataclasses.replace(
                        block, id=block_id, created_at=at, updated_at=at)))
                    links.append({"agent_id": agent_id, "block_id": block_id,
                                  "label": block.label, "position": position})
                    block_ids.append(block_id)
                run = RunRecord(agent_id, status="completed", stop_reason="end_turn",
                                created_at=at, completed_at=at + 1)
                run_rows.append(rows.run_values(run))
                run_ids.append(run.id)
                tags += [{"agent_id": agent_id, "tag": "scale"},
                         {"agent_id": agent_id, "tag": f"cohort-{n % 100}"}]
                history = [prompt]
                for k in range(deep_count if n == 1 else each):
                    number += 1
                    said = (user(f"question {number} about topic{number % WORDS}") if k % 2 == 0
                            else assistant(f"answer {number}: topic{number % WORDS} noted"))
                    said.created_at, said.token_count = at + k / 1e6, 12
                    history.append(said)
                if n == 1:
                    deep, deep_ids = agent_id, [m.id for m in history]
                message_rows += [rows.message_row(agent_id, m, None, None) for m in history]
                ids.append(agent_id)
            batch = (agent_rows, block_rows, links, tags, message_rows, run_rows)
            await store._runner.write(lambda conn, batch=batch: _insert(conn, *batch))
        # The long history's context holds its system message only, as after compaction.
        await store.set_in_context(deep, deep_ids[:1])
        await store._runner.write(lambda conn: catch_up_recall(conn))
        sizes = await store._runner.read(_sizes)
    finally:
        await store.close()
    return Seeded(ids, block_ids, run_ids, deep, deep_ids, time.perf_counter() - started,
                  sizes)


def _insert(conn: Connection, agent_rows: list[dict[str, Any]],
            block_rows: list[dict[str, Any]], links: list[dict[str, Any]],
            tags: list[dict[str, Any]], message_rows: list[tuple[Any, ...]],
            run_rows: list[dict[str, Any]]) -> None:
    conn.execute(insert(schema.agents), agent_rows)
    conn.execute(insert(schema.runs), run_rows)
    conn.execute(insert(schema.blocks), block_rows)
    conn.execute(insert(schema.blocks_agents), links)
    conn.execute(insert(schema.agent_tags), tags)
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    columns = rows.MESSAGE_COLUMNS
    head = f"INSERT INTO messages ({', '.join(columns)}) VALUES "
    row = f"({', '.join([mark] * len(columns))})"
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    if conn.dialect.name == "sqlite":  # JSON is encoded already: rows go as they are
        cursor.executemany(head + row, message_rows)
    else:  # many rows a statement: PostgreSQL's count trigger then moves each agent once
        for at in range(0, len(message_rows), PG_ROWS):
            chunk = message_rows[at:at + PG_ROWS]
            cursor.execute(head + ", ".join([row] * len(chunk)),
                           [value for values in chunk for value in values])
    # Each agent's context: its system message, then what it stored after it.
    ids = [row["id"] for row in agent_rows]
    a, m = schema.agents, schema.messages
    first = select(func.min(m.c.seq)).where(m.c.agent_id == a.c.id).scalar_subquery()
    conn.execute(update(a).where(a.c.id.in_(ids)).values(in_context_after_seq=first))


def _sizes(conn: Connection) -> dict[str, int]:
    """Bytes per table, its indexes (and SQLite's recall index) counted with it."""
    if conn.dialect.name == "sqlite":
        found: dict[str, int] = {}
        owner = dict(conn.execute(text("SELECT name, tbl_name FROM sqlite_master")).all())
        for name, size in conn.execute(text(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name")).all():
            table = owner.get(name, name)
            table = "messages" if table.startswith("messages_fts") else table
            found[table] = found.get(table, 0) + int(size)
        return found
    return {name: int(size) for name, size in conn.execute(text(
        "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
        "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"))}


@contextmanager
def serving(url: str, workdir: Path) -> Iterator[tuple[str, int, float]]:
    """``stateloop serve`` on the database: its address, pid and start time (spawn to the
    first answer of /v1/health)."""
    port = free_port()
    log = (workdir / f"serve-{port}.log").open("w")
    env = {**os.environ, "STATELOOP_DATABASE_URL": url}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "stateloop", "serve", "--port", str(port),
                                "--model", MODEL], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: see {log.name}")
            try:
                if httpx.get(f"{base}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        yield base, process.pid, time.perf_counter() - started
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def timed(samples: int, call: Callable[[int], object]) -> tuple[float, float]:
    """p50 and p95 of ``call(i)`` in ms, after one call that warms it up."""
    call(samples)
    took = []
    for i in range(samples):
        began = time.perf_counter()
        call(i)
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, round(0.95 * (len(took) - 1)))]


def measure(base: str, seeded: Seeded, samples: int) -> dict[str, tuple[float, float]]:
    """Each operation's p50 and p95 over ``samples`` calls."""
    client = Letta(base_url=base, timeout=120)
    agents, history = seeded.agents, seeded.deep_messages
    rng = random.Random(7)
    picked = rng.sample(agents[2:], min(len(agents) - 2, 3 * samples + 3))
    cold = iter(picked[samples + 1:])
    warm = picked[-1]
    say = [{"role": "user", "content": "hello there"}]
    answer = client.agents.messages.create(warm, messages=say)
    assert any(m.message_type == "assistant_message" for m in answer.messages), answer

    def page(after: str | None, **options: Any) -> Callable[[int], object]:
        return lambda i: client.agents.list(limit=50, after=after, **options).items

    def ends(name: str, listed: Callable[..., Any], ids: list[str]
             ) -> dict[str, tuple[float, float]]:
        """A page of 50 at the start, the middle and the end of a list, oldest first."""
        return {f"list {name}, {where} (50)": timed(
                    samples, lambda i, after=after: listed(limit=50, order="asc",
                                                           after=after).items)
                for where, after in (("first page", None), ("middle page", ids[len(ids) // 2]),
                                     ("last page", ids[max(len(ids) - 51, 0)]))}

    every = ["agent.blocks", "agent.identities", "agent.managed_group",
             "agent.pending_approval", "agent.secrets", "agent.sources", "agent.tags",
             "agent.tools"]
    results = {
        "list agents, first page (50)": timed(samples, page(None)),
        "list agents, first page, unparsed": timed(
            samples, lambda i: client.agents.with_raw_response.list(limit=50).http_response),
        "list agents, middle page": timed(samples, page(agents[len(agents) // 2])),
        "list agents, last page": timed(samples, page(agents[min(50, len(agents) - 1)])),
        "list agents, first page, every relationship": timed(
            samples, page(None, include=every)),
        "list agents, first page, every relationship, unparsed": timed(
            samples, lambda i: client.agents.with_raw_response.list(
                limit=50, include=every).http_response),
        **ends("blocks", client.blocks.list, seeded.blocks),
        **ends("runs", client.runs.list, seeded.runs),
        "get one agent": timed(samples, lambda i: client.agents.retrieve(picked[i])),
        "list an agent's messages, newest page (50)": timed(
            samples, lambda i: client.agents.messages.list(seeded.deep, limit=50).items),
        "list an agent's messages, middle page": timed(
            samples, lambda i: client.agents.messages.list(
                seeded.deep, limit=50, before=history[len(history) // 2]).items),
        "send a message, cold agent": timed(
            samples, lambda i: client.agents.messages.create(next(cold), messages=say)),
        "send a message, warm agent": timed(
            samples, lambda i: client.agents.messages.create(warm, messages=say)),
        "search every message (10 hits)": timed(
            samples, lambda i: client.messages.search(query=f"topic{rng.randrange(WORDS)}",
                                                      limit=10)),
    }
    client.close()
    return results


def message_many(base: str, seeded: Seeded, count: int) -> float:
    """Send one message to each of ``count`` distinct agents (four at a time, the newest
    agents, which ``measure`` did not pick first); the seconds it took."""
    client = Letta(base_url=base, timeout=120)
    say = [{"role": "user", "content": "hello again"}]
    chosen = seeded.agents[-count:]
    began = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        for answer in pool.map(lambda agent: client.agents.messages.create(
                agent, messages=say), chosen):
            assert answer.messages, answer
    client.close()
    return time.perf_counter() - began


@contextmanager
def postgresql(workdir: Path) -> Iterator[str]:
    """A throwaway PostgreSQL server (pgserver) and the URL of an empty database on it."""
    import pgserver

    folder = tempfile.mkdtemp(prefix="stateloop-scale-pg-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        server.psql("CREATE DATABASE scale")
        yield server.get_uri("scale")
    finally:
        server.cleanup()


def run(store: str, url: str, args: argparse.Namespace, workdir: Path) -> list[str]:
    with serving(f"sqlite:///{workdir / 'empty.db'}", workdir) as (_, _, empty_start):
        pass  # what starting costs before any data: imports, migrations
    seeded = asyncio.run(seed(url, args.agents, args.messages))
    if store == "postgresql":  # what autovacuum would have done by the time anyone asks
        _vacuum(url)
    with serving(url, workdir) as (base, pid, start):
        results = measure(base, seeded, args.samples)
        rss, peak = rss_mb(pid)
        messaged = min(args.messaged, len(seeded.agents) - 2)
        took = message_many(base, seeded, messaged) if messaged else 0.0
        after_rss, after_peak = rss_mb(pid)
    bound = os.environ.get("STATELOOP_LIVE_AGENTS", "1000 (the default)")
    total = sum(seeded.sizes.values())
    lines = [f"| **{store}**: {args.agents:,} agents, {args.messages:,} messages | p50 ms | "
             "p95 ms |", "|---|---|---|"]
    lines += [f"| {name} | {p50:.1f} | {p95:.1f} |" for name, (p50, p95) in results.items()]
    lines += [f"| server start (spawn to /v1/health) | {start * 1000:.0f} | |",
              f"| server start, empty SQLite database | {empty_start * 1000:.0f} | |",
              f"| server RSS after the run (peak) | {rss:.0f} MB ({peak:.0f} MB) | |",
              f"| server RSS after {messaged:,} distinct agents were sent a message each "
              f"({took:.0f} s; live agents at most {bound}) (peak) | "
              f"{after_rss:.0f} MB ({after_peak:.0f} MB) | |",
              f"| seeding (bulk, recall indexed) | {seeded.seconds:.0f} s | |",
              f"| database size | {total / 2**20:.0f} MB | |"]
    for table in ("agents", "blocks", "messages"):
        size = seeded.sizes.get(table, 0)
        count = args.messages if table == "messages" else args.agents * (
            2 if table == "blocks" else 1)
        lines.append(f"| {table}: table and indexes | {size / 2**20:.0f} MB "
                     f"({size / max(count, 1):.0f} B a row) | |")
    return lines


def _vacuum(url: str) -> None:
    """``VACUUM ANALYZE`` (outside a transaction, as it must run): the dead row versions
    seeding left reclaimed and the planner's statistics current, as autovacuum leaves them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--messaged", type=int, default=10_000,
                        help="distinct agents sent a message each before RSS is read")
    parser.add_argument("--stores", default="sqlite,postgresql")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stateloop-scale-") as folder:
        workdir = Path(folder)
        for store in args.stores.split(","):
            if store == "sqlite":
                lines = run(store, f"sqlite:///{workdir / 'scale.db'}", args, workdir)
            else:
                with postgresql(workdir) as url:
                    lines = run(store, url, args, workdir)
            print("\n".join(lines) + "\n", flush=True)


if __name__ == "__main__":
    main()
