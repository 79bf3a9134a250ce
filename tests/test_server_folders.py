"""Folders and files over REST through letta-client: uploading each kind of file, bad files
refused with nothing stored, a folder attached to an agent whose file tools work on the
fake model, opening and closing files, the older ``/v1/sources`` names, every answer checked
against Letta's document."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import letta_client
import pytest
from letta_client import Letta

from file_support import BAD, GOOD, REFUSED_AT_ONCE, processed
from letta_spec import assert_letta_shape
from patience import ANSWERS
from stateloop.store import open_store
from stateloop.store.folders import FolderRecord
from stateloop.testing.fake_openai import FakeOpenAI
from stateloop.testing.scripted import call, reply
from test_server_support import (  # noqa: F401 (fixtures)
    Script,
    Server,
    client,
    fake,
    new_agent,
    script,
    server,
    settings_for,
)


def _json(response: Any) -> Any:
    return json.loads(response.http_response.text)


def _folder(client: Letta, name: str) -> Any:
    made = client.folders.with_raw_response.create(name=name, description="team docs",
                                                   instructions="Cite the file.")
    assert_letta_shape("/v1/folders/", "post", _json(made))
    return made.parse()


def test_upload_each_kind_and_read_it_back(client: Letta, server: Server) -> None:
    folder = _folder(client, "kinds")
    for name, data in GOOD.items():
        uploaded = client.folders.files.with_raw_response.upload(folder.id, file=(name, data))
        assert_letta_shape("/v1/folders/{folder_id}/upload", "post", _json(uploaded))
        file = uploaded.parse()
        assert (file.file_name, file.processing_status) == (f"kinds/{name}", "pending")
        file = processed(client, folder.id, file)
        assert (file.file_name, file.processing_status) == (f"kinds/{name}", "completed")
        assert file.total_chunks == file.chunks_embedded and file.file_size == len(data)
    listed = client.folders.files.list(folder.id, include_content=True)
    by_name = {f.original_file_name: f for f in listed}
    assert set(by_name) == set(GOOD)
    assert "Churn fell in the north region" in (by_name["report.pdf"].content or "")
    assert by_name["report.pdf"].file_type == "application/pdf"

    base = f"{server.url}/v1/folders"
    got = httpx.get(f"{base}/{folder.id}/files/{by_name['guide.md'].id}?include_content=true")
    assert_letta_shape("/v1/folders/{folder_id}/files/{file_id}", "get", got.json())
    assert got.json()["content"].startswith("# Guide")
    passages = httpx.get(f"{base}/{folder.id}/passages").json()
    assert_letta_shape("/v1/folders/{folder_id}/passages", "get", passages)
    assert {p["file_name"] for p in passages} == {f"kinds/{n}" for n in GOOD}
    metadata = httpx.get(f"{base}/metadata?include_detailed_per_source_metadata=true").json()
    assert_letta_shape("/v1/folders/metadata", "get", metadata)
    [mine] = [s for s in metadata["sources"] if s["source_id"] == folder.id]
    assert mine["file_count"] == len(GOOD) and len(mine["files"]) == len(GOOD)
    assert httpx.get(f"{base}/count").json() >= 1
    assert httpx.get(f"{base}/name/kinds").json() == folder.id

    # the older names reach the same folder
    source = httpx.get(f"{server.url}/v1/sources/{folder.id}").json()
    assert_letta_shape("/v1/sources/{source_id}", "get", source)
    assert source["name"] == "kinds" and source["vector_db_provider"] == "native"
    files = httpx.get(f"{server.url}/v1/sources/{folder.id}/files").json()
    assert len(files) == len(GOOD)

    # deleting a file takes its passages
    client.folders.files.delete(by_name["notes.txt"].id, folder_id=folder.id)
    left = httpx.get(f"{base}/{folder.id}/passages").json()
    assert "kinds/notes.txt" not in {p["file_name"] for p in left}
    client.folders.delete(folder.id)
    assert httpx.get(f"{base}/{folder.id}").status_code == 404


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_is_refused_and_nothing_is_stored(client: Letta, server: Server,
                                                      name: str) -> None:
    folder = _folder(client, f"bad-{name}")
    data, words = BAD[name]
    if name in REFUSED_AT_ONCE:
        with pytest.raises(letta_client.APIStatusError) as caught:
            client.folders.files.upload(folder.id, file=(name, data))
        assert caught.value.status_code in (415, 422)
        assert words.lower() in str(caught.value.body).lower()
        assert name in str(caught.value.body)
        assert list(client.folders.files.list(folder.id)) == []
        return
    # what only reading it whole tells: the file ends in error, named, with no passages
    file = processed(client, folder.id, client.folders.files.upload(folder.id,
                                                                    file=(name, data)))
    assert (file.processing_status, file.chunks_embedded) == ("error", 0)
    assert words.lower() in (file.error_message or "").lower()
    assert name in (file.error_message or "")
    assert httpx.get(f"{server.url}/v1/folders/{folder.id}/passages").json() == []


def test_a_200_mb_upload_is_refused_before_it_is_read(client: Letta, server: Server) -> None:
    folder = _folder(client, "huge")
    size = 200 * 1024 * 1024
    # Only the head is sent: the server answers from Content-Length, reading none of the body.
    with socket.create_connection(("127.0.0.1", server.port), timeout=ANSWERS) as conn:
        conn.sendall(f"POST /v1/folders/{folder.id}/upload HTTP/1.1\r\nHost: test\r\n"
                     "X-Requested-With: test\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                     f"Content-Length: {size}\r\n\r\n".encode())
        answer = b""
        while not answer.endswith(b"}"):
            answer += conn.recv(65536)
    head, _, body = answer.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 413 "), head
    assert json.loads(body)["detail"].startswith(f"request body is {size} bytes; the limit is")
    assert list(client.folders.files.list(folder.id)) == []


def test_an_upload_may_pass_the_body_limit_of_other_requests(client: Letta) -> None:
    folder = _folder(client, "large")
    data = b"Ada likes tea.\n" + b"\n" * (9 * 1024 * 1024)  # over the 8 MB of a JSON body
    file = processed(client, folder.id,
                     client.folders.files.upload(folder.id, file=("large.txt", data)))
    assert (file.processing_status, file.file_size, file.total_chunks) == (
        "completed", len(data), 1)


def test_an_agent_reads_an_attached_folder(client: Letta, server: Server,
                                           script: Script) -> None:
    folder = _folder(client, "handbook")
    for name in ("notes.txt", "tool.py", "report.pdf"):
        processed(client, folder.id, client.folders.files.upload(folder.id,
                                                                 file=(name, GOOD[name])))
    agent = new_agent(client, name="reader")
    client.agents.folders.attach(folder.id, agent_id=agent.id)
    tools = {t.name for t in client.agents.tools.list(agent.id)}
    assert {"open_files", "grep_files", "semantic_search_files"} <= tools
    assert [f.id for f in client.agents.folders.list(agent.id)] == [folder.id]
    assert list(client.folders.agents.list(folder.id)) == [agent.id]

    listed = httpx.get(f"{server.url}/v1/agents/{agent.id}/files").json()
    assert_letta_shape("/v1/agents/{agent_id}/files", "get", listed)
    files = {f.file_name: f for f in client.agents.files.list(agent.id)}
    assert set(files) == {"handbook/notes.txt", "handbook/tool.py", "handbook/report.pdf"}
    assert all(f.is_open for f in files.values())

    script.set(call("open_files", file_requests=[{"file_name": "handbook/tool.py",
                                                  "offset": 4, "length": 2}],
                    close_all_others=True),
               call("grep_files", pattern="tuesday"),
               call("semantic_search_files", query="churn north region"),
               reply("Read."))
    answer = client.agents.messages.create(agent.id, input="What do the files say?")
    returns = [m.tool_return for m in answer.messages  # type: ignore[union-attr]
               if m.message_type == "tool_return_message"]
    assert returns[0].startswith("* Opened handbook/tool.py (lines 5-6)\nNote: Closed 2 file(s)")
    assert "> 1: The launch moved to Tuesday." in returns[1]
    assert "handbook/report.pdf (passage #1)" in returns[2]
    # the request after open_files carried the window in its system prompt
    system = script.requests[1].messages[0].text
    assert "[Viewing lines 5 to 6 (out of 6 lines)]\n5: def launch_day():" in system
    assert '<file status="closed" name="handbook/notes.txt">' in system

    # open and close over REST; the live agent's context follows
    notes = files["handbook/notes.txt"].file_id
    assert client.agents.files.open(notes, agent_id=agent.id) == []
    now_open = [f.file_name for f in client.agents.files.list(agent.id, is_open=True)]
    assert sorted(now_open) == ["handbook/notes.txt", "handbook/tool.py"]
    script.set(reply("ok"))
    client.agents.messages.create(agent.id, input="And now?")
    assert "1: The launch moved to Tuesday." in script.requests[0].messages[0].text
    client.agents.files.close(files["handbook/tool.py"].file_id, agent_id=agent.id)
    assert client.agents.files.close_all(agent.id) == ["handbook/notes.txt"]
    assert list(client.agents.files.list(agent.id, is_open=True)) == []

    client.agents.folders.detach(folder.id, agent_id=agent.id)
    assert list(client.agents.files.list(agent.id)) == []
    assert "open_files" not in {t.name for t in client.agents.tools.list(agent.id)}


def test_sources_attach_and_unknown_ids(client: Letta, server: Server) -> None:
    folder = _folder(client, "legacy")
    agent = new_agent(client, name="legacy-reader")
    attached = httpx.patch(f"{server.url}/v1/agents/{agent.id}/sources/attach/{folder.id}")
    assert_letta_shape("/v1/agents/{agent_id}/sources/attach/{source_id}", "patch",
                       attached.json())
    assert [s["id"] for s in attached.json()["sources"]] == [folder.id]
    sources = httpx.get(f"{server.url}/v1/agents/{agent.id}/sources").json()
    assert [s["id"] for s in sources] == [folder.id]
    for path in ("/v1/folders/source-00000000-nope", f"/v1/agents/{agent.id}/files/x/open",
                 f"/v1/agents/{agent.id}/folders/attach/source-00000000-nope"):
        method = httpx.get if path.startswith("/v1/folders") else httpx.patch
        response = method(f"{server.url}{path}")
        assert response.status_code == 404, path
    duplicate = httpx.post(f"{server.url}/v1/folders", json={"name": "legacy"})
    assert duplicate.status_code == 409 and "legacy" in duplicate.json()["detail"]


def test_a_folder_stored_without_an_embedding_config_is_listed_with_the_default(
        fake: FakeOpenAI, tmp_path: Path) -> None:
    """A record an older writer left without ``embedding_config`` (Letta's Folder requires
    one) is shown with the config of what embeds it, never a 500 on the list."""
    db = tmp_path / "bare.db"

    async def plant() -> str:
        store = await open_store(f"sqlite:///{db}")
        try:
            return (await store.create_folder(FolderRecord(name="bare"))).id
        finally:
            await store.close()

    folder_id = asyncio.run(plant())
    with Server(settings_for(fake, db)) as bare:
        client = Letta(base_url=bare.url, max_retries=0)
        [listed] = client.folders.list()
        assert listed.id == folder_id
        assert listed.embedding_config.embedding_model == "text-embedding-3-small"
        assert client.folders.retrieve(folder_id).embedding_config.embedding_dim == 1536
