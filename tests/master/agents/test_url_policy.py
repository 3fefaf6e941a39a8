"""The agent URL policy: refused addresses at registration, after resolution and on redirects."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from master.agents.a2a_client import A2AConnector
from master.agents.policy_transport import PolicyTransport, PolicyTransport2
from master.agents.url_policy import AddressRefused, AgentUrlPolicy, UrlRefused
from master.auth import BOOTSTRAP_ADMIN, Role
from master.errors import AgentUnavailable
from master.settings import Settings
from tests.factories import InProcessMaster, RawPeer, free_port, in_process_master, serve_app
from tests.master.agents.connections import Connections, Rebinding

TOOL = {
    "name": "echo",
    "description": "Echo text",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    "endpoint": "/run",
}
METADATA = "169.254.169.254"


def fake_resolver(mapping: dict[str, list[str]]) -> Any:
    """A resolver answering from ``mapping`` (a name not in it does not resolve)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host not in mapping:
            raise OSError(f"{host}: no such name (fake resolver)")
        return mapping[host]

    return resolve


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    "host",
    [
        METADATA,
        "169.254.1.2",
        "fe80::1",
        "fd00:ec2::254",
        "100.100.100.200",
        "224.0.0.1",
        "ff02::1",
        "0.0.0.0",
        "::",
        "255.255.255.255",
        "::ffff:169.254.169.254",
        "metadata.google.internal",
        "METADATA.GOOGLE.INTERNAL.",
    ],
)
def test_default_refusals(host: str) -> None:
    why = AgentUrlPolicy().host_refusal(host)
    assert why is not None and "agent URL policy" in why and "OPENAGENT_AGENT_URL_ALLOW" in why


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "10.1.2.3", "192.168.0.10", "172.16.0.1", "localhost"])
def test_loopback_and_private_stay_allowed(host: str) -> None:
    assert AgentUrlPolicy().host_refusal(host) is None


def test_metadata_rule_is_named() -> None:
    why = AgentUrlPolicy().host_refusal(METADATA)
    assert why == (
        "169.254.169.254 is a link-local/cloud-metadata address, refused by the agent URL policy "
        "(OPENAGENT_AGENT_URL_ALLOW to allow)"
    )


def test_allow_reopens_and_deny_wins() -> None:
    policy = AgentUrlPolicy(
        allow="169.254.10.0/24, metadata.google.internal, 127.0.0.0/8",
        deny="127.0.0.2, 10.0.0.0/8, db.internal",
    )
    assert policy.host_refusal("169.254.10.7") is None  # re-opened
    assert policy.host_refusal(METADATA) is not None  # outside the allowed /24
    assert policy.host_refusal("metadata.google.internal") is None
    assert policy.host_refusal("127.0.0.1") is None
    denied = policy.host_refusal("127.0.0.2")  # allowed and denied: denied
    assert denied is not None and "OPENAGENT_AGENT_URL_DENY (127.0.0.2/32)" in denied
    assert "OPENAGENT_AGENT_URL_DENY" in (policy.host_refusal("10.9.8.7") or "")
    assert "OPENAGENT_AGENT_URL_DENY" in (policy.host_refusal("DB.internal") or "")
    both = AgentUrlPolicy(allow="169.254.0.0/16", deny="169.254.169.254")
    assert both.host_refusal("169.254.1.1") is None and both.host_refusal(METADATA) is not None


def test_an_ipv4_address_written_as_ipv6_is_judged_as_itself_for_a_tenants_key() -> None:
    """The rule for keys that are not an administrator's unmaps ``::ffff:a.b.c.d`` as the default
    rules do: the allowed range stays allowed, shared address space stays internal."""
    policy = AgentUrlPolicy(allow="10.0.0.0/8")
    assert policy.internal_refusal(ipaddress.ip_address("::ffff:10.0.0.5")) is None
    assert policy.internal_refusal(ipaddress.ip_address("10.0.0.5")) is None
    refused = policy.internal_refusal(ipaddress.ip_address("::ffff:100.64.0.1"))
    assert refused is not None and "loopback or private" in refused
    assert policy.internal_refusal(ipaddress.ip_address("::ffff:127.0.0.1")) is not None


def test_bad_entries_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="OPENAGENT_AGENT_URL_DENY: 'not a host'"):
        AgentUrlPolicy(deny="10.0.0.0/8, not a host")
    with pytest.raises(ValidationError, match="'10.0.0.0/99' is neither"):
        Settings(_env_file=None, openagent_agent_url_allow="10.0.0.0/99")  # type: ignore[call-arg]
    settings = Settings(_env_file=None, openagent_agent_url_deny="10.0.0.0/8,db.internal")  # type: ignore[call-arg]
    assert AgentUrlPolicy.from_settings(settings).host_refusal("10.0.0.1") is not None


async def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    policy = AgentUrlPolicy(
        resolver=fake_resolver(
            {"meta.test": [METADATA], "mixed.test": ["10.0.0.1", "fe80::1"], "ok.test": ["10.0.0.1"]}
        )
    )
    assert await policy.allowed_addresses("ok.test", 80) == ["10.0.0.1"]
    with pytest.raises(AddressRefused, match="meta.test resolves to 169.254.169.254, which is a link-local"):
        await policy.allowed_addresses("meta.test", 80)
    with pytest.raises(AddressRefused, match="mixed.test resolves to fe80::1"):
        await policy.allowed_addresses("mixed.test", 80)
    with pytest.raises(UrlRefused, match="^mcp_url: meta.test resolves to 169.254.169.254") as refused:
        await policy.check_url("http://meta.test:9000/mcp", "mcp_url", registrant=BOOTSTRAP_ADMIN)
    assert refused.value.field == "mcp_url"
    await policy.check_url(
        "http://unknown.test/", "a2a_url", registrant=BOOTSTRAP_ADMIN
    )  # does not resolve (yet): checked at connect time


# --------------------------------------------------------------------------- registration


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master() as running:
        yield running


async def post_register(master: InProcessMaster, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        return await http.post("/register", json=body)


@pytest.mark.parametrize(
    "body",
    [
        {"agent_id": "meta-inv", "invocation_base_url": f"http://{METADATA}/latest", "tools": [TOOL]},
        {"agent_id": "meta-mcp", "mcp_url": f"http://{METADATA}/mcp"},
        {"agent_id": "meta-a2a", "a2a_url": f"http://{METADATA}"},
    ],
    ids=["invocation_base_url", "mcp_url", "a2a_url"],
)
async def test_metadata_address_is_refused_at_register(master: InProcessMaster, body: dict[str, Any]) -> None:
    field = next(key for key in body if key.endswith("url"))
    response = await post_register(master, body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", field]
    assert detail[0]["msg"] == (
        f"{field}: 169.254.169.254 is a link-local/cloud-metadata address, refused by the agent URL "
        "policy (OPENAGENT_AGENT_URL_ALLOW to allow)"
    )
    assert master.services.invocation.get(body["agent_id"]) is None


def _agent_app(redirect_to: str) -> Starlette:
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def run(request: Request) -> Response:
        return RedirectResponse(redirect_to, status_code=307)

    return Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])


async def test_a_name_resolving_to_metadata_is_refused_and_one_resolving_to_loopback_works(
    master: InProcessMaster,
) -> None:
    policy = master.services.invocation.url_policy
    policy.resolver = fake_resolver({"meta.test": [METADATA], "agent.test": ["127.0.0.1"]})
    response = await post_register(
        master, {"agent_id": "meta-name", "invocation_base_url": "http://meta.test:8080", "tools": [TOOL]}
    )
    assert response.status_code == 422, response.text
    assert (
        "meta.test resolves to 169.254.169.254, which is a link-local/cloud-metadata address" in response.text
    )
    async with serve_app(_agent_app("/elsewhere")) as url:
        port = url.rsplit(":", 1)[1]
        response = await post_register(
            master, {"agent_id": "named", "invocation_base_url": f"http://agent.test:{port}", "tools": [TOOL]}
        )
        # the master's session resolved agent.test through the policy (the fake mapping) and got UP
        assert response.status_code == 200 and response.json()["status"] == "UP", response.text
        await master.services.invocation.unregister("named")


@pytest.mark.parametrize("target", [f"http://{METADATA}/latest/meta-data", "http://meta.test/latest"])
async def test_a_redirect_to_a_refused_address_is_refused_at_call_time(
    master: InProcessMaster, target: str
) -> None:
    master.services.invocation.url_policy.resolver = fake_resolver({"meta.test": [METADATA]})
    async with serve_app(_agent_app(target)) as url:
        response = await post_register(
            master, {"agent_id": "redirector", "invocation_base_url": url, "tools": [TOOL]}
        )
        assert response.status_code == 200 and response.json()["status"] == "UP", response.text
        agent = master.services.invocation.get("redirector")
        assert agent is not None
        try:
            with pytest.raises(AgentUnavailable):
                await master.services.dispatcher.call(agent, "echo", {"text": "x"}, wait_seconds=30)
            assert "agent URL policy" in (agent.last_error or ""), agent.last_error
            assert "169.254.169.254" in (agent.last_error or "")
        finally:
            await master.services.invocation.unregister("redirector")


async def test_deny_setting_refuses_loopback_at_register() -> None:
    async with in_process_master(openagent_agent_url_deny="127.0.0.0/8") as master:
        response = await post_register(
            master, {"agent_id": "denied", "invocation_base_url": "http://127.0.0.1:9", "tools": [TOOL]}
        )
    assert response.status_code == 422
    assert "127.0.0.1 is denied by OPENAGENT_AGENT_URL_DENY (127.0.0.0/8)" in response.text


async def test_allow_setting_reopens_a_refused_range() -> None:
    async with in_process_master(openagent_agent_url_allow="169.254.0.0/16") as master:
        policy = master.services.invocation.url_policy
        assert policy.host_refusal(METADATA) is None
        await policy.check_url(f"http://{METADATA}/", "invocation_base_url", registrant=BOOTSTRAP_ADMIN)


# --------------------------------------------------------------------------- the httpx clients


def _client(lib: str, policy: AgentUrlPolicy, connections: Connections) -> Any:
    """An ``httpx`` client on the A2A connector's transport, or an ``httpx2`` one on the MCP
    connector's, its connections recorded."""
    if lib == "httpx":
        return httpx.AsyncClient(transport=connections.wrap(PolicyTransport(policy)), follow_redirects=True)
    return httpx2.AsyncClient(transport=connections.wrap(PolicyTransport2(policy)), follow_redirects=True)


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
async def test_the_connectors_transports_refuse_refused_addresses_and_redirects(lib: str) -> None:
    error = httpx.ConnectError if lib == "httpx" else httpx2.ConnectError
    connections = Connections()
    policy = AgentUrlPolicy(resolver=fake_resolver({"meta.test": [METADATA], "agent.test": ["127.0.0.1"]}))
    async with (
        serve_app(_agent_app(f"http://{METADATA}/latest")) as url,
        _client(lib, policy, connections) as http,
    ):
        port = int(url.rsplit(":", 1)[1])
        with pytest.raises(error, match="^169.254.169.254 is a link-local/cloud-metadata address"):
            await http.get(f"http://{METADATA}/.well-known/agent-card.json")
        with pytest.raises(error, match="^meta.test resolves to 169.254.169.254, which is a link-local"):
            await http.get("http://meta.test/.well-known/agent-card.json")
        with pytest.raises(error, match="^169.254.169.254 is a link-local"):
            await http.post(f"http://agent.test:{port}/run", json={})  # redirected to the metadata address
        assert (await http.get(f"http://agent.test:{port}/health")).status_code == 200
        with pytest.raises(error, match="^nowhere.test: nowhere.test: no such name"):
            await http.get("http://nowhere.test/")
    assert set(connections.opened) == {("127.0.0.1", port)}  # the refused ones never got this far


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
async def test_a_rebinding_name_is_connected_to_at_the_address_the_policy_judged(lib: str) -> None:
    """DNS rebinding: the name answers 127.0.0.1 once, then the metadata address. Each new
    connection looks the name up once, through the policy, and opens the address it judged: the
    first goes to 127.0.0.1, the next is refused naming the rule, and no connection to the
    metadata address is ever attempted. (``rebind.test`` exists only in the fake resolver: a
    lookup of the HTTP library's own could not connect at all.)"""
    error = httpx.ConnectError if lib == "httpx" else httpx2.ConnectError
    resolver = Rebinding({"rebind.test": [["127.0.0.1"], [METADATA]]})
    connections = Connections()
    async with serve_app(_agent_app("/elsewhere")) as url:
        port = int(url.rsplit(":", 1)[1])
        async with _client(lib, AgentUrlPolicy(resolver=resolver), connections) as http:
            response = await http.get(f"http://rebind.test:{port}/health", headers={"Connection": "close"})
            assert response.status_code == 200
            assert connections.opened == [("127.0.0.1", port)]
            # the connection was closed: the next request opens another one, and looks the name up again
            with pytest.raises(
                error, match="^rebind.test resolves to 169.254.169.254, which is a link-local"
            ):
                await http.get(f"http://rebind.test:{port}/health")
    assert resolver.lookups == [("rebind.test", ["127.0.0.1"]), ("rebind.test", [METADATA])]
    assert connections.opened == [("127.0.0.1", port)]


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
async def test_tls_names_the_urls_host_not_the_address_connected_to(lib: str) -> None:
    """SNI and the certificate check are for the URL's host: the stream opened to the address the
    policy allowed starts TLS for ``agent.test`` (the server speaks plain HTTP, so the handshake
    then fails; no certificate is needed to see what it was started for)."""
    error = httpx.ConnectError if lib == "httpx" else httpx2.ConnectError
    connections = Connections()
    policy = AgentUrlPolicy(resolver=fake_resolver({"agent.test": ["127.0.0.1"]}))
    async with serve_app(_agent_app("/elsewhere")) as url, _client(lib, policy, connections) as http:
        port = int(url.rsplit(":", 1)[1])
        with pytest.raises(error):
            await http.get(f"https://agent.test:{port}/health")
    assert connections.opened == [("127.0.0.1", port)]
    assert connections.tls == ["agent.test"]


async def test_a_name_with_several_addresses_is_tried_address_by_address() -> None:
    """A name's allowed addresses are tried in turn (as the library does for a name it resolves):
    one that refuses the connection is skipped."""
    connections = Connections()
    async with serve_app(_agent_app("/elsewhere")) as url:
        port = int(url.rsplit(":", 1)[1])
        closed = free_port()
        # 127.0.0.2 answers nothing on this port (only 127.0.0.1 is served): refused at once
        policy = AgentUrlPolicy(resolver=fake_resolver({"two.test": ["127.0.0.2", "127.0.0.1"]}))
        async with _client("httpx", policy, connections) as http:
            assert (await http.get(f"http://two.test:{port}/health")).status_code == 200
        policy = AgentUrlPolicy(resolver=fake_resolver({"none.test": ["127.0.0.1"]}))
        async with _client("httpx2", policy, connections) as http:
            with pytest.raises(httpx2.ConnectError):
                await http.get(f"http://none.test:{closed}/health")
    assert connections.opened == [("127.0.0.2", port), ("127.0.0.1", port), ("127.0.0.1", closed)]


async def test_restore_refuses_each_agent_at_a_refused_address(master: InProcessMaster) -> None:
    text = f"""\
version: 2
agents:
  - agent_id: restore-meta-inv
    transport: invocation
    invocation_base_url: http://{METADATA}/latest
    tools: [{{name: ping, description: Ping}}]
  - agent_id: restore-meta-mcp
    transport: mcp
    mcp_url: http://{METADATA}/mcp
  - agent_id: restore-meta-a2a
    transport: a2a
    a2a_url: http://[::ffff:{METADATA}]
"""
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        response = await http.post("/internal/workspace/restore", json={"yaml": text})
    assert response.status_code == 200, response.text
    rows = {row["agent_id"]: row for row in response.json()["agents"]}
    for agent_id, field in [
        ("restore-meta-inv", "invocation_base_url"),
        ("restore-meta-mcp", "mcp_url"),
        ("restore-meta-a2a", "a2a_url"),
    ]:
        assert rows[agent_id]["status"] == "invalid", rows[agent_id]
        assert rows[agent_id]["reason"] == (
            f"{field}: 169.254.169.254 is a link-local/cloud-metadata address, refused by the agent URL "
            "policy (OPENAGENT_AGENT_URL_ALLOW to allow)"
        )
        assert master.services.invocation.get(agent_id) is None


async def test_an_a2a_card_whose_endpoint_is_refused_is_refused_at_discovery(
    master: InProcessMaster, monkeypatch: Any
) -> None:
    from a2a.types.a2a_pb2 import AgentCard, AgentInterface, AgentSkill

    card = AgentCard(
        name="x",
        supported_interfaces=[AgentInterface(url=f"http://{METADATA}/rpc", protocol_binding="JSONRPC")],
        skills=[AgentSkill(id="s", name="s", description="a skill")],
    )
    connector = master.services.invocation.connectors["a2a"]
    assert isinstance(connector, A2AConnector)

    async def read_card(*args: Any) -> AgentCard:
        return card

    monkeypatch.setattr(connector, "_card", read_card)
    found = await connector.discover("http://127.0.0.1:9", {}, 5)
    assert found.endpoints == [f"http://{METADATA}/rpc"]  # the registration judges it
    with pytest.raises(
        UrlRefused, match="lists its endpoint at http://169.254.169.254/rpc: 169.254.169.254 is"
    ):
        await master.services.invocation.discover(
            "a2a", "http://127.0.0.1:9", {}, 5, registrant=BOOTSTRAP_ADMIN
        )


async def test_the_masters_session_refuses_literals_before_connecting(master: InProcessMaster) -> None:
    """aiohttp never resolves an IP literal: the trace refuses it (an agent stored before the policy,
    say, is marked DOWN naming the rule)."""
    http = master.services.invocation.http
    with pytest.raises(AddressRefused, match="link-local/cloud-metadata"):
        async with http.get(f"http://{METADATA}/latest/meta-data"):
            pass
    with pytest.raises(aiohttp.ClientConnectorError, match="meta.test resolves to 169.254.169.254"):
        master.services.invocation.url_policy.resolver = fake_resolver({"meta.test": [METADATA]})
        async with http.get("http://meta.test/latest/meta-data"):
            pass


# --------------------------------------------------------------------------- who registers


@pytest.fixture
async def keyed() -> AsyncIterator[tuple[InProcessMaster, dict[str, str], dict[str, str]]]:
    """A master with an administrator's key and a tenant's ``agent`` key (any agent id)."""
    async with in_process_master(openagent_api_key="url-admin") as running:
        assert running.services.keys is not None
        _, secret = await running.services.keys.create(
            name="bot", role=Role.AGENT, tenant="t1", agent_ids=["*"]
        )
        yield running, {"Authorization": "Bearer url-admin"}, {"Authorization": f"Bearer {secret}"}


async def test_loopback_and_private_addresses_are_for_an_administrators_registrations_only(
    keyed: tuple[InProcessMaster, dict[str, str], dict[str, str]],
) -> None:
    master, admin, agent = keyed
    master.services.invocation.url_policy.resolver = fake_resolver({"inside.test": ["10.1.2.3"]})
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        for url in ("http://127.0.0.1:9", "http://[::1]:9", "http://192.168.1.5:9", "http://inside.test:9"):
            for body in (
                {"agent_id": "probe", "invocation_base_url": url, "tools": [TOOL]},
                {"agent_id": "probe", "mcp_url": f"{url}/mcp"},
                {"agent_id": "probe", "a2a_url": url},
            ):
                refused = await http.post("/register", json=body, headers=agent)
                assert refused.status_code == 422, (body, refused.text)
                assert "only an administrator's key may register" in refused.text, refused.text
        assert master.services.invocation.get("probe") is None
        # the WebSocket register with an invocation_url goes through the same rule
        peer = await RawPeer.connect(master.ws_url, additional_headers=agent)
        try:
            await peer.send(
                {
                    "type": "register",
                    "agent_id": "probe",
                    "role": "action",
                    "tools": [TOOL],
                    "invocation_url": "http://127.0.0.1:9",
                }
            )
            refused_frame = await peer.recv()
            assert (
                refused_frame["type"] == "error" and "only an administrator's key" in refused_frame["message"]
            )
        finally:
            await peer.close()
        try:  # the administrator's agents on loopback keep working (scripts/run.sh)
            registered = await http.post(
                "/register",
                json={"agent_id": "admin-loop", "invocation_base_url": "http://127.0.0.1:9", "tools": [TOOL]},
                headers=admin,
            )
            assert registered.status_code == 200, registered.text
        finally:
            await master.services.invocation.unregister("admin-loop")


async def test_the_allow_setting_opens_loopback_to_every_key() -> None:
    async with in_process_master(
        openagent_api_key="url-admin", openagent_agent_url_allow="127.0.0.1"
    ) as master:
        assert master.services.keys is not None
        _, secret = await master.services.keys.create(
            name="bot", role=Role.AGENT, tenant="t1", agent_ids=["*"]
        )
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            try:
                registered = await http.post(
                    "/register",
                    json={
                        "agent_id": "allowed-loop",
                        "invocation_base_url": "http://127.0.0.1:9",
                        "tools": [TOOL],
                    },
                    headers={"Authorization": f"Bearer {secret}"},
                )
                assert registered.status_code == 200, registered.text
            finally:
                await master.services.invocation.unregister("allowed-loop")


async def test_a_failed_listing_tells_a_tenants_key_nothing_of_the_port(
    keyed: tuple[InProcessMaster, dict[str, str], dict[str, str]],
) -> None:
    """A port that answers something else and a port where nothing listens give a key that is
    not an administrator's the same error (loopback opened to it for the test: the same holds
    for any address it may register)."""
    master, admin, agent = keyed
    master.services.invocation.url_policy = AgentUrlPolicy(allow="127.0.0.1")
    closed = f"http://127.0.0.1:{free_port()}"
    async with (
        serve_app(_agent_app("/elsewhere")) as open_url,
        httpx.AsyncClient(base_url=master.base_url, timeout=30) as http,
    ):
        for transport in ("mcp", "a2a"):
            answers = []
            for url in (open_url, closed):
                suffix = "/mcp" if transport == "mcp" else ""
                body = {"agent_id": "probe", f"{transport}_url": f"{url}{suffix}"}
                refused = await http.post("/register", json=body, headers=agent)
                assert refused.status_code == 400, refused.text
                answers.append(refused.json()["detail"].replace(url, "URL"))
            assert answers[0] == answers[1], answers
            assert "could not be listed" in answers[0]
            # an administrator is told why
            why = await http.post(
                "/register",
                json={"agent_id": "probe", f"{transport}_url": f"{closed}{suffix}"},
                headers=admin,
            )
            assert why.status_code == 400 and "could not be listed (unreachable" not in why.text, why.text
