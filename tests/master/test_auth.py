"""API-key auth on HTTP and WebSocket."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess, RawPeer

KEY = "s3cret-key"


@pytest.fixture(scope="module")
def secured(scripted_llm: ScriptedOpenAIServer) -> Iterator[MasterProcess]:
    with MasterProcess(master_env(scripted_llm, OPENAGENT_API_KEY=KEY)) as m:
        yield m


@pytest.mark.parametrize("path", ["/agents", "/query/orchestrator-models"])
def test_http_needs_the_key(secured: MasterProcess, path: str) -> None:
    assert httpx.get(secured.base_url + path, timeout=5).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.get(secured.base_url + path, headers=wrong, timeout=5).status_code == 401
    right = {"Authorization": f"Bearer {KEY}"}
    assert httpx.get(secured.base_url + path, headers=right, timeout=5).status_code == 200


def test_post_query_needs_the_key(secured: MasterProcess) -> None:
    response = httpx.post(f"{secured.base_url}/query", json={"query": "hi"}, timeout=5)
    assert response.status_code == 401 and "OPENAGENT_API_KEY" in response.json()["detail"]


def test_health_is_open(secured: MasterProcess) -> None:
    assert httpx.get(f"{secured.base_url}/health", timeout=5).status_code == 200


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_docs_are_served_without_the_key(secured: MasterProcess, page: str) -> None:
    response = httpx.get(secured.base_url + page, timeout=5)
    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]
    assert "/openapi.json" in response.text


def test_openapi_document_is_open_and_declares_the_bearer_key(secured: MasterProcess) -> None:
    """The rule (README, "API docs"): the document is open; the routes it lists need the key."""
    response = httpx.get(f"{secured.base_url}/openapi.json", timeout=5)
    assert response.status_code == 200
    document = response.json()
    assert document["components"]["securitySchemes"]["OPENAGENT_API_KEY"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["OPENAGENT_API_KEY"]["description"],
    }
    assert document["paths"]["/agents"]["get"]["security"] == [{"OPENAGENT_API_KEY": []}]
    assert "security" not in document["paths"]["/health"]["get"]


async def test_websocket_without_key_is_closed_1008(secured: MasterProcess) -> None:
    for url, headers in [(secured.ws_url, None), (secured.ws_url + "?token=bad", None)]:
        async with asyncio.timeout(5), connect(url, additional_headers=headers) as ws:
            with pytest.raises(ConnectionClosed) as info:
                await ws.recv()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1008


@pytest.mark.parametrize("how", ["header", "query"])
async def test_websocket_with_key(secured: MasterProcess, how: str) -> None:
    if how == "header":
        peer = await RawPeer.connect(secured.ws_url, additional_headers={"Authorization": f"Bearer {KEY}"})
    else:
        peer = await RawPeer.connect(f"{secured.ws_url}?token={KEY}")
    try:
        await peer.register(f"auth-{how}")
    finally:
        await peer.close()


def test_auth_off_when_key_unset(master: MasterProcess) -> None:
    assert httpx.get(f"{master.base_url}/agents", timeout=5).status_code == 200
