"""The caller's principal from its credentials, and the 503 when a stored key cannot be checked."""

from __future__ import annotations

import httpx
import pytest
import redis.asyncio as aioredis

from master.access import Authenticator, KeyStore
from master.access.keys import digest_of
from master.auth import BOOTSTRAP_ADMIN, Role
from master.errors import SessionStoreUnavailable
from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import in_process_master

KEY = "authenticator-bootstrap"


def scope(token: str | None) -> dict[str, object]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return {"type": "http", "headers": headers, "query_string": b""}


class DownKeys(KeyStore):
    """A key store whose Redis does not answer."""

    def __init__(self) -> None:
        pass

    async def lookup(self, secret: str) -> None:  # type: ignore[override]
        raise SessionStoreUnavailable("cannot check the API key: Redis failed (connection refused)")


async def test_the_bootstrap_key_needs_no_key_store() -> None:
    access = Authenticator(KEY, DownKeys())
    assert await access.resolve(scope(KEY)) is BOOTSTRAP_ADMIN
    assert access.bootstrap(scope(KEY)) and not access.bootstrap(scope("oak_other"))
    assert await access.resolve(scope(None)) is None
    assert await access.resolve(scope("not-a-key")) is None  # neither stored nor a JWT: no look-up
    with pytest.raises(SessionStoreUnavailable):
        await access.resolve(scope("oak_whatever"))


async def test_auth_off_makes_everyone_the_administrator() -> None:
    assert await Authenticator(None).resolve(scope(None)) is BOOTSTRAP_ADMIN


async def test_a_stored_key_resolves_to_its_principal(redis_client: aioredis.Redis) -> None:
    keys = KeyStore(redis_client)
    key, secret = await keys.create(name="bot", role=Role.AGENT, tenant="t1", agent_ids=["w-*"])
    principal = await Authenticator(KEY, keys).resolve(scope(secret))
    assert principal is not None
    assert (principal.key_id, principal.role, principal.tenant, principal.agent_ids) == (
        key.key_id,
        Role.AGENT,
        "t1",
        ("w-*",),
    )
    assert await redis_client.hget("api_keys", digest_of(secret)) is not None
    await keys.flush()
    assert await redis_client.hget("api_keys:last_used", key.key_id) is not None
    await keys.revoke(key.key_id)


async def test_a_stored_key_gets_503_while_redis_is_down_and_the_bootstrap_key_works() -> None:
    async with in_process_master(
        FunctionChatModel(lambda m, t: ChatResult("ok")), openagent_api_key=KEY
    ) as master:
        assert master.services.access is not None
        master.services.access.keys = DownKeys()
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            down = await http.get("/whoami", headers={"Authorization": "Bearer oak_some-key"})
            assert down.status_code == 503 and down.json()["error_code"] == "session_store_unavailable"
            lean = await http.post("/query", json={"query": "hi"}, headers={"Authorization": "Bearer oak_x"})
            assert lean.status_code == 503
            ok = await http.post("/query", json={"query": "hi"}, headers={"Authorization": f"Bearer {KEY}"})
            assert ok.status_code == 200 and ok.json()["answer"] == "ok"
