"""What an attached folder costs a turn: an agent with a folder of six files (five open,
~10 KB each, in its system prompt) against the same agent without one, on a scripted model.

Two comparisons, interleaved round by round and compared by medians: a plain turn (one
reply: what open files cost when nothing changes them — the system prompt is recompiled only
when they change), and a turn whose first step opens a file (``open_files``: a store write,
the least-recently-used close, the prompt recompiled) against one whose first step calls a
trivial tool. Target: plain turns within 10% (ratio <= 1.10). Opening a file is reported
without a target: it reads and writes the store and recompiles (and counts) a ~45 KB prompt.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stateloop import Agent, tool
from stateloop.files import Folders, attach_folder
from stateloop.testing import ScriptedModel, call, reply

ROUNDS = 41


class TinyEmbedder:
    """Vectors from character counts: enough to store chunks, cheap to compute."""

    model, dim = "tiny-64", 64

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for ch in text[:2000]:
                out[row, ord(ch) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1)


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


QUEUES: dict[str, list] = {}


def scripted(name: str) -> ScriptedModel:
    """A model answering from ``QUEUES[name]``, which each timed turn fills."""
    queue = QUEUES.setdefault(name, [])
    return ScriptedModel(lambda request: queue.pop(0))


async def timed(agent: Agent, script: list) -> float:
    QUEUES[agent.name][:] = script
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.stop_reason == "end_turn", result
    return elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'bench.db'}"
        made = {}
        for name in ("plain", "reader"):
            made[name] = await Agent.acreate(scripted(name), store=db, name=name,
                                             tools=[noop], embedder=TinyEmbedder())
        plain, reader = made["plain"], made["reader"]
        folders = Folders(reader.store, TinyEmbedder())
        docs = await folders.create("docs")
        text = "".join(f"line {i}: the launch moved to Tuesday, says Ada.\n" for i in range(200))
        for n in range(6):
            await folders.upload(docs.id, f"f{n}.txt", text.encode())
        await attach_folder(reader, docs.id)
        assert reader.directories.count('status="open"') == 5
        quiet = {"plain": [], "reader": []}
        opening = {"plain": [], "reader": []}
        for n in range(ROUNDS):
            for name, agent in sorted(made.items(), reverse=n % 2 == 1):  # who goes first
                quiet[name].append(await timed(agent, [reply("ok")]))
            opening["plain"].append(await timed(plain, [call("noop"), reply("ok")]))
            opening["reader"].append(await timed(reader, [
                call("open_files", file_requests=[{"file_name": f"docs/f{n % 6}.txt"}]),
                reply("ok")]))

    def ratio(runs: dict[str, list[float]]) -> str:
        base, other = statistics.median(runs["plain"]), statistics.median(runs["reader"])
        return f"{other * 1000:.2f} ms vs {base * 1000:.2f} ms, ratio {other / base:.2f}"

    print(f"files: {ROUNDS} rounds, a folder of 6 files (~{len(text) // 1000} KB each, 5 open)")
    print(f"  plain turn, folder attached vs none: {ratio(quiet)} (target <= 1.10)")
    print(f"  turn opening a file vs a trivial tool: {ratio(opening)}")


if __name__ == "__main__":
    asyncio.run(main())
