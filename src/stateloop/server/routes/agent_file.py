"""Agent Files over REST, as Letta serves them: ``POST /v1/agents/import`` (a multipart
upload with Letta's form options) and ``GET``/``POST /v1/agents/{agent_id}/export``.

What stateloop cannot take of a file (a tool whose source does not compile, a block or tool
rule it cannot read) is left out and named in the answer's ``notes``, with the rest imported;
the ``strict`` form field refuses such a file instead. A block whose value is longer than its
limit, as Letta exports them, is kept with its limit raised (a note says so). A file that
cannot be imported at all is a 400 naming what is wrong (the field's path in the file), and
nothing is stored (a memory history the file carries is checked whole first). Export
answers the file as a JSON object, indented, as Letta does; tool variables are written with
empty values (the server never hands out secrets). The ``POST`` form's body may ask for the
agent's memory history too (``include_memory_history``), which an import keeps.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Header, HTTPException, Query, UploadFile
from fastapi.responses import Response

from ...agent_file import (
    MAX_FILE_BYTES,
    AgentFileError,
    ImportOptions,
    export_agents,
    import_agents,
)
from ...agent_file.reading import too_large
from ..deps import RuntimeDep
from ..models.agent_files import ExportAgentRequest, ImportedAgentsResponse
from ..models.requests import errors

router = APIRouter()
_FILE: dict[int | str, dict[str, Any]] = {200: {
    "description": "The Agent File",
    "content": {"application/json": {"schema": {"type": "object",
                                                "additionalProperties": True}}}}}


@router.post("/v1/agents/import", response_model=ImportedAgentsResponse,
             responses=errors(400), operation_id="import_agent")
async def import_agent(
    runtime: RuntimeDep,
    file: Annotated[UploadFile, File()],
    override_existing_tools: Annotated[bool, Form()] = True,
    strip_messages: Annotated[bool, Form()] = False,
    secrets: Annotated[str | None, Form()] = None,
    name: Annotated[str | None, Form()] = None,
    embedding: Annotated[str | None, Form()] = None,
    model: Annotated[str | None, Form()] = None,
    strict: Annotated[bool, Form(description=(
        "If set to True, a file holding anything stateloop cannot import (a tool whose source "
        "does not compile, a block or tool rule it cannot read) is refused whole instead of "
        "imported without it."))] = False,
    append_copy_suffix: Annotated[bool, Form(deprecated=True)] = True,
    override_name: Annotated[str | None, Form(deprecated=True)] = None,
    override_embedding_handle: Annotated[str | None, Form(deprecated=True)] = None,
    override_model_handle: Annotated[str | None, Form(deprecated=True)] = None,
    project_id: Annotated[str | None, Form(deprecated=True)] = None,
    env_vars_json: Annotated[str | None, Form(deprecated=True)] = None,
    x_override_embedding_model: Annotated[str | None, Header(
        alias="x-override-embedding-model")] = None,
) -> ImportedAgentsResponse:
    """Import an Agent File and recreate its agents; their ids."""
    data = await file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise HTTPException(400, detail=too_large(len(data), MAX_FILE_BYTES))
    options = ImportOptions(
        name=name or override_name, append_copy_suffix=append_copy_suffix,
        override_existing_tools=override_existing_tools, strip_messages=strip_messages,
        secrets=_secrets(secrets or env_vars_json), model=model or override_model_handle,
        embedding=embedding or override_embedding_handle or x_override_embedding_model,
        project_id=project_id, strict=strict, model_options=runtime.settings.model_options())
    try:
        result = await import_agents(data, store=runtime.store, options=options)
    except AgentFileError as exc:
        raise HTTPException(400, detail=str(exc)) from None
    return ImportedAgentsResponse(agent_ids=result.agent_ids, notes=result.notes)


@router.get("/v1/agents/{agent_id}/export", responses={**_FILE, **errors(400, 404)},
            response_class=Response, operation_id="export_agent")
async def export_agent(
    runtime: RuntimeDep, agent_id: str,
    max_steps: Annotated[int, Query(deprecated=True)] = 100,
    use_legacy_format: Annotated[bool, Query(deprecated=True)] = False,
    conversation_id: Annotated[str | None, Query()] = None,
    scrub_messages: Annotated[bool, Query()] = False,
) -> Response:
    """The agent as an Agent File."""
    if use_legacy_format:
        raise HTTPException(400, detail="Legacy format is not supported")
    return await _export(runtime, agent_id, scrub_messages)


@router.post("/v1/agents/{agent_id}/export", responses={**_FILE, **errors(404)},
             response_class=Response, operation_id="export_agent_with_skills")
async def export_agent_with_skills(runtime: RuntimeDep, agent_id: str,
                                   request: ExportAgentRequest | None = None) -> Response:
    """The agent as an Agent File with the skills given (each a name and its files, with a
    SKILL.md, or a source_url), written as Letta writes them; an import makes each a block
    ``skills/NAME``."""
    skills = [skill.model_dump() for skill in request.skills] if request else []
    return await _export(runtime, agent_id, bool(request and request.scrub_messages), skills,
                         memory_history=bool(request and request.include_memory_history))


async def _export(runtime: Any, agent_id: str, scrub_messages: bool,
                  skills: list[dict[str, Any]] | None = None, *,
                  memory_history: bool = False) -> Response:
    record = await runtime.store.get_agent(agent_id)  # 404 for an unknown id
    if record.id != agent_id:
        raise HTTPException(404, detail=f"agent with id {agent_id!r} not found")
    live = runtime.live(agent_id)
    if live is not None:
        await live.save()  # what a live agent has queued lands first
    data = await export_agents([agent_id], store=runtime.store, strip_messages=scrub_messages,
                               skills=skills or [], memory_history=memory_history)
    return Response(json.dumps(data, ensure_ascii=False, indent=2),
                    media_type="application/json")


def _secrets(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise HTTPException(400, detail="secrets must be a valid JSON string")
    return {str(k): str(v) for k, v in value.items()}
