"""schemathesis against the served OpenAPI document: every operation, a fixed number of
generated requests each, on a real server over loopback with the fake OpenAI server as model.

Each request must get no 5xx, a status code the document declares for the operation, the
declared content type, and a body that matches the declared schema. Path parameters are
sometimes swapped for ids that exist, so handlers are reached past their 404s. Bodies are
valid JSON of the declared shapes (schemathesis's positive mode); the seed is derived from
the test, so every run sends the same requests. Then schemathesis's coverage cases: each
declared bound, enum value and optional field in turn.

One test walks every operation, so a failure lists each failing operation with a curl line
that reproduces it.
"""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import itertools
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from letta_client import Letta
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from af_support import minimal_file
from fake_script import Script
from mcp_support import demo_command
from stateloop.testing.fake_openai import FakeOpenAI
from test_server_support import Server, client, fake, script, server, settings_for  # noqa: F401 (fixtures)

EXAMPLES_PER_OPERATION = 50
# The operations are sent in shards, each to a server of its own, so that the shards can run
# beside each other (pytest -n); each keeps the order below.
SHARDS = 3
# Seconds an operation's requests took on a loaded 2-core machine, where far above the ~2 s
# of most: each of their requests starts an MCP server, runs source in the sandbox or runs
# the agent. The shards are filled heaviest first, each path to the lightest shard so far.
SLOW = {"POST /v1/tools/mcp/servers/connect": 60, "POST /v1/tools/mcp/servers/test": 50,
        "POST /v1/groups/{group_id}/messages/stream": 20,
        "POST /v1/groups/{group_id}/messages": 15,
        "POST /v1/agents/{agent_id}/messages": 15,
        "POST /v1/agents/{agent_id}/messages/async": 15,
        "POST /v1/agents/{agent_id}/messages/stream": 10,
        "POST /v1/agents/{agent_id}/messages/preview-raw-payload": 10,
        "POST /v1/conversations/{conversation_id}/messages": 10,
        "POST /v1/tools/mcp/servers/{mcp_server_name}/tools/{tool_name}/execute": 10,
        "POST /v1/tools": 15, "PUT /v1/tools": 15, "POST /v1/tools/run": 15,
        "POST /v1/tools/generate-schema": 10, "POST /v1/chat/completions": 10,
        "POST /v1/messages/batches": 10,
        "POST /v1/voice-beta/{agent_id}/chat/completions": 10}
USUAL = 2
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]

CONFIG = schemathesis.Config.from_dict({
    "request-timeout": 30,
    # Reproductions show the real bodies: "max_tokens" is no secret.
    "output": {"sanitization": {"enabled": False}},
})

# Only the demo MCP server may start (the operator's setting names its command): a generated
# command is refused. Private addresses stay refused, and every generated server URL is
# pinned to one on loopback, so no request of the fuzz leaves this machine.
REFUSED_URL = "http://127.0.0.1:9/mcp"
# A provider's base_url is the fake's (set in each body: without one, a provider's public
# endpoint would be called); its type one the catalogue serves.
PROVIDER_URL: list[str] = []
SEAL = "q3Vh1cJm0cX0Yw1dHqM1kTqv2w6tq5Fv8dX3rW9yP0E="  # a Fernet key for providers' keys

SOURCE = '''
def shout(text: str) -> str:
    """Say it loudly.

    Args:
        text: What to say.
    """
    return text.upper()
'''


def _known_ids(client: Letta, demo: str, provider_url: str) -> dict[str, list[str]]:
    """Objects of every kind, so generated requests can name real ones: by path parameter,
    and ``cursor`` for ``after``/``before`` (ids of every kind, so some fit the listing)."""
    agent = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=True,
                                 memory_blocks=[{"label": "human", "value": "Name: Ada"}])
    block = client.blocks.create(label="notes", value="shared")
    tool = client.tools.create(source_code=SOURCE)
    passage = client.agents.passages.create(agent.id, text="Ada likes tea")
    identity: Any = client.post("/v1/identities/", cast_to=object, body={
        "identifier_key": "ada", "name": "Ada", "identity_type": "user",
        "agent_ids": [agent.id], "block_ids": [block.id]})
    client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hello"}])
    runs = [run.id for run in client.runs.list(agent_id=agent.id)]
    # an agent with turns to compact (the fuzzed one may be reset before its summarize)
    chatty = client.agents.create(model="openai/gpt-4o-mini", include_base_tools=False)
    client.agents.messages.create(chatty.id, input="hello")
    listed = list(client.agents.messages.list(agent.id))
    messages = [message.id for message in listed]
    said_by_user = next(m.id for m in listed if m.message_type == "user_message")
    steps = [step.id for step in client.runs.steps.list(runs[0])]
    group: Any = client.post("/v1/groups", cast_to=object,  # letta-client has no groups
                             body={"agent_ids": [agent.id], "description": "fuzzed"})
    client.post(f"/v1/groups/{group['id']}/messages", cast_to=object, body={"input": "hi"})
    said: Any = client.get(f"/v1/groups/{group['id']}/messages", cast_to=object)
    messages += [message["id"] for message in said]
    assert runs and messages and steps
    # Two MCP servers: one for the routes by id, one for those by name (whose tools have
    # other names: a tool name is unique in the registry).
    mcp_server = client.mcp_servers.create(server_name="fuzzed-mcp", config={
        "mcp_server_type": "stdio", "command": demo, "args": []})
    mcp_add = next(t for t in client.mcp_servers.tools.list(mcp_server.id) if t.name == "add")
    # Renamed by a fuzzed update, a server may be deleted by a fuzzed name: a spare one.
    spare = client.mcp_servers.create(server_name="fuzzed-spare", config={
        "mcp_server_type": "stdio", "command": demo, "args": [],
        "env": {"MCP_DEMO_PREFIX": "spare_"}})
    client.put("/v1/tools/mcp/servers", cast_to=object, body={
        "server_name": "fuzzed-legacy", "type": "stdio", "command": demo,
        "args": [], "env": {"MCP_DEMO_PREFIX": "legacy_"}})
    archive = client.archives.create(name="fuzzed")
    archived = client.archives.passages.create(archive.id, text="Ada likes coffee")
    conversation = client.conversations.create(agent_id=agent.id)
    said_there = list(client.conversations.messages.create(conversation.id, input="hello",
                                                           include_pings=False))
    [conversation_run] = {getattr(f, "run_id", None) for f in said_there} - {None}
    folder, source = (client.folders.create(name=name) for name in ("fuzzed", "fuzzed-src"))
    files = [client.folders.files.upload(f.id, file=("notes.txt", b"Ada likes tea")).id
             for f in (folder, source)]
    client.agents.folders.attach(folder.id, agent_id=agent.id)
    provider: Any = client.post("/v1/providers", cast_to=object, body={
        "name": "fuzzed-provider", "provider_type": "groq", "api_key": "gsk-fuzz",
        "base_url": provider_url})  # letta-client has no providers
    scheduled = client.agents.schedule.create(agent.id, messages=[  # due in a year
        {"role": "user", "content": "hello"}], schedule={
        "type": "one-time", "scheduled_at": (time.time() + 365 * 86400) * 1000})
    batched = client.agents.create(name="fuzzed-batched", model="openai/gpt-4o-mini",
                                   include_base_tools=False)
    batch: Any = client.post("/v1/messages/batches", cast_to=object, body={
        "requests": [{"agent_id": batched.id, "input": "hello"}]})  # letta-client has none
    key: Any = client.post("/v1/api-keys", cast_to=object, body={"name": "fuzzed"})
    token = client.access_tokens.create(hostname="https://app.example", policy=[
        {"type": "agent", "id": agent.id, "access": ["read_messages"]}])
    known = {"provider_id": [provider["id"]], "scheduled_message_id": [scheduled.id],
             "batch_id": [batch["id"]], "job_id": [batch["id"]],  # a batch is a job
             "batched_agent": [batched.id],
             "key_id": [key["id"]], "token": [token.token.partition(".")[0]],
             "archive_id": [archive.id], "passage_id": [archived.id],
             "agent_id": [agent.id], "block_id": [block.id], "tool_id": [tool.id, mcp_add.id],
             "mcp_server_id": [mcp_server.id, spare.id], "mcp_server_name": ["fuzzed-legacy"],
             "mcp_tool_name": ["legacy_add"],
             "memory_id": [passage[0].id], "run_id": runs, "step_id": steps,
             "identity_id": [identity["id"]], "group_id": [group["id"]],
             "conversation_id": [conversation.id], "conversation_run": [conversation_run],
             "chatty_agent": [chatty.id],
             "folder_id": [folder.id], "source_id": [source.id], "file_id": files,
             "folder_name": ["fuzzed"], "source_name": ["fuzzed-src"],
             "message_id": messages[:3] + messages[-2:],
             "block_label": ["human", "notes"],
             "sha": ["HEAD"], "from": ["HEAD"],  # memory history: the newest commit
             "tool_name": [*[t.name for t in agent.tools if t.name][:2], "shout", "legacy_add"]}
    ids = [i for kind, found in known.items() if kind.endswith("_id") for i in found]
    return {**known, "cursor": ids + messages[:3] + messages[-3:] + steps,
            "user_message": [agent.id, said_by_user]}


@pytest.fixture(params=range(SHARDS), ids=lambda shard: f"part-{shard + 1}-of-{SHARDS}")
def served(request: pytest.FixtureRequest, fake: FakeOpenAI, script: Script,
           tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Any, dict[str, list[str]], int]]:
    """The schema as a server of the shard's own serves it, ids of objects that exist there,
    and which shard of the operations to send."""
    db = tmp_path_factory.mktemp("fuzz") / "stateloop.db"
    script.set()
    demo = demo_command(tmp_path_factory.mktemp("mcp"))
    # Providers added over REST: their keys sealed, their URLs the fake's (see _on_loopback).
    with Server(settings_for(fake, db, mcp_stdio_commands=[demo], encryption_key=SEAL,
                             provider_private_urls=True)) as server:
        client = Letta(base_url=server.url, api_key="unused", max_retries=0, timeout=30)
        PROVIDER_URL[:] = [fake.base_url]
        known = {**_known_ids(client, demo, fake.base_url), "demo": [demo]}
        # The document is built on its first request (about a second of CPU): on a loaded
        # machine, with the other parts building theirs, past schemathesis's 10 s.
        yield (schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=CONFIG,
                                             timeout=120),
               known, request.param)


def _cases(operation: Any, known: dict[str, list[str]]) -> st.SearchStrategy[Case]:
    """Generated requests, and as many again whose path names objects that exist, some with
    an existing id as the ``after`` or ``before`` cursor."""
    real = st.fixed_dictionaries({p.name: st.sampled_from(known[p.name])
                                  for p in operation.path_parameters if p.name in known})
    variants = [real.flatmap(lambda path: operation.as_strategy(path_parameters=path))]
    named = {p.name: st.sampled_from(known[p.name]) for p in operation.query
             if p.name in known}  # e.g. the agent a new conversation belongs to
    if named:
        variants.append(st.tuples(real, st.fixed_dictionaries(named)).flatmap(
            lambda pair: operation.as_strategy(path_parameters=pair[0], query=pair[1])))
    for cursor in [p.name for p in operation.query if p.name in ("after", "before")]:
        variants.append(st.tuples(real, st.sampled_from(known["cursor"])).flatmap(
            lambda pair, cursor=cursor: operation.as_strategy(path_parameters=pair[0],
                                                              query={cursor: pair[1]})))
    if operation.body and "source_code" in str(operation.body[0].definition):
        variants.append(operation.as_strategy().map(_with_source))
    elif operation.body and "'code'" in str(operation.body[0].definition):
        variants.append(operation.as_strategy().map(_with_code))
    elif operation.body and any(name in str(operation.body[0].definition) for name in (
            "'command'", "StdioServerConfig", "CreateMCPServerRequest")):
        variants.append(operation.as_strategy().map(
            lambda case: _with_mcp_server(case, known["demo"][0])))
    elif operation.method.upper() == "PATCH" and operation.path == (
            "/v1/agents/{agent_id}/messages/{message_id}"):
        agent_id, message_id = known["user_message"]
        variants.append(operation.as_strategy(
            path_parameters={"agent_id": agent_id, "message_id": message_id}).map(_as_user_edit))
    elif operation.path == "/v1/agents/import":
        variants.append(operation.as_strategy().map(_with_agent_file))
    elif operation.method.upper() == "POST" and operation.path in ("/v1/folders",
                                                                   "/v1/sources"):
        variants.append(operation.as_strategy().map(_with_fresh_name))
    elif operation.path == "/v1/agents/{agent_id}/summarize":
        # every turn leaves (the one turn there is, the first time; then nothing can)
        variants.append(operation.as_strategy(
            path_parameters={"agent_id": known["chatty_agent"][0]}).map(_all_mode))
    elif operation.path == "/v1/conversations/{conversation_id}/stream":
        # a finished run is streamed by its id (without one, only a run in flight is)
        variants.append(real.flatmap(lambda path: operation.as_strategy(path_parameters=path))
                        .map(lambda case: _with_run(case, known["conversation_run"][0])))
    elif operation.path == "/v1/agents/{agent_id}/memory/revert":
        variants.append(real.flatmap(lambda path: operation.as_strategy(path_parameters=path))
                        .map(_revert_to_head))
    elif operation.path.endswith("/chat/completions"):
        variants.append(real.flatmap(lambda path: operation.as_strategy(path_parameters=path))
                        .map(lambda case: _said_to(case, known["agent_id"][0])))
    elif operation.method.upper() == "POST" and operation.path.endswith("/schedule"):
        variants.append(real.flatmap(lambda path: operation.as_strategy(path_parameters=path))
                        .map(_scheduled))
    elif operation.method.upper() == "POST" and operation.path == "/v1/messages/batches":
        variants.append(operation.as_strategy().map(
            lambda case: _batched(case, known["batched_agent"][0])))
    elif operation.path.endswith("/upload"):
        variants.append(real.flatmap(lambda path: operation.as_strategy(path_parameters=path))
                        .map(_with_text_file))
    elif operation.method.upper() == "POST" and operation.path == "/v1/client-side-access-tokens":
        variants.append(operation.as_strategy().map(
            lambda case: _for_agent(case, known["agent_id"][0])))
    return st.one_of(operation.as_strategy(), st.one_of(variants)).map(_on_loopback)


_tool_bodies = itertools.count()


def _with_source(case: Case) -> Case:
    """A tool body whose source compiles (generated source never does): in turn, a new tool
    with its generated JSON schema, a new one without, and the existing one."""
    turn = next(_tool_bodies)
    if isinstance(case.body, dict):
        name = "shout" if turn % 3 == 2 else f"hum_{turn}"
        case.body["source_code"] = SOURCE.replace("shout", name)
        if turn % 3 == 1:
            case.body["json_schema"] = None
    return case


_folder_names = itertools.count()


def _with_fresh_name(case: Case) -> Case:
    """A folder name not taken yet (folder names are unique, and generation repeats them)."""
    if isinstance(case.body, dict):
        case.body["name"] = f"folder {next(_folder_names)}"
    return case


def _all_mode(case: Case) -> Case:
    """Compaction in Letta's ``all`` mode."""
    case.body = {"compaction_settings": {"mode": "all"}}
    return case


def _with_run(case: Case, run_id: str) -> Case:
    """A stream request naming a run of the conversation."""
    if isinstance(case.body, dict):
        case.body.update(run_id=run_id, otid=None)
    else:
        case.body = {"run_id": run_id}
    return case


def _said_to(case: Case, agent_id: str) -> Case:
    """A chat completion whose model is an agent and whose last message is the user's."""
    if isinstance(case.body, dict):
        case.body.update(model=agent_id, messages=[{"role": "user", "content": "hello"}])
    return case


def _scheduled(case: Case) -> Case:
    """A message scheduled a year ahead (a generated time is seldom one a server takes)."""
    if isinstance(case.body, dict):
        case.body.update(messages=[{"role": "user", "content": "hello"}], schedule={
            "type": "one-time", "scheduled_at": (time.time() + 365 * 86400) * 1000})
    return case


def _batched(case: Case, agent_id: str) -> Case:
    """A batch of one request to an agent that exists (generated ids never are one)."""
    if isinstance(case.body, dict):
        case.body["requests"] = [{"agent_id": agent_id, "input": "hello"}]
    return case


def _for_agent(case: Case, agent_id: str) -> Case:
    """A token for the agent that exists, for a page's origin (a generated id or hostname
    seldom is one)."""
    if isinstance(case.body, dict):
        case.body.update(hostname="https://app.example", policy=[
            {"type": "agent", "id": agent_id, "access": ["read_messages"]}])
        case.body.pop("expires_at", None)
    return case


def _with_text_file(case: Case) -> Case:
    """An upload whose file is text (generated bytes seldom are)."""
    if isinstance(case.body, dict):
        case.body["file"] = b"Ada likes tea.\n"
    return case


def _as_user_edit(case: Case) -> Case:
    """An edit whose type is the message's own (a generated type seldom is)."""
    if isinstance(case.body, dict):
        case.body.update(message_type="user_message", content="edited")
    return case


def _with_code(case: Case) -> Case:
    """Source to read a schema from (``code``, as /v1/tools/generate-schema names it)."""
    if isinstance(case.body, dict):
        case.body["code"] = SOURCE
    return case


def _with_mcp_server(case: Case, demo: str) -> Case:
    """An MCP server config that starts (generated commands are refused): the demo server."""
    if isinstance(case.body, dict):
        config = case.body.get("config", case.body)
        if isinstance(config, dict) and "command" in config:
            config.update(command=demo, args=[], env={})
    return case


def _on_loopback(case: Case) -> Case:
    """Any server or callback URL in the body names a refused loopback address, and a
    provider's the fake's (never another host)."""
    def pin(value: Any) -> None:
        if isinstance(value, dict):
            if "api_key" in value and PROVIDER_URL:  # a provider's body
                value["base_url"] = PROVIDER_URL[0]
                if isinstance(value.get("provider_type"), str):
                    value["provider_type"] = "groq"
            for key, item in value.items():
                if key in ("server_url", "callback_url") and item is not None:
                    value[key] = REFUSED_URL
                else:
                    pin(item)
        elif isinstance(value, list):
            for item in value:
                pin(item)

    pin(case.body)
    return case


def _with_agent_file(case: Case) -> Case:
    """An Agent File that imports (generated bytes never are one)."""
    if isinstance(case.body, dict):
        case.body["file"] = json.dumps(minimal_file()).encode()
        case.body.pop("secrets", None)
        case.body.pop("env_vars_json", None)
    return case


def _boundary_cases(schema: Any, operation: Any, known: dict[str, list[str]]
                    ) -> Iterator[Case]:
    """schemathesis's coverage cases: each declared bound, enum value and optional field in
    turn (every other one naming existing objects)."""
    config = schema.config.generation_for(operation=operation, phase="coverage")
    cases = schema.iter_coverage_cases(operation, generation_modes=[GenerationMode.POSITIVE],
                                       generation_config=config)
    for index, case in enumerate(cases):
        if index % 2:
            for name in case.path_parameters or {}:
                if name in known:
                    case.path_parameters[name] = known[name][0]
        yield case


def _revert_to_head(case: Case) -> Case:
    """A revert to the newest commit, which exists (and changes nothing)."""
    case.body = {"commit": "HEAD"}
    return case


def _group(path: str) -> str:
    """The paths one shard sends together: a detach with its attach (it needs something
    attached), an object's path with its collection's (a delete by a generated name needs a
    create of that name before it)."""
    return re.sub(r"/\{[^}]+\}$", "", path.replace("/detach", "/attach"))


def _shards(operations: list[Any]) -> list[set[str]]:
    """The groups of paths of each shard, of about equal seconds each."""
    seconds: Counter[str] = Counter()
    for operation in operations:
        seconds[_group(operation.path)] += SLOW.get(operation.label, USUAL)
    shards: list[set[str]] = [set() for _ in range(SHARDS)]
    totals = [0] * SHARDS
    for group in sorted(seconds, key=lambda group: (-seconds[group], group)):
        lightest = totals.index(min(totals))
        shards[lightest].add(group)
        totals[lightest] += seconds[group]
    return shards


def test_every_operation_answers_as_documented(
        served: tuple[Any, dict[str, list[str]], int]) -> None:
    schema, known, shard = served
    failures: list[str] = []
    statuses: dict[str, Counter[int]] = defaultdict(Counter)
    # Deletions last, the agent itself last of all: the others need it and its objects
    # (its runs go with it) alive.
    operations = sorted((result.ok() for result in schema.get_all_operations()),
                        key=lambda op: (op.method == "delete",
                                        op.path == "/v1/agents/{agent_id}", -len(op.path)))
    mine = _shards(operations)[shard]
    operations = [op for op in operations if _group(op.path) in mine]

    def send(case: Case) -> None:
        # As a client, not a page: its form posts carry a header no page can send unasked.
        response = case.call_and_validate(checks=CHECKS, headers={"X-Requested-With": "fuzz"})
        statuses[case.operation.label][response.status_code] += 1

    fuzzing = settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None,
                       database=None, suppress_health_check=list(HealthCheck))
    for operation in operations:
        try:
            fuzzing(given(case=_cases(operation, known))(send))()
            for case in _boundary_cases(schema, operation, known):
                send(case)
        except (Exception, BaseExceptionGroup) as exc:  # a FailureGroup is the latter
            failures.append(f"{operation.label}:\n{exc}")
    for label, counts in statuses.items():  # shown with -s: how far the requests got
        print(label, dict(sorted(counts.items())))
    # Requests that only ever meet 404s or 422s test nothing behind them.
    unreached = [op.label for op in operations
                 if not any(200 <= status < 300 for status in statuses[op.label])]
    problems = [f"{len(failures)} of {len(operations)} operations failed:"] if failures else []
    problems += failures
    if unreached:
        problems.append("no request succeeded (only errors answered): " + ", ".join(unreached))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
