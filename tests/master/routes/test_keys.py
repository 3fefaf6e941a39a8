"""``/keys`` and ``/whoami``: stored keys, revoked at once on every master, whose secret is
never logged, shown again or stored; and the audit trail of administrative actions."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis

from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import TEST_REDIS_URL, InProcessMaster, RawPeer, in_process_master

KEY = "keys-bootstrap-key"
ADMIN = {"Authorization": f"Bearer {KEY}"}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
async def two_masters() -> AsyncIterator[tuple[InProcessMaster, InProcessMaster]]:
    llm = FunctionChatModel(lambda m, t: ChatResult("ok"))
    async with (
        in_process_master(llm, openagent_api_key=KEY) as first,
        in_process_master(llm, openagent_api_key=KEY) as second,
    ):
        yield first, second


async def test_a_key_is_created_listed_used_and_revoked_on_every_master(
    two_masters: tuple[InProcessMaster, InProcessMaster],
) -> None:
    first, second = two_masters
    async with httpx.AsyncClient(timeout=30) as http:
        created = await http.post(
            f"{first.base_url}/keys",
            json={"name": "ci bot", "role": "client", "tenant": "team-a", "agent_ids": []},
            headers=ADMIN,
        )
        assert created.status_code == 201, created.text
        key = created.json()
        assert key["secret"].startswith("oak_") and key["role"] == "client" and key["tenant"] == "team-a"

        me = await http.get(f"{second.base_url}/whoami", headers=bearer(key["secret"]))
        assert me.status_code == 200 and me.json()["name"] == "ci bot"
        listed = (await http.get(f"{second.base_url}/keys", headers=ADMIN)).json()["keys"]
        (row,) = [k for k in listed if k["key_id"] == key["key_id"]]
        assert "secret" not in row and row["last_used"] is not None  # the second master's use

        revoked = await http.delete(f"{first.base_url}/keys/{key['key_id']}", headers=ADMIN)
        assert revoked.json() == {"key_id": key["key_id"], "revoked": True}
        for master in (second, first):  # at once, on the master that did not revoke it too
            refused = await http.get(f"{master.base_url}/whoami", headers=bearer(key["secret"]))
            assert refused.status_code == 401 and refused.json()["error_code"] == "unauthorized"
        again = await http.delete(f"{first.base_url}/keys/{key['key_id']}", headers=ADMIN)
        assert again.status_code == 404 and again.json()["error_code"] == "not_found"


async def test_a_revoked_key_cannot_open_a_websocket(
    two_masters: tuple[InProcessMaster, InProcessMaster],
) -> None:
    first, second = two_masters
    async with httpx.AsyncClient(timeout=30) as http:
        key = (
            await http.post(f"{first.base_url}/keys", json={"name": "a", "role": "client"}, headers=ADMIN)
        ).json()
        peer = await RawPeer.connect(f"{second.ws_url}?token={key['secret']}")
        await peer.register("asker", role="query")
        await peer.close()
        await http.delete(f"{first.base_url}/keys/{key['key_id']}", headers=ADMIN)
    peer = await RawPeer.connect(f"{second.ws_url}?token={key['secret']}")
    try:
        await peer.send({"type": "ping"})
        with pytest.raises(Exception) as closed:
            await peer.recv()
        assert getattr(getattr(closed.value, "rcvd", None), "code", None) == 1008
    finally:
        await peer.close()


async def test_an_unknown_role_or_extra_field_is_refused(
    two_masters: tuple[InProcessMaster, InProcessMaster],
) -> None:
    first, _ = two_masters
    async with httpx.AsyncClient(base_url=first.base_url, timeout=30) as http:
        bad = await http.post("/keys", json={"name": "x", "role": "root"}, headers=ADMIN)
        assert bad.status_code == 422 and "role" in bad.text
        bad = await http.post("/keys", json={"name": "x", "role": "client", "secret": "mine"}, headers=ADMIN)
        assert bad.status_code == 422


async def test_the_secret_is_in_no_log_line_later_response_or_redis_value(
    two_masters: tuple[InProcessMaster, InProcessMaster],
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = two_masters
    caplog.set_level(logging.DEBUG)
    later: list[str] = []
    async with httpx.AsyncClient(timeout=30) as http:
        created = await http.post(
            f"{first.base_url}/keys", json={"name": "leak check", "role": "admin"}, headers=ADMIN
        )
        key = created.json()
        secret = key["secret"]
        for master in (first, second):
            for method, path in (
                ("GET", "/whoami"),
                ("GET", "/keys"),
                ("GET", "/metrics"),
                ("GET", "/agents"),
            ):
                later.append(
                    (await http.request(method, f"{master.base_url}{path}", headers=bearer(secret))).text
                )
            later.append(
                (
                    await http.post(f"{master.base_url}/query", json={"query": "hi"}, headers=bearer(secret))
                ).text
            )
            later.append((await http.get(f"{master.base_url}/whoami", headers=bearer(secret + "x"))).text)
        peer = await RawPeer.connect(f"{first.ws_url}?token={secret}")
        await peer.register("leak-check-agent")
        await peer.close()
        await first.services.keys.flush()  # type: ignore[union-attr]
        later.append(
            (await http.delete(f"{first.base_url}/keys/{key['key_id']}", headers=bearer(secret))).text
        )
    assert all(secret not in text for text in later)
    lines = [record.getMessage() for record in caplog.records] + [caplog.text]
    assert all(secret not in line for line in lines)
    assert any("audit key_created by key bootstrap" in line and "leak check" in line for line in lines)
    assert any("audit key_revoked by key " + key["key_id"] in line for line in lines)
    # Read as bytes: other tests leave binary values (A2A tasks are protobuf) in the same database.
    raw = aioredis.Redis.from_url(TEST_REDIS_URL)
    values: list[bytes] = []
    try:
        async for name in raw.scan_iter(count=500):
            kind = (await raw.type(name)).decode()
            if kind == "string":
                values.append(await raw.get(name) or b"")
            elif kind == "hash":
                values += [k + b"=" + v for k, v in (await raw.hgetall(name)).items()]
            elif kind == "list":
                values += await raw.lrange(name, 0, -1)
            elif kind in ("set", "zset"):
                values += list(await raw.zrange(name, 0, -1) if kind == "zset" else await raw.smembers(name))
            values.append(name)
    finally:
        await raw.aclose()
    assert values and all(secret.encode() not in value for value in values)


async def test_administrative_actions_are_counted(
    two_masters: tuple[InProcessMaster, InProcessMaster],
) -> None:
    first, _ = two_masters
    async with httpx.AsyncClient(base_url=first.base_url, timeout=30) as http:
        key = (await http.post("/keys", json={"name": "m", "role": "viewer"}, headers=ADMIN)).json()
        await http.delete(f"/keys/{key['key_id']}", headers=ADMIN)
        metrics = (await http.get("/metrics", headers=ADMIN)).text
    assert 'openagent_audit_events_total{action="key_created"} 1.0' in metrics
    assert 'openagent_audit_events_total{action="key_revoked"} 1.0' in metrics


async def test_approves_is_refused_on_a_key_that_cannot_decide_approvals(
    two_masters: tuple[InProcessMaster, InProcessMaster],
) -> None:
    """Deciding approvals needs the ``query`` permission: ``approves`` on an ``agent`` or
    ``viewer`` key is a 422 naming the rule, and no key is stored."""
    first, _ = two_masters
    async with httpx.AsyncClient(base_url=first.base_url, timeout=30) as http:
        before = len((await http.get("/keys", headers=ADMIN)).json()["keys"])
        for role in ("agent", "viewer"):
            bad = await http.post(
                "/keys", json={"name": "x", "role": role, "approves": ["bank__*"]}, headers=ADMIN
            )
            assert bad.status_code == 422, bad.text
            assert "'approves' is for keys that may decide approvals" in bad.text
            assert f"role {role!r} cannot decide them" in bad.text
        assert len((await http.get("/keys", headers=ADMIN)).json()["keys"]) == before
        made = await http.post(
            "/keys", json={"name": "treasurer", "role": "client", "approves": ["bank__*"]}, headers=ADMIN
        )
        assert made.status_code == 201 and made.json()["approves"] == ["bank__*"]
        await http.delete(f"/keys/{made.json()['key_id']}", headers=ADMIN)
