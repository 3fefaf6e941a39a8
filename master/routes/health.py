"""``GET /health``: liveness (no auth)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, Any]:
    """The master is up."""
    return {"status": "ok"}
