"""``POST /query`` and ``GET /query/orchestrator-models``."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import JSONResponse

from master.deps import ServicesDep
from master.errors import QueryRejected
from master.prompts import PROMPT_PROFILES
from protocol import QueryRequest, QueryResponse

router = APIRouter(tags=["query"])


@router.post(
    "/query",
    response_model=QueryResponse,
    responses={
        400: {"model": QueryResponse, "description": "Model not allowed"},
        403: {"description": "OPENAGENT_HTTP_QUERY=0"},
        404: {"model": QueryResponse, "description": "Unknown or expired session_id"},
        501: {"model": QueryResponse, "description": "A requested feature is not implemented yet"},
        502: {"model": QueryResponse, "description": "The LLM provider failed"},
        503: {"model": QueryResponse, "description": "No LLM configured, or Redis unavailable"},
    },
)
async def post_query(body: QueryRequest, services: ServicesDep) -> Any:
    """Ask the orchestrator. The answer has the fields of a WebSocket ``query_result``."""
    if not services.settings.openagent_http_query:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail="POST /query is disabled (OPENAGENT_HTTP_QUERY=0)"
        )
    query_id = f"http-{uuid.uuid4().hex}"
    try:
        return await services.queries.run(body, query_id)
    except QueryRejected as exc:
        failed = QueryResponse(
            query_id=query_id,
            session_id=body.session_id,
            success=False,
            error=exc.message,
            error_code=exc.code,
        )
        return JSONResponse(failed.model_dump(mode="json"), status_code=exc.status_code)


@router.get("/query/orchestrator-models")
async def orchestrator_models(services: ServicesDep) -> dict[str, Any]:
    """The models and prompt profiles a query may ask for."""
    return {**services.catalog.as_dict(), "prompt_profiles": list(PROMPT_PROFILES)}
