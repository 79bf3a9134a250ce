"""``/v1/tools`` operations besides the registry's own: run source once in the sandbox, read a
schema from source, search the registered tools, write the built-in tools anew."""

from __future__ import annotations

import re
from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import Field

from ...errors import ToolDefinitionError
from ...messages import ToolCall, new_call_id
from ...store import ToolRecord
from ...tools.execution import execute_tool, result_message
from ...tools.sandbox import check_source, describe_source, sandboxed_tool
from ...tools.source_reader import SourceTooLarge
from ..deps import RuntimeDep
from ..models.requests import Lenient, ToolEnv, errors
from ..models.responses import Response, Tool
from ..services.creation import unprocessable
from ..services.messages import to_letta
from ..services.runtime import RETURN_CHAR_LIMIT
from ..services.views import tool_view

router = APIRouter(prefix="/v1/tools", tags=["tools"])


def _python_only(source_type: str | None, field: str = "source_type") -> None:
    if (source_type or "python") != "python":
        raise unprocessable(field, f"only 'python' is supported, not {source_type!r}")


class ToolRunFromSource(Lenient):
    source_code: str
    args: dict[str, Any]
    env_vars: ToolEnv = None
    name: str | None = None
    source_type: str | None = None
    args_json_schema: dict[str, Any] | None = None
    json_schema: dict[str, Any] | None = None
    pip_requirements: list[dict[str, Any]] | None = None
    npm_requirements: list[dict[str, Any]] | None = None


@router.post("/run", responses=errors(413, 503))
async def run_tool_from_source(body: ToolRunFromSource, runtime: RuntimeDep) -> dict[str, Any]:
    """Run ``source_code``'s function (``name``, or the source's one tool) on ``args`` in a
    sandbox of its own, with ``env_vars`` over the sandbox's variables; nothing is stored.
    The answer is Letta's ``ToolReturnMessage``: a failure is ``status: error`` with the
    traceback in ``stderr``. Requirements are not installed: the sandbox has what the
    server has."""
    _python_only(body.source_type)
    refused = runtime.source_tools_refused()
    if refused:
        raise HTTPException(503, detail=refused)
    try:
        signature = await runtime.sources.signature(body.source_code, body.name)
        name = check_source(signature, body.name)
        schema = ({**body.json_schema, "name": name} if body.json_schema
                  else describe_source(signature, name, body.args_json_schema))
    except SourceTooLarge as exc:
        raise HTTPException(413, detail=str(exc)) from exc
    except ToolDefinitionError as exc:
        field = "args_json_schema" if "args_json_schema" in str(exc) else "source_code"
        raise unprocessable(field, exc) from exc
    if not isinstance(schema.get("parameters", {}), dict):
        raise unprocessable("json_schema.parameters", "must be a JSON schema object")
    tool = sandboxed_tool(body.source_code, schema, limits=runtime.limits,
                          isolation=runtime.isolation(name, body.env_vars),
                          return_char_limit=RETURN_CHAR_LIMIT)
    call = ToolCall(new_call_id("toolcall"), name, body.args)
    output = await execute_tool(call, body.args, {name: tool})
    [frame] = to_letta(result_message(call, output), assistant_message=False)
    return frame


class CodeInput(Lenient):
    code: str
    source_type: str | None = "python"


@router.post("/generate-schema", responses=errors(413))
async def generate_json_schema(body: CodeInput, runtime: RuntimeDep) -> dict[str, Any]:
    """The JSON schema (name, description, parameters) of the one function in ``code``, read
    from its signature and docstring; the code is parsed in a child process, never run."""
    _python_only(body.source_type)
    try:
        return describe_source(await runtime.sources.signature(body.code))
    except SourceTooLarge as exc:
        raise HTTPException(413, detail=str(exc)) from exc
    except ToolDefinitionError as exc:
        raise unprocessable("code", exc) from exc


class ToolSearchRequest(Lenient):
    query: str | None = None
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    tool_types: list[str] | None = None
    tags: list[str] | None = None
    limit: int = Field(default=50, ge=1, le=100)


class ToolSearchResult(Response):
    tool: Tool
    embedded_text: str | None = None
    fts_rank: int | None = None
    vector_rank: int | None = None
    combined_score: float


_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def match_score(words: list[str], record: ToolRecord) -> float:
    """How well a tool matches the query's words, 0 to 1: each word scores 3 when it is a
    word of the tool's name, 2 when it is inside the name, 1 when it is a word of the
    description (or a prefix of one); the sum over the most the words could score."""
    if not words:
        return 0.0
    name = record.name.lower()
    name_words = set(_words(name))
    described = _words(record.description or "")
    total = 0
    for word in words:
        if word in name_words:
            total += 3
        elif word in name:
            total += 2
        elif any(d.startswith(word) for d in described):
            total += 1
    return total / (3 * len(words))


@router.post("/search", response_model=list[ToolSearchResult])
async def search_tools(body: ToolSearchRequest, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Registered tools matching ``query``, best first, filtered by ``tool_types`` and
    ``tags`` (any of them). Ranking is lexical in every ``search_mode`` (tools have no
    embeddings here): ``match_score`` on the name and description, ties by name; without a
    query, every tool the filters keep, by name."""
    records = await runtime.store.list_tools(None)
    if body.tool_types:
        records = [r for r in records if r.tool_type in body.tool_types]
    if body.tags:
        records = [r for r in records if set(r.tags or ()) & set(body.tags)]
    words = _words(body.query or "")
    scored = sorted(((match_score(words, r), r) for r in records),
                    key=lambda pair: (-pair[0], pair[1].name))
    if words:
        scored = [(score, r) for score, r in scored if score > 0]
    return [{"tool": tool_view(record), "combined_score": score,
             "embedded_text": f"{record.name}: {record.description or ''}",
             "fts_rank": rank if words else None, "vector_rank": None}
            for rank, (score, record) in enumerate(scored[:body.limit], start=1)]


@router.post("/add-base-tools", response_model=list[Tool])
async def add_base_tools(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Write the built-in tools anew (as this version defines them); returns them."""
    return [tool_view(record) for record in await runtime.upsert_builtin_tools()]
