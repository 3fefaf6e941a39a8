"""The systems under test, each started as processes on loopback and stopped afterwards.

- :func:`master_setup`: a master with the instant function model, and the agents
  ``bench-ws`` (SDK, WebSocket), ``bench-http-sdk`` (SDK invocation agent, httpx) and
  ``bench-http-aiohttp`` (invocation agent on aiohttp). A query picks its agent with
  ``allowed_agent_ids``, so one master serves the WebSocket and the HTTP cases.
- :func:`scripted_setup`: a master whose real OpenAI client talks to the scripted
  OpenAI-compatible server (its own process), and one WebSocket agent (``bench-ws-scripted``
  beside :func:`master_setup`, ``bench-ws`` alone); optionally with a context limit that never
  compacts a session (every earlier turn goes to the LLM).
- :func:`cluster_setup`: two masters on one Redis (``OPENAGENT_CLUSTER=1``), ``bench-ws`` on
  one, queries to the other: every call crosses masters through Redis.
- :func:`workers_setup`: 1, 2 or 4 masters on one Redis, the load and the agents spread over them.
- :func:`relay_ws_setup`, :func:`relay_http_setup`: baselines (a) and (b) with their agents.
- :func:`mcp_direct_setup`: the ``echo`` tool served directly by an MCP server built with the
  same SDK as the master's ``/mcp`` (:mod:`bench.mcp_direct`), the baseline of the ``mcp_*`` cases.
- :func:`a2a_direct_setup`: ``echo`` served directly by an ``a2a-sdk`` server, the baseline of
  the A2A cases (the master's side is :func:`master_setup`'s ``bench-ws`` at ``/a2a/agents/bench-ws``).

The masters share the bench's Redis database, which the runner empties before and after
the run only. Invocation agents (stored in Redis) have an id per system, and queries
name their agent with ``allowed_agent_ids``, so a master that loads another system's
records at start-up is not disturbed by them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import redis.asyncio as aioredis

from bench.procs import Child, Group, free_port

READY_WITHIN = 60.0

WS_AGENT = "bench-ws"
SCRIPTED_WS_AGENT = "bench-ws-scripted"
"""The scripted master's agent while :func:`master_setup` runs beside it on the same Redis."""
HTTP_SDK_AGENT = "bench-http-sdk"
HTTP_AIOHTTP_AGENT = "bench-http-aiohttp"


@dataclass
class Running:
    """A started system: its hub (master or relay), base URL and the other processes."""

    hub: Child
    url: str
    agents: dict[str, Child] = field(default_factory=dict)
    helpers: list[Child] = field(default_factory=list)
    more_hubs: list[Child] = field(default_factory=list)
    """Further masters whose CPU counts as server CPU with the hub's (the workers cases)."""
    more_urls: list[str] = field(default_factory=list)
    """Further masters' base URLs: the load client spreads its connections over ``url`` and these."""
    spread: dict[str, list[str]] = field(default_factory=dict)
    """A case's agent id → the agents its queries take turns on (one per master, the workers cases)."""

    def hubs(self) -> list[Child]:
        return [self.hub, *self.more_hubs]

    def urls(self) -> list[str]:
        return [self.url, *self.more_urls]

    def watched(self) -> list[Child]:
        """The processes whose CPU is sampled: the hubs first."""
        return [*self.hubs(), *self.agents.values(), *self.helpers]


async def flush_bench_db(redis_url: str) -> None:
    """Empty the benchmark's own Redis database (only that one)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


async def start_master(
    group: Group,
    name: str,
    redis_url: str,
    *,
    openai_base_url: str | None = None,
    context_max_tokens: int | None = None,
    cluster: bool = False,
    session_ttl: int | None = None,
    max_catalog_tools: int | None = None,
) -> tuple[Child, str]:
    port = free_port()
    args = ["master", "--port", str(port), "--redis-url", redis_url]
    if openai_base_url:
        args += ["--openai-base-url", openai_base_url]
    if context_max_tokens:
        args += ["--context-max-tokens", str(context_max_tokens)]
    if cluster:
        args.append("--cluster")
    if session_ttl:
        args += ["--session-ttl", str(session_ttl)]
    if max_catalog_tools:
        args += ["--max-catalog-tools", str(max_catalog_tools)]
    master = await group.start(Child(name, "bench.launcher", *args))
    url = f"http://127.0.0.1:{port}"
    await master.wait_http(f"{url}/health", READY_WITHIN)
    return master, url


async def _ready(*children: Child) -> None:
    for child in children:
        await child.expect("ready", READY_WITHIN)


@asynccontextmanager
async def master_setup(
    redis_url: str, *, http_agents: bool = True, session_ttl: int | None = None
) -> AsyncIterator[Running]:
    async with Group() as group:
        master, url = await start_master(group, "master", redis_url, session_ttl=session_ttl)
        ws_url = url.replace("http://", "ws://") + "/ws"
        agents = {WS_AGENT: await group.start(Child("agent-ws", "bench.agents", "ws", "--master-ws", ws_url))}
        if http_agents:
            agents[HTTP_SDK_AGENT] = await group.start(
                Child(
                    "agent-http-sdk", "bench.agents", "http-sdk", "--master", url, "--port", str(free_port())
                )
            )
            agents[HTTP_AIOHTTP_AGENT] = await group.start(
                Child(
                    "agent-http-aiohttp",
                    "bench.agents",
                    "http-aiohttp",
                    "--master",
                    url,
                    "--port",
                    str(free_port()),
                )
            )
        await _ready(*agents.values())
        yield Running(master, url, agents)


@asynccontextmanager
async def scripted_setup(
    redis_url: str, *, context_max_tokens: int | None = None, agent_id: str = WS_AGENT
) -> AsyncIterator[Running]:
    async with Group() as group:
        llm_port = free_port()
        llm = await group.start(
            Child("scripted-llm", "bench.launcher", "scripted-llm", "--port", str(llm_port))
        )
        await _ready(llm)
        master, url = await start_master(
            group,
            "master-scripted",
            redis_url,
            openai_base_url=f"http://127.0.0.1:{llm_port}/v1",
            context_max_tokens=context_max_tokens,
        )
        ws_url = url.replace("http://", "ws://") + "/ws"
        agent = await group.start(
            Child("agent-ws-scripted", "bench.agents", "ws", "--master-ws", ws_url, "--agent-id", agent_id)
        )
        await _ready(agent)
        yield Running(master, url, {agent_id: agent}, [llm])


async def _listed(url: str, agent_id: str, within: float) -> None:
    """Wait until ``GET /agents`` of the master at ``url`` lists ``agent_id`` (an invocation agent
    registered elsewhere shows up at the master's next heartbeat, or at a ``GET /refresh``)."""
    async with aiohttp.ClientSession() as http, asyncio.timeout(within):
        while True:
            async with http.get(f"{url}/agents") as response:
                rows = (await response.json())["agents"]
            if any(row["agent_id"] == agent_id for row in rows):
                return
            await asyncio.sleep(0.1)


async def _crossed(url: str, within: float) -> None:
    """One query through the front master to the other master's agent (connections and inbox readers warm)."""
    body = {"query": "warm up", "allowed_agent_ids": [WS_AGENT]}
    async with aiohttp.ClientSession() as http, asyncio.timeout(within):
        while True:
            async with http.post(f"{url}/query", json=body) as response:
                answer = await response.json()
            if answer.get("success") and answer.get("agents_used"):
                return
            await asyncio.sleep(0.1)


@asynccontextmanager
async def cluster_setup(redis_url: str) -> AsyncIterator[Running]:
    """Two masters on one Redis (``OPENAGENT_CLUSTER=1``): ``bench-ws`` on the first, queries on the second."""
    async with Group() as group:
        holder, holder_url = await start_master(group, "master-holder", redis_url, cluster=True)
        front, front_url = await start_master(group, "master-front", redis_url, cluster=True)
        ws_url = holder_url.replace("http://", "ws://") + "/ws"
        agent = await group.start(Child("agent-ws-cluster", "bench.agents", "ws", "--master-ws", ws_url))
        await _ready(agent)
        await _listed(front_url, WS_AGENT, READY_WITHIN)
        await _crossed(front_url, READY_WITHIN)
        yield Running(front, front_url, {WS_AGENT: agent}, [holder])


async def _refreshed(url: str) -> None:
    """``GET /refresh``: the master re-reads the invocation agents registered in Redis."""
    async with aiohttp.ClientSession() as http, http.get(f"{url}/refresh") as response:
        response.raise_for_status()


@asynccontextmanager
async def workers_setup(
    redis_url: str, masters: int, *, http_agent: bool = True, replicas: bool = False
) -> AsyncIterator[Running]:
    """``masters`` masters on one Redis (``OPENAGENT_CLUSTER=1``), each on its own port, as N replicas
    behind a Service: one WebSocket agent per master (``bench-ws-<i>`` on master ``i``), queries
    spread evenly over the masters and taking the agents in turn, so ``(N - 1) / N`` of the calls
    cross masters, as they would with agents and queries spread at random. With ``replicas``, the
    agents are one: ``bench-ws`` with a replica on every master (instance ``m<i>``), and every
    master calls its own (no call crosses). With ``http_agent``, one SDK invocation agent
    (registered in Redis, called by every master directly)."""
    async with Group() as group:
        started = [
            await start_master(group, f"master-w{masters}-{i}", redis_url, cluster=True)
            for i in range(masters)
        ]
        hubs, urls = [child for child, _ in started], [url for _, url in started]
        agents: dict[str, Child] = {}
        for i, url in enumerate(urls):
            ws_url = url.replace("http://", "ws://") + "/ws"
            agent_id, more = (WS_AGENT, ["--instance", f"m{i}"]) if replicas else (f"{WS_AGENT}-{i}", [])
            agents[f"{WS_AGENT}-{i}"] = await group.start(
                Child(
                    f"agent-ws-w{masters}-{i}{'-replica' if replicas else ''}",
                    "bench.agents",
                    "ws",
                    "--master-ws",
                    ws_url,
                    "--agent-id",
                    agent_id,
                    *more,
                )
            )
        if http_agent:
            agents[HTTP_SDK_AGENT] = await group.start(
                Child(
                    f"agent-http-sdk-w{masters}",
                    "bench.agents",
                    "http-sdk",
                    "--master",
                    urls[0],
                    "--port",
                    str(free_port()),
                )
            )
        await _ready(*agents.values())
        for url in urls:
            for i in range(masters):
                await _listed(url, WS_AGENT if replicas else f"{WS_AGENT}-{i}", READY_WITHIN)
            if http_agent:  # registered on the first master: every master must list it before the load
                await _refreshed(url)
                await _listed(url, HTTP_SDK_AGENT, READY_WITHIN)
        yield Running(
            hubs[0],
            urls[0],
            agents,
            more_hubs=hubs[1:],
            more_urls=urls[1:],
            spread={} if replicas else {WS_AGENT: [f"{WS_AGENT}-{i}" for i in range(masters)]},
        )


@asynccontextmanager
async def relay_ws_setup() -> AsyncIterator[Running]:
    async with Group() as group:
        port = free_port()
        relay = await group.start(Child("baseline-a", "bench.relays", "ws", "--port", str(port)))
        url = f"http://127.0.0.1:{port}"
        await relay.wait_http(f"{url}/health", READY_WITHIN)
        agent = await group.start(
            Child("baseline-a-agent", "bench.agents", "ws", "--master-ws", f"ws://127.0.0.1:{port}/ws")
        )
        await _ready(agent)
        yield Running(relay, url, {WS_AGENT: agent})


@asynccontextmanager
async def relay_http_setup() -> AsyncIterator[Running]:
    async with Group() as group:
        port, agent_port = free_port(), free_port()
        agent = await group.start(
            Child("baseline-b-agent", "bench.agents", "http-aiohttp", "--port", str(agent_port))
        )
        relay = await group.start(
            Child(
                "baseline-b",
                "bench.relays",
                "http",
                "--port",
                str(port),
                "--agent-url",
                f"http://127.0.0.1:{agent_port}",
            )
        )
        url = f"http://127.0.0.1:{port}"
        await _ready(agent)
        await relay.wait_http(f"{url}/health", READY_WITHIN)
        yield Running(relay, url, {HTTP_AIOHTTP_AGENT: agent})


@asynccontextmanager
async def mcp_direct_setup() -> AsyncIterator[Running]:
    async with Group() as group:
        port = free_port()
        server = await group.start(Child("mcp-direct", "bench.mcp_direct", "--port", str(port)))
        url = f"http://127.0.0.1:{port}"
        await server.wait_http(f"{url}/health", READY_WITHIN)
        yield Running(server, url)


@asynccontextmanager
async def a2a_direct_setup() -> AsyncIterator[Running]:
    """``echo`` served directly by an ``a2a-sdk`` server (JSON-RPC at ``/``): its process is the hub."""
    async with Group() as group:
        port = free_port()
        server = await group.start(Child("a2a-direct", "bench.agents", "a2a", "--port", str(port)))
        await _ready(server)
        yield Running(server, f"http://127.0.0.1:{port}")
