"""``/internal/collaborations``: start a collaboration directly, and read the recorded ones.

The orchestrator starts collaborations itself when a query needs them; these endpoints
run the same :meth:`CollaborationManager.run <master.collaboration.CollaborationManager.run>`
without an LLM (operators, scripts and the integration tests use them), and show what
Redis holds.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator

from master.auth import Scope
from master.deps import PrincipalDep, ScopeDep, ServicesDep
from master.errors import CollaborationRejected, SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from protocol import AGENT_ID_PATTERN, ErrorCode

router = APIRouter(prefix="/internal/collaborations", tags=["collaboration"])

SessionId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")]


class CollaborationRequest(BaseModel):
    """The body of ``POST /internal/collaborations``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    agents: Annotated[
        list[Annotated[str, Field(pattern=AGENT_ID_PATTERN)]],
        Field(min_length=2, max_length=64, json_schema_extra={"uniqueItems": True}),
    ]
    """At least two distinct connected agents with ``supports_collaboration``; the first is the initiator."""
    task: Annotated[str, Field(min_length=1, max_length=100_000, pattern=r"\S")]
    """What the agents should work out together."""
    parent_session_id: SessionId | None = None
    """Orchestrator session that gets the ``collaboration`` turn; omit to start a new one."""
    context: dict[str, Any] | None = None
    """Extra context sent to every agent in ``collaboration_start``."""

    @field_validator("agents")
    @classmethod
    def _distinct(cls, agents: list[str]) -> list[str]:
        repeated = sorted({agent for agent in agents if agents.count(agent) > 1})
        if repeated:
            raise ValueError(f"agent {repeated[0]!r} is listed twice")
        return agents


class CollaborationOutcome(BaseModel):
    """How a collaboration ended (``POST /internal/collaborations``)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    collab_session_id: str
    parent_session_id: str
    """The orchestrator session that got the ``collaboration`` turn."""
    agents: list[str]
    """The agents, initiator first."""
    task: str
    summary: str
    """The ending peer's summary, or the master's explanation when it ended the session."""
    message_count: int
    """``peer_message`` frames relayed."""
    reason: str
    """``completed``, ``timeout``, ``max_messages``, ``peer_disconnected``, ``cancelled``,
    ``internal_error``, ``shutdown``, or the reason a peer gave when it gave up."""
    ended_by: str | None
    """The agent that sent ``collaboration_end``; ``null`` when the master ended it."""
    transcript: list[dict[str, Any]]
    """Every entry of the session: handshakes, messages, end."""
    completed: bool
    """Whether a peer ended the session normally."""


class CollaborationIds(BaseModel):
    """``GET /internal/collaborations``."""

    parent_session_id: str
    collab_session_ids: list[str]


class CollaborationDocument(BaseModel):
    """``GET /internal/collaborations/{id}``: the recorded ``collab:{id}`` document."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    collab_session_id: str
    parent_session_id: str | None = None
    """The orchestrator session it was started from."""
    entries: list[dict[str, Any]] = []
    """Every entry, oldest first: handshakes, messages, end."""


def _unavailable(exc: SessionStoreUnavailable) -> ApiError:
    return ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc))


@router.post(
    "",
    response_model=CollaborationOutcome,
    responses={
        400: error(
            "Fewer than two agents, a duplicate, an empty task, or an agent that is not connected (unknown_agent)"
        ),
        403: error("OPENAGENT_COLLABORATION=0"),
        404: error("parent_session_id is unknown"),
        409: error("An agent does not support collaboration"),
        503: error("Redis unavailable"),
    },
)
async def start_collaboration(
    body: CollaborationRequest, services: ServicesDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Run a collaboration to its end and answer its outcome (summary, reason, transcript)."""
    manager = services.collaboration
    parent = body.parent_session_id
    scope = Scope.of(principal)
    try:
        if parent is None:
            parent = services.sessions.new_session_id()
        elif manager.enabled and await services.sessions.load(parent, scope) is None:
            raise ApiError(
                ErrorCode.UNKNOWN_SESSION,
                f"unknown or expired session {parent!r}; omit parent_session_id to start a new session",
            )
        outcome = await manager.run(
            parent_session_id=parent,
            agent_ids=body.agents,
            task=body.task,
            scope=scope,
            context=body.context,
            tenant=principal.tenant,
        )
    except CollaborationRejected as exc:
        raise ApiError(exc.code, exc.message) from exc
    except SessionStoreUnavailable as exc:
        raise _unavailable(exc) from exc
    return outcome.as_dict()


@router.get("", response_model=CollaborationIds, responses={503: error("Redis unavailable")})
async def list_collaborations(
    services: ServicesDep,
    scope: ScopeDep,
    parent_session_id: Annotated[str, Query(min_length=1, max_length=128)],
) -> dict[str, Any]:
    """The ids of the collaborations started from an orchestrator session (``collab:by_parent:{id}``;
    none for another tenant's session)."""
    try:
        visible = await services.sessions.visible(parent_session_id, scope)
        ids = await services.collaboration.for_parent(parent_session_id, scope) if visible else []
    except SessionStoreUnavailable as exc:
        raise _unavailable(exc) from exc
    return {"parent_session_id": parent_session_id, "collab_session_ids": ids}


@router.get(
    "/{collab_session_id}",
    response_model=CollaborationDocument,
    response_model_exclude_unset=True,
    responses={404: error("Unknown or expired collaboration session"), 503: error("Redis unavailable")},
)
async def get_collaboration(collab_session_id: str, services: ServicesDep, scope: ScopeDep) -> dict[str, Any]:
    """The recorded session: the ``collab:{id}`` document (metadata and every entry); another
    tenant's is unknown (404)."""
    try:
        document = await services.collaboration.load(collab_session_id, scope)
    except SessionStoreUnavailable as exc:
        raise _unavailable(exc) from exc
    if document is None:
        raise ApiError(
            ErrorCode.UNKNOWN_COLLABORATION, f"unknown or expired collaboration session {collab_session_id!r}"
        )
    return document
