"""Credentials made over the API, the audit log and usage: ``/v1/api-keys`` (an admin's:
create, list, rename, expire, revoke), Letta's ``/v1/client-side-access-tokens`` (an admin's
or a write key's, for agents of its project), ``/v1/audit`` and ``/v1/usage`` (an admin's).
Who may call each is ``permissions.need``; a secret is in the answer that creates it and
nowhere else."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import AwareDatetime, BaseModel, Field, field_validator

from ...store.access import AuditRecord, KeyRecord, TokenRecord
from ...store.projects import acting_project
from ...store.records import Page
from ..browsers import origin_of
from ..credentials import (
    ADMIN,
    DEFAULT_PROJECT,
    KEY_PREFIX,
    TOKEN_PREFIX,
    Principal,
    new_secret,
    token_id,
)
from ..deps import RuntimeDep
from ..models.requests import Strict, errors
from ..models.responses import iso
from ..permissions import Access

router = APIRouter(tags=["access"])

Name = Annotated[str, Field(min_length=1, max_length=200)]
Project = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")]
TOKEN_LIFETIME = 300.0  # Letta's: five minutes when no expires_at is given


def principal_of(request: Request) -> Principal:
    held = request.scope.get("stateloop.access")
    return ADMIN if held is None else held.principal


def _future(moment: datetime | None, field: str) -> float | None:
    if moment is None:
        return None
    at = moment.timestamp()
    if at <= time.time():
        raise HTTPException(422, [{"loc": ["body", field], "msg": "must be in the future",
                                   "type": "value_error"}])
    return at


class KeyCreate(Strict):
    name: Name
    role: Literal["admin", "write", "read"] = "write"
    project: Project | None = None  # the project the request acts in, else "default"
    expires_at: AwareDatetime | None = None


class KeyUpdate(Strict):
    name: Name | None = None
    expires_at: AwareDatetime | None = None


class ApiKey(BaseModel):
    id: str
    name: str
    role: str
    project: str
    created_by: str
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None


class NewApiKey(ApiKey):
    key: str = Field(description="The secret: shown here once, never again")


def _key_view(record: KeyRecord) -> dict[str, Any]:
    return {"id": record.id, "name": record.name, "role": record.role,
            "project": record.project, "created_by": record.created_by,
            "created_at": iso(record.created_at), "expires_at": iso(record.expires_at),
            "revoked_at": iso(record.revoked_at)}


@router.post("/v1/api-keys", response_model=NewApiKey, status_code=201)
async def create_key(body: KeyCreate, request: Request, runtime: RuntimeDep) -> dict[str, Any]:
    ident, secret, digest = new_secret(KEY_PREFIX)
    project = body.project or acting_project.get() or DEFAULT_PROJECT
    record = KeyRecord(id=ident, name=body.name, project=project, role=body.role,
                       digest=digest, created_by=principal_of(request).id,
                       created_at=time.time(),
                       expires_at=_future(body.expires_at, "expires_at"))
    await runtime.store.add_api_key(record)
    return {**_key_view(record), "key": secret}


@router.get("/v1/api-keys", response_model=list[ApiKey])
async def list_keys(runtime: RuntimeDep, after: str | None = None,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                    project: str | None = None) -> list[dict[str, Any]]:
    records = await runtime.store.list_api_keys(Page(after=after, limit=limit),
                                                project=project)
    return [_key_view(record) for record in records]


async def _existing(runtime: RuntimeDep, key_id: str) -> KeyRecord:
    record = await runtime.store.get_api_key(key_id)
    if record is None:
        raise HTTPException(404, f"API key {key_id!r} not found")
    return record


@router.get("/v1/api-keys/{key_id}", response_model=ApiKey, responses=errors(404))
async def get_key(key_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    return _key_view(await _existing(runtime, key_id))


@router.patch("/v1/api-keys/{key_id}", response_model=ApiKey, responses=errors(404))
async def modify_key(key_id: str, body: KeyUpdate, runtime: RuntimeDep) -> dict[str, Any]:
    await _existing(runtime, key_id)
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["name"] = body.name
    if "expires_at" in body.model_fields_set:
        changes["expires_at"] = _future(body.expires_at, "expires_at")
    record = await runtime.store.update_api_key(key_id, **changes)
    assert record is not None
    return _key_view(record)


@router.delete("/v1/api-keys/{key_id}", response_model=ApiKey, responses=errors(404))
async def revoke_key(key_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Revoke the key: refused from now on by every process (its row stays, for the log)."""
    found = await _existing(runtime, key_id)
    record = await runtime.store.update_api_key(
        key_id, revoked_at=found.revoked_at or time.time())
    assert record is not None
    return _key_view(record)


class PolicyEntry(Strict):
    type: Literal["agent"]
    id: Annotated[str, Field(min_length=1, max_length=200)]
    access: list[Access] = Field(min_length=1, max_length=4)


class TokenCreate(Strict):
    hostname: Annotated[str, Field(min_length=1, max_length=300)]
    policy: list[PolicyEntry] = Field(min_length=1, max_length=100)
    expires_at: AwareDatetime | None = None

    @field_validator("hostname")
    @classmethod
    def _origin(cls, value: str) -> str:
        origin = origin_of(value)
        if origin is None:
            raise ValueError("give the full URL of the client-side application, with its "
                             "protocol: http://... or https://...")
        return origin


class PolicyData(BaseModel):
    id: str
    access: list[str]
    type: Literal["agent"] = "agent"


class TokenPolicy(BaseModel):
    data: list[PolicyData]
    version: Literal["1"] = "1"


class AccessToken(BaseModel):
    token: str
    expiresAt: str  # Letta's name
    hostname: str
    policy: TokenPolicy


class AccessTokenList(BaseModel):
    tokens: list[AccessToken]
    hasNextPage: bool  # Letta's name


def _token_view(record: TokenRecord, token: str) -> dict[str, Any]:
    return {"token": token, "expiresAt": iso(record.expires_at), "hostname": record.hostname,
            "policy": {"data": record.policy, "version": "1"}}


@router.post("/v1/client-side-access-tokens", response_model=AccessToken,
             responses=errors(404))
async def create_token(body: TokenCreate, request: Request,
                       runtime: RuntimeDep) -> dict[str, Any]:
    """A token for pages of ``hostname`` to call the agents of ``policy`` with its
    accesses, until ``expires_at`` (five minutes by default). The agents must exist."""
    principal = principal_of(request)
    acting = acting_project.get()
    projects = set()
    for entry in body.policy:
        found = await runtime.store.agent_project(entry.id, by_name=False)
        if found is None or acting not in (None, found):
            raise HTTPException(404, f"agent with id {entry.id!r} not found")
        projects.add(found)
    if len(projects) > 1:
        raise HTTPException(422, [{"loc": ["body", "policy"], "type": "value_error",
                                   "msg": "a token's agents must be of one project"}])
    now = time.time()
    expires = _future(body.expires_at, "expires_at") or now + TOKEN_LIFETIME
    ident, secret, digest = new_secret(TOKEN_PREFIX)
    record = TokenRecord(id=ident, digest=digest, hostname=body.hostname,
                         policy=[entry.model_dump() for entry in body.policy],
                         project=projects.pop(), created_by=principal.id,
                         created_at=now, expires_at=expires)
    await runtime.store.add_access_token(record)
    return _token_view(record, secret)


@router.get("/v1/client-side-access-tokens", response_model=AccessTokenList)
async def list_tokens(runtime: RuntimeDep,
                      agentId: str | None = None,  # Letta's name
                      agent_id: str | None = None, offset: Annotated[int, Query(ge=0)] = 0,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 10) -> dict[str, Any]:
    """Unexpired tokens, newest first. ``token`` is each one's handle (``ck-sl-<id>``),
    which ``DELETE`` takes: the secret was shown once, when it was made."""
    records, more = await runtime.store.list_access_tokens(
        now=time.time(), offset=offset, limit=limit, agent_id=agentId or agent_id,
        project=acting_project.get())
    return {"tokens": [_token_view(r, f"{TOKEN_PREFIX}{r.id}") for r in records],
            "hasNextPage": more}


@router.delete("/v1/client-side-access-tokens/{token}", responses=errors(404))
async def delete_token(token: str, runtime: RuntimeDep) -> dict[str, Any]:
    """Revoke a token, given whole or by the handle a listing shows: refused at once by
    every process (the store is read on each request that presents one)."""
    ident = token_id(token)
    if ident is None or not await runtime.store.delete_access_token(
            ident, project=acting_project.get()):
        raise HTTPException(404, "client-side access token not found")
    return {"success": True}


class AuditEntry(BaseModel):
    seq: int
    at: str | None
    credential: str
    project: str | None
    method: str
    route: str
    path: str
    status: int


def _audit_view(record: AuditRecord) -> dict[str, Any]:
    return {"seq": record.seq, "at": iso(record.at),
            "credential": record.credential, "project": record.project,
            "method": record.method, "route": record.route, "path": record.path,
            "status": record.status}


@router.get("/v1/audit", response_model=list[AuditEntry])
async def list_audit(runtime: RuntimeDep,
                     before: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                     credential: str | None = None, project: str | None = None,
                     ) -> list[dict[str, Any]]:
    """Who created, changed or deleted what: one entry per write request a credential made,
    newest first; ``before`` is the ``seq`` of the last entry of the previous page."""
    records = await runtime.store.list_audit(before=before, limit=limit,
                                             credential=credential, project=project)
    return [_audit_view(record) for record in records]


class UsageDay(BaseModel):
    project: str
    day: str
    tokens: int
    runs: int


@router.get("/v1/usage", response_model=list[UsageDay])
async def list_usage(runtime: RuntimeDep, days: Annotated[int, Query(ge=1, le=366)] = 30,
                     project: str | None = None) -> list[dict[str, Any]]:
    """Model tokens (input and output) and runs each project used each UTC day, newest
    first, for the last ``days`` days (today among them). Counted on servers with
    credentials or a daily limit, for runs started by a request."""
    since = datetime.fromtimestamp(time.time() - (days - 1) * 86400, UTC).strftime("%Y-%m-%d")
    return await runtime.store.list_usage(since=since, project=project)
