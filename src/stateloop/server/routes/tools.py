"""``/v1/tools`` (tools from Python source, run in the sandbox) and an agent's tools."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query

from ...agent_options import parse_rules
from ...errors import ToolDefinitionError
from ...store import NotFoundError, Page, ToolRecord
from ...tools.builtin import builtin_names
from ...tools.sandbox import check_source, describe_source
from ...tools.source_reader import SourceTooLarge
from ..deps import RuntimeDep
from ..models.requests import ModifyApprovalRequest, ToolCreate, ToolUpdate, errors
from ..models.responses import AgentState, Tool
from ..pagination import Limit, Order
from ..services.creation import set_tools, unprocessable
from ..services.runtime import Runtime, with_default_approvals
from ..services.tool_env import agent_env
from ..services.unreadable import readable
from ..services.views import tool_view
from .agents import agent_record, agent_state

router = APIRouter(tags=["tools"])


async def _schema(runtime: Runtime, source_code: str, json_schema: dict[str, Any] | None,
                  description: str | None, args_json_schema: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The tool's JSON schema: as given (checked against the source), or read from the
    source's signature (or ``args_json_schema``) and docstring. The source is parsed in a
    child process (``SourceReader``), never run."""
    refused = runtime.source_tools_refused()
    if refused:
        raise HTTPException(503, detail=refused)
    try:
        runtime.sources.check_size(source_code)
        wanted = (json_schema or {}).get("name")
        if wanted and f"def {wanted}" not in source_code:
            raise name_mismatch(wanted, wanted, source_code)
        signature = await runtime.sources.signature(source_code, wanted)
        name = check_source(signature, wanted)
        if json_schema:
            parameters = json_schema.get("parameters", {"type": "object", "properties": {}})
            if not isinstance(parameters, dict) or not isinstance(
                    parameters.get("properties", {}), dict):
                raise unprocessable("json_schema.parameters",
                                    "must be a JSON schema object with 'properties'")
            schema = {**json_schema, "name": name, "parameters": parameters}
        else:
            schema = describe_source(signature, name, args_json_schema)
    except SourceTooLarge as exc:
        raise HTTPException(413, detail=str(exc)) from exc
    except ToolDefinitionError as exc:  # Letta's LettaToolCreateError: a 400
        raise HTTPException(400, detail=str(exc)) from exc
    if description:
        schema["description"] = description
    return schema


def name_mismatch(name: str, schema_name: str | None, source_code: str) -> HTTPException:
    """Letta's LettaToolNameSchemaMismatchError, word for word."""
    return HTTPException(400, detail=f"Tool name '{name}' does not match the name in the JSON "
                                     f"schema '{schema_name}' or in the source code "
                                     f"`{source_code}`")


def _check_name_free(runtime: Runtime, name: str) -> None:
    if name in builtin_names() or name in runtime.python_tools:
        raise HTTPException(409, detail=f"a built-in tool is named {name!r}; "
                                        "choose another function name")


async def _rebind(runtime: Runtime, record: ToolRecord) -> None:
    """Idle live agents using this tool get the new code now (with each agent's own
    variables); running ones at reload."""
    for agent in runtime.live_agents():
        if record.name not in agent.tools or agent.running:
            continue
        try:
            env = agent_env(await runtime.store.get_agent(agent.id))
        except NotFoundError:  # being deleted
            continue
        if not agent.running:  # it may have started meanwhile
            set_tools(agent, {**agent.tools, record.name: runtime.bind(record, env)})


@router.post("/v1/tools", responses=errors(400, 409, 413, 503), response_model=Tool)
async def create_tool(body: ToolCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """A tool from Python source; its calls run in a sandbox with limits. A tool of the
    same name is updated, as Letta does."""
    if (body.source_type or "python") != "python":
        raise unprocessable("source_type", f"only 'python' is supported, not "
                                           f"{body.source_type!r}")
    return await upsert_tool(body, runtime)


@router.put("/v1/tools", responses=errors(400, 409, 413, 503), response_model=Tool)
async def upsert_tool(body: ToolCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """Create a tool, or update the one with the same name: the fields the request sets
    replace the stored ones, the others (``tags``, ...) are kept."""
    schema = await _schema(runtime, body.source_code, body.json_schema, body.description,
                           body.args_json_schema)
    _check_name_free(runtime, schema["name"])
    try:
        record = await runtime.store.get_tool(schema["name"])
    except NotFoundError:
        record = ToolRecord(name=schema["name"])
    record.tool_type, record.binding = "custom", "sandbox"
    record.json_schema, record.description = schema, schema.get("description")
    record.source_type, record.source_code = "python", body.source_code
    for name in body.model_fields_set & _KEPT_UNLESS_SET:
        if getattr(body, name) is not None:  # null: left as it is, as in Letta
            setattr(record, name, getattr(body, name))
    record = await runtime.store.upsert_tool(record)
    await _rebind(runtime, record)
    return tool_view(record)


# What an upsert leaves as it was unless the request sets it.
_KEPT_UNLESS_SET = {"args_json_schema", "return_char_limit", "default_requires_approval",
                    "enable_parallel_execution", "tags", "pip_requirements",
                    "npm_requirements"}


@router.get("/v1/tools", response_model=list[Tool])
async def list_tools(runtime: RuntimeDep, name: str | None = None, after: str | None = None,
                     before: str | None = None,
                     limit: Limit = 50,
                     order: Order = "asc") -> list[dict[str, Any]]:
    """Registered tools: built-in, Python and source tools."""
    records = await runtime.store.list_tools(
        [name] if name else None, page=Page(after=after, before=before, limit=limit, order=order))
    return [readable(Tool, tool_view(t), metadata="metadata_") for t in records]


async def _tool(runtime: Runtime, tool_id: str) -> ToolRecord:
    record = await runtime.store.get_tool(tool_id)
    if record.id != tool_id:
        raise HTTPException(404, detail=f"no tool with id {tool_id!r}")
    return record


@router.get("/v1/tools/{tool_id}", responses=errors(404), response_model=Tool)
async def retrieve_tool(tool_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """One tool."""
    return tool_view(await _tool(runtime, tool_id))


@router.patch("/v1/tools/{tool_id}", responses=errors(400, 404, 409, 413, 503),
              response_model=Tool)
async def modify_tool(tool_id: str, body: ToolUpdate, runtime: RuntimeDep) -> dict[str, Any]:
    """Change a source tool's code, schema, description, tags or approval default. A
    ``json_schema`` naming another function of the source renames the tool, as Letta
    does; the agents with the tool keep it under its new name."""
    record = await _tool(runtime, tool_id)
    old_name = record.name
    if record.binding != "sandbox":
        raise HTTPException(409, detail=f"tool {record.name!r} is built in; it cannot change")
    fields = body.model_fields_set
    if {"source_code", "json_schema", "description", "args_json_schema"} & fields:
        source = body.source_code or record.source_code or ""
        args_schema = (body.args_json_schema if "args_json_schema" in fields
                       else record.args_json_schema)
        derive = {"source_code", "args_json_schema"} & fields  # the schema is read anew
        schema = await _schema(runtime, source, body.json_schema or (
            None if derive else record.json_schema), body.description, args_schema)
        if schema["name"] != record.name and (body.json_schema or {}).get("name") != \
                schema["name"]:
            raise name_mismatch(record.name, schema["name"], source)
        record.name, record.source_code, record.json_schema = schema["name"], source, schema
        record.args_json_schema = args_schema
        record.description = schema.get("description")
    for name in ("tags", "default_requires_approval", "return_char_limit"):
        if name in fields and getattr(body, name) is not None:  # null: left as it is
            setattr(record, name, getattr(body, name))
    if record.name == old_name:
        record = await runtime.store.upsert_tool(record)
        await _rebind(runtime, record)
        return tool_view(record)
    _check_name_free(runtime, record.name)
    holders = [agent for agent in runtime.live_agents() if old_name in agent.tools]
    if any(agent.running for agent in holders):
        raise HTTPException(409, detail=f"an agent with tool {old_name!r} is running; "
                                        "rename it when the run ends")
    record = await runtime.store.rename_tool(old_name, record)
    for agent in holders:  # loaded again, with the tool under its new name
        runtime.forget(agent.id)
    return tool_view(record)


@router.delete("/v1/tools/{tool_id}", responses=errors(404, 409))
async def delete_tool(tool_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Remove a source or MCP tool; agents that had it answer its calls with an error."""
    record = await _tool(runtime, tool_id)
    if record.binding != "sandbox" and record.tool_type != "external_mcp":
        raise HTTPException(409, detail=f"tool {record.name!r} is built in; it cannot be "
                                        "deleted")
    await runtime.store.delete_tool(record.name)
    return {}


# -- an agent's tools ---------------------------------------------------------------------


@router.get("/v1/agents/{agent_id}/tools", responses=errors(404), response_model=list[Tool])
async def list_agent_tools(agent_id: str, runtime: RuntimeDep, after: str | None = None,
                           before: str | None = None,
                           limit: Limit = None,
                           order: Order = "asc") -> list[dict[str, Any]]:
    """The agent's tools in attach order."""
    await agent_record(runtime, agent_id)
    records = await runtime.store.agent_tools(
        agent_id, Page(after=after, before=before, limit=limit, order=order))
    return [readable(Tool, tool_view(t), metadata="metadata_") for t in records]


async def _change_tools(runtime: Runtime, agent_id: str, tool_id: str, attach: bool
                        ) -> dict[str, Any]:
    record = await agent_record(runtime, agent_id)
    tool = await _tool(runtime, tool_id)
    agent = await runtime.agent(agent_id)
    if agent.running:
        raise HTTPException(409, detail=f"agent {agent_id!r} is running; change its tools "
                                        "when the run ends")
    names = [n for n in record.tool_names if n != tool.name]
    tools = {n: t for n, t in agent.tools.items() if n != tool.name}
    rules = record.tool_rules
    if attach:
        names.append(tool.name)
        tools[tool.name] = runtime.bind(tool, agent_env(record))
        rules = with_default_approvals(rules, [tool])
    await runtime.store.update_agent(agent_id, tool_names=names, tool_rules=rules)
    agent.tool_rules = parse_rules(rules)
    set_tools(agent, tools)
    return await agent_state(runtime, await runtime.store.get_agent(agent_id))


@router.patch("/v1/agents/{agent_id}/tools/attach/{tool_id}",
              responses=errors(404, 409), response_model=AgentState)
async def attach_tool(agent_id: str, tool_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Give the agent a tool."""
    return await _change_tools(runtime, agent_id, tool_id, attach=True)


@router.patch("/v1/agents/{agent_id}/tools/detach/{tool_id}",
              responses=errors(404, 409), response_model=AgentState)
async def detach_tool(agent_id: str, tool_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Take a tool from the agent."""
    return await _change_tools(runtime, agent_id, tool_id, attach=False)


@router.patch("/v1/agents/{agent_id}/tools/approval/{tool_name}",
              responses=errors(404, 409), response_model=AgentState)
async def modify_approval(
    agent_id: str, tool_name: str, runtime: RuntimeDep,
    body: Annotated[ModifyApprovalRequest | None, Body()] = None,
    requires_approval: Annotated[bool | None, Query()] = None,
) -> dict[str, Any]:
    """Whether calls to this tool pause for a human, on this agent (a tool rule)."""
    wanted = body.requires_approval if body is not None else requires_approval
    if wanted is None:
        raise unprocessable("requires_approval", "Field required")
    record = await agent_record(runtime, agent_id)
    if tool_name not in record.tool_names:
        raise HTTPException(404, detail=f"agent {agent_id!r} has no tool named {tool_name!r}")
    agent = await runtime.agent(agent_id)
    if agent.running:
        raise HTTPException(409, detail=f"agent {agent_id!r} is running; change approvals "
                                        "when the run ends")
    rules = [r for r in record.tool_rules
             if not (r.get("type") == "requires_approval" and r.get("tool_name") == tool_name)]
    if wanted:
        rules.append({"type": "requires_approval", "tool_name": tool_name})
    parsed = parse_rules(rules)
    await runtime.store.update_agent(agent_id, tool_rules=rules)
    agent.tool_rules = parsed
    agent.memory_changed()
    return await agent_state(runtime, await runtime.store.get_agent(agent_id))
