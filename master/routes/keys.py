"""``/keys`` (create, list, revoke API keys; administrators) and ``GET /whoami`` (any key).

A key's secret is in the answer to ``POST /keys`` only: Redis holds its hash
(:mod:`master.access.keys`), the list shows no secret, and creating or revoking one is audited
(:mod:`master.access.audit`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from master.access import AuditAction, KeyStore, Permission, StoredKey, audit
from master.access.keys import may_decide_approvals
from master.auth import DEFAULT_TENANT, TENANT_PATTERN, Role, principal_of
from master.deps import Services, ServicesDep, needs
from master.errors import SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from protocol import ErrorCode

admin = APIRouter(tags=["keys"], dependencies=needs(Permission.ADMIN))
anyone = APIRouter(tags=["keys"], dependencies=needs(Permission.READ))

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]
Pattern = Annotated[str, Field(min_length=1, max_length=200)]


class KeyRequest(BaseModel):
    """The body of ``POST /keys``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: Name
    """Who or what holds the key (shown in lists, audit lines and ``/whoami``)."""
    role: Role
    """``admin``, ``client``, ``agent`` or ``viewer`` (the Security page's roles table)."""
    tenant: Annotated[str, Field(min_length=1, max_length=128, pattern=TENANT_PATTERN)] = DEFAULT_TENANT
    """The tenant whose objects the key creates and sees."""
    agent_ids: Annotated[list[Pattern], Field(max_length=100)] = Field(default_factory=list)
    """For the ``agent`` role: ``fnmatch`` patterns of the agent ids it may register or connect as
    (e.g. ``weather-*``); none: no agent id."""
    approves: Annotated[list[Pattern], Field(max_length=100)] = Field(default_factory=list)
    """``fnmatch`` patterns of the tools (``<agent_id>__<tool>``, e.g. ``bank__*``) whose approvals
    the key decides: once a key of the tenant has one matching a tool, only such keys decide that
    tool's approvals in the tenant, and never the key that asked. Only for roles that may decide
    approvals (``admin``, ``client``): refused (422) on an ``agent`` or ``viewer`` key."""

    @model_validator(mode="after")
    def _approves_needs_a_decider(self) -> KeyRequest:
        if self.approves and not may_decide_approvals(self.role):
            raise ValueError(
                f"'approves' is for keys that may decide approvals (roles admin and client): "
                f"a key of role {self.role.value!r} cannot decide them"
            )
        return self


class KeyInfo(BaseModel):
    """A stored key, without its secret."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    key_id: str
    name: str
    role: Role
    tenant: str
    agent_ids: list[str]
    approves: list[str]
    """Patterns of the tools whose approvals it decides."""
    created: float
    """Seconds since the epoch."""
    last_used: float | None = None
    """When a master last saw it used (written every few seconds; ``null``: never)."""


class CreatedKey(KeyInfo):
    """``POST /keys``: the key's record and its secret, shown this once."""

    secret: str
    """Send it as ``Authorization: Bearer <secret>``. Only its hash is stored: it cannot be shown again."""


class KeyList(BaseModel):
    keys: list[KeyInfo]


class Revoked(BaseModel):
    key_id: str
    revoked: bool


class WhoAmI(BaseModel):
    """``GET /whoami``: the caller's key."""

    key_id: str
    name: str
    role: Role
    tenant: str
    agent_ids: list[str]
    approves: list[str]


def _info(key: StoredKey) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "name": key.name,
        "role": key.role,
        "tenant": key.tenant,
        "agent_ids": list(key.agent_ids),
        "approves": list(key.approves),
        "created": key.created,
        "last_used": key.last_used,
    }


def _store(services: Services) -> KeyStore:
    if services.keys is None:  # pragma: no cover - the lifespan always builds it
        raise ApiError(ErrorCode.NOT_IMPLEMENTED, "stored keys are not available")
    return services.keys


_REDIS: dict[int | str, dict[str, Any]] = {503: error("Redis unavailable")}


@admin.post("/keys", response_model=CreatedKey, status_code=201, responses=_REDIS)
async def create_key(body: KeyRequest, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Create a key; the answer holds its secret, which is never shown again."""
    try:
        key, secret = await _store(services).create(
            name=body.name,
            role=body.role,
            tenant=body.tenant,
            agent_ids=body.agent_ids,
            approves=body.approves,
        )
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    audit(
        services.metrics,
        principal_of(request.scope),
        AuditAction.KEY_CREATED,
        created_key_id=key.key_id,
        created_key_name=key.name,
        created_role=key.role.value,
        created_tenant=key.tenant,
    )
    return {**_info(key), "secret": secret}


@admin.get("/keys", response_model=KeyList, responses=_REDIS)
async def list_keys(services: ServicesDep) -> dict[str, Any]:
    """Every stored key (never a secret), oldest first. The bootstrap key is not listed."""
    try:
        keys = await _store(services).list()
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    return {"keys": [_info(key) for key in keys]}


@admin.delete(
    "/keys/{key_id}", response_model=Revoked, responses={404: error("Unknown key (not_found)"), **_REDIS}
)
async def revoke_key(key_id: str, request: Request, services: ServicesDep) -> dict[str, Any]:
    """Revoke a key: every master refuses it from its next request on."""
    try:
        key = await _store(services).revoke(key_id)
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if key is None:
        raise ApiError(ErrorCode.NOT_FOUND, f"unknown key {key_id!r}")
    audit(
        services.metrics,
        principal_of(request.scope),
        AuditAction.KEY_REVOKED,
        revoked_key_id=key.key_id,
        revoked_key_name=key.name,
    )
    return {"key_id": key_id, "revoked": True}


@anyone.get("/whoami", response_model=WhoAmI)
async def whoami(request: Request) -> dict[str, Any]:
    """The caller's key: its id, name, role and tenant (the web UI shows them)."""
    principal = principal_of(request.scope)
    return {
        "key_id": principal.key_id,
        "name": principal.name,
        "role": principal.role,
        "tenant": principal.tenant,
        "agent_ids": list(principal.agent_ids),
        "approves": list(principal.approves),
    }
