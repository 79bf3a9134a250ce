"""Folders and files through the library: each kind of file parsed, chunked and embedded; bad
files refused with nothing stored; a folder attached to an agent whose file tools open, grep
and search it on the scripted model; open files in the next request, least recently used
closed first, counted by the context overview, kept through compaction and reload."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from file_support import BAD, GOOD, HashEmbedder
from stateloop import Agent, Block
from stateloop.files import FileRejected, Folders, Limits, attach_folder, detach_folder
from stateloop.memory.embeddings import MiniLMEmbedder
from stateloop.store import open_store
from stateloop.store.folders import FileRecord
from stateloop.store.sql import SqlStore
from stateloop.testing import ScriptedModel, call, reply


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await open_store(f"sqlite:///{tmp_path / 'files.db'}")
    yield s
    await s.close()


async def _agent(store: SqlStore, script: list, **options) -> Agent:
    return await Agent.acreate(ScriptedModel(script), store=store, name="reader",
                               system="You read files.", embedder=HashEmbedder(),
                               blocks=[Block(label="human", value="Ada")], **options)


async def test_each_kind_of_file_is_parsed_chunked_and_embedded(store: SqlStore) -> None:
    folders = Folders(store, HashEmbedder())
    docs = await folders.create("docs", description="team documents")
    for name, data in GOOD.items():
        file, skipped = await folders.upload(docs.id, name, data)
        assert not skipped
        assert (file.file_name, file.processing_status) == (f"docs/{name}", "completed")
        assert file.total_chunks == file.chunks_embedded >= 1
    stored = {f.original_file_name: f for f in await store.list_files(docs.id, content=True)}
    assert set(stored) == set(GOOD)
    assert "Churn fell in the north region" in (stored["report.pdf"].content or "")
    assert stored["report.pdf"].file_type == "application/pdf"
    assert stored["tool.py"].file_type == "text/x-python"
    hits = await folders.search([docs.id], "churn north region", limit=2)
    assert "Churn fell" in hits[0].chunk.text
    assert hits[0].chunk.file_id == stored["report.pdf"].id

    # duplicate names: a suffix by default, or skip, error, replace
    again, _ = await folders.upload(docs.id, "notes.txt", b"second notes")
    assert again.file_name == "docs/notes_(1).txt"
    kept, skipped = await folders.upload(docs.id, "guide.md", b"other", duplicates="skip")
    assert skipped and kept.id == stored["guide.md"].id
    with pytest.raises(FileRejected, match="already exists"):
        await folders.upload(docs.id, "guide.md", b"other", duplicates="error")
    new, _ = await folders.upload(docs.id, "guide.md", b"# Guide v2", duplicates="replace")
    names = [f.file_name for f in await store.list_files(docs.id)]
    assert names.count("docs/guide.md") == 1 and new.id != stored["guide.md"].id


@pytest.mark.parametrize("name", sorted(BAD))
async def test_a_bad_file_is_refused_by_name_and_nothing_is_stored(store: SqlStore,
                                                                   name: str) -> None:
    folders = Folders(store, HashEmbedder())
    docs = await folders.create("docs")
    data, words = BAD[name]
    with pytest.raises(FileRejected, match=words) as caught:
        await folders.upload(docs.id, name, data)
    assert name in str(caught.value)
    assert await store.list_files(docs.id) == []
    assert await store.list_chunks(docs.id) == []


async def test_the_agent_opens_greps_and_searches_its_files(store: SqlStore) -> None:
    script = [
        call("open_files", file_requests=[{"file_name": "docs/tool.py", "offset": 4,
                                           "length": 2}]),
        call("grep_files", pattern="tues", context_lines=1),
        call("semantic_search_files", query="churn north region", limit=1),
        reply("Done."),
    ]
    agent = await _agent(store, script)
    folders = Folders(store, agent.archival().embedder)
    docs = await folders.create("docs", instructions="Read before answering.")
    for name in ("notes.txt", "tool.py", "report.pdf"):
        await folders.upload(docs.id, name, GOOD[name])
    await attach_folder(agent, docs.id)
    assert {"open_files", "grep_files", "semantic_search_files"} <= set(agent.tools)
    system = agent.messages[0].text
    assert '<directory name="docs">' in system and "Read before answering." in system
    assert '<file status="open" name="docs/notes.txt">' in system  # attached files open

    result = await agent.run("What is in the files?")
    assert result.stop_reason == "end_turn"
    opened, grepped, searched = [m.text for m in result.messages if m.role == "tool"]
    assert opened == "* Opened docs/tool.py (lines 5-6)"
    assert "Found 2 total matches across 2 files" in grepped
    assert "=== docs/notes.txt:1 ===\n> 1: The launch moved to Tuesday.\n  2: Ada" in grepped
    assert "> 6:     return 'Tuesday'" in grepped
    assert "docs/report.pdf (passage #1)" in searched and "Churn fell" in searched

    # the request after open_files shows the window it asked for
    model = agent.model
    assert isinstance(model, ScriptedModel)
    after_open = model.requests[1].messages[0].text
    assert "[Viewing lines 5 to 6 (out of 6 lines)]\n5: def launch_day():" in after_open
    assert "1: def add(a, b):" not in after_open
    assert "1: def add(a, b):" in model.requests[0].messages[0].text

    # the overview counts open files with core memory
    overview = agent.context_overview()
    assert "5: def launch_day():" in overview.core_memory

    # a reload shows the same open files
    again = await Agent.aload(agent.id, store=store, model=ScriptedModel([reply("ok")]),
                              embedder=HashEmbedder())
    assert "5: def launch_day():" in again.messages[0].text

    await detach_folder(agent, docs.id)
    assert "<directories>" not in agent.messages[0].text
    assert "open_files" not in agent.tools


async def test_least_recently_used_files_close_past_the_cap(store: SqlStore) -> None:
    agent = await _agent(store, [
        call("open_files", file_requests=[{"file_name": "docs/f0.txt"}]),
        call("open_files", file_requests=[{"file_name": "docs/f5.txt"},
                                          {"file_name": "docs/f6.txt"}],
             close_all_others=True),
        reply("ok")])
    folders = Folders(store, HashEmbedder())
    docs = await folders.create("docs")
    for number in range(6):
        await folders.upload(docs.id, f"f{number}.txt", f"file number {number}\n".encode())
    await attach_folder(agent, docs.id)
    open_now = [r.file_name for r in await store.agent_files(agent.id) if r.is_open]
    assert open_now == [f"docs/f{n}.txt" for n in range(1, 6)]  # the oldest stays closed

    # a new upload opens in the agents that see the folder; the least recently used closes
    await folders.upload(docs.id, "f6.txt", b"file number 6\n")
    open_now = [r.file_name for r in await store.agent_files(agent.id) if r.is_open]
    assert open_now == [f"docs/f{n}.txt" for n in range(2, 7)]

    result = await agent.run("open them")
    first, second = [m.text for m in result.messages if m.role == "tool"]
    assert first == ("* Opened docs/f0.txt\nNote: Closed 1 least recently used file(s) due to "
                     "open file limit: docs/f2.txt")
    assert second == ("* Opened 2 files: docs/f5.txt, docs/f6.txt\nNote: Closed 3 file(s) due "
                      "to close_all_others=True: docs/f0.txt, docs/f3.txt, docs/f4.txt")
    open_now = [r.file_name for r in await store.agent_files(agent.id) if r.is_open]
    assert open_now == ["docs/f5.txt", "docs/f6.txt"]
    assert "current_files_open=2" in agent.messages[0].text


async def test_open_files_survive_compaction(store: SqlStore) -> None:
    agent = await _agent(store, [reply("noted " * 60)] * 12, context_window=2000,
                         compaction="sliding_window")
    folders = Folders(store, HashEmbedder())
    docs = await folders.create("docs")
    await folders.upload(docs.id, "notes.txt", GOOD["notes.txt"])
    await attach_folder(agent, docs.id)
    for turn in range(12):
        await agent.run(f"turn {turn} " + "words " * 120)
    assert len(agent.messages) < 2 * 12 + 1  # compaction evicted turns
    assert "1: The launch moved to Tuesday." in agent.messages[0].text


async def test_opening_a_file_not_attached_is_a_tool_error(store: SqlStore) -> None:
    agent = await _agent(store, [call("open_files", file_requests=[{"file_name": "x/y.txt"}]),
                                 reply("ok")])
    folders = Folders(store, HashEmbedder())
    docs = await folders.create("docs")
    await folders.upload(docs.id, "notes.txt", GOOD["notes.txt"])
    await attach_folder(agent, docs.id)
    result = await agent.run("open it")
    [answer] = [m for m in result.messages if m.role == "tool"]
    assert answer.is_error and "x/y.txt not attached" in answer.text
    assert "docs/notes.txt" in answer.text


class DownEmbedder(HashEmbedder):
    """An embedding endpoint that is down."""

    async def embed(self, texts):  # type: ignore[no-untyped-def]
        from stateloop.memory.embeddings import EmbeddingError

        raise EmbeddingError("embedding endpoint answered 503")


async def test_a_file_whose_embedding_fails_is_stored_in_error_without_chunks(
        store: SqlStore) -> None:
    folders = Folders(store, DownEmbedder())
    docs = await folders.create("docs")
    file, _ = await folders.upload(docs.id, "notes.txt", GOOD["notes.txt"])
    assert (file.processing_status, file.chunks_embedded) == ("error", 0)
    assert "503" in (file.error_message or "")
    [stored] = await store.list_files(docs.id)
    assert (stored.id, stored.processing_status) == (file.id, "error")
    assert await store.list_chunks(docs.id) == []


@pytest.mark.parametrize(("limits", "name", "data", "words"), [
    (Limits(max_pages=1), "report.pdf", GOOD["report.pdf"],
     "has 2 pages; the limit is 1 (STATELOOP_UPLOAD_MAX_PAGES)"),
    (Limits(max_chars=100), "notes.txt", b"Ada owns the release. " * 10,
     "has 220 characters of text; the limit is 100 (STATELOOP_UPLOAD_MAX_CHARS)"),
    (Limits(max_chunks=2), "notes.txt", (b"word " * 190 + b"\n\n") * 4,
     "makes 4 chunks; the limit is 2 (STATELOOP_UPLOAD_MAX_CHUNKS)"),
    (Limits(max_bytes=10), "notes.txt", GOOD["notes.txt"],
     "is 51 bytes; the limit is 10 (STATELOOP_MAX_UPLOAD_BYTES)"),
    (Limits(), "deep.json", b"[" * 5000 + b"]" * 5000, "more than 256 levels deep"),
])
async def test_an_upload_past_a_limit_is_refused_naming_it(store: SqlStore, limits: Limits,
                                                           name: str, data: bytes,
                                                           words: str) -> None:
    folders = Folders(store, HashEmbedder(), limits=limits)
    docs = await folders.create("docs")
    with pytest.raises(FileRejected, match=re.escape(words)):
        await folders.upload(docs.id, name, data)
    assert await store.list_files(docs.id) == []


async def test_the_offline_model_embeds_in_the_worker_within_its_memory(
        store: SqlStore) -> None:
    embedder = MiniLMEmbedder()
    folders = Folders(store, embedder)
    docs = await folders.create("docs")
    file, _ = await folders.upload(docs.id, "notes.txt", GOOD["notes.txt"])
    assert (file.processing_status, file.chunks_embedded) == ("completed", 1)
    assert embedder._session is None  # the model ran in the worker, not in this process
    [hit] = await folders.search([docs.id], "who owns the release?")
    assert "Ada owns the release" in hit.chunk.text and hit.score > 0.3

    tight = Folders(store, embedder, limits=Limits(memory_mb=300))
    with pytest.raises(FileRejected, match=r"more than 300 MB of memory "
                                           r"\(STATELOOP_UPLOAD_MEMORY_MB\)"):
        await tight.upload(docs.id, "more.txt", GOOD["notes.txt"])


async def test_files_a_dead_process_was_processing_end_in_error(store: SqlStore) -> None:
    docs = await Folders(store, HashEmbedder()).create("docs")
    left = FileRecord(folder_id=docs.id, file_name="docs/a.txt", original_file_name="a.txt",
                      file_type="text/plain", file_size=3, processing_status="embedding")
    await store.add_file(left, [])
    assert await store.fail_interrupted_files() == 1
    found = await store.get_file(left.id)
    assert found.processing_status == "error" and "interrupted" in (found.error_message or "")
