"""Every case of the benchmark, by name, with the system it runs against.

Round-trip cases POST to ``/query`` of a hub; the master's cases pick their agent with
``allowed_agent_ids`` (all agents of :func:`bench.setups.master_setup` stay connected).
"""

from __future__ import annotations

from bench.echo_tool import TOOL_NAME
from bench.setups import HTTP_AIOHTTP_AGENT, HTTP_SDK_AGENT, SCRIPTED_WS_AGENT, WS_AGENT
from bench.throughput import LoadCase

WORKERS = (1, 2, 4, 8)
"""Masters (cluster mode, one Redis) of the workers cases."""
REPLICAS = "_replicas"
"""The workers cases whose agent has a replica on every master (``workers<n>_replicas_c<32 n>``)."""
PER_MASTER = 32
"""Queries in flight per master in the workers cases: N masters get ``32 N``, so each master runs at
the concurrency of the one-master case and the masters' CPU per operation compares the hop, not how
well a master batches fewer queries (a master at 8 in flight costs more per query than at 32)."""
PACED = 100
"""Queries per second per master in the paced workers cases (``workers<n><kind>_r<100 n>``, 16
workers per master): every master serves the same rate whatever the number of masters, so each
is as busy as the one master and the masters' CPU per operation compares what N masters add
(the hop, the spread), on a machine with fewer cores than masters too (where a closed loop
starves the masters, and a starved master batches less and pays more per query). The targets on
the masters' CPU judge these cases."""
PACED_WORKERS = 16
SPREAD = 8
"""The per-master load of the opt-in ``workers_spread`` group: 4 masters sharing 32 in flight (8 each)
against 1 master at 8."""


def workers_case(masters: int, kind: str = "") -> str:
    """The name of a workers case: ``workers<n><kind>_c<32 n>`` (its total concurrency)."""
    return f"workers{masters}{kind}_c{PER_MASTER * masters}"


def paced_case(masters: int, kind: str = "") -> str:
    """The name of a paced workers case: ``workers<n><kind>_r<100 n>`` (its total rate)."""
    return f"workers{masters}{kind}_r{PACED * masters}"


def _ask(agent_id: str) -> dict[str, object]:
    return {"query": "hello", "allowed_agent_ids": [agent_id]}


def _mcp_call(tool: str) -> dict[str, object]:
    return {"tool": tool, "arguments": {"text": "hello"}}


MCP_DIRECT = _mcp_call(TOOL_NAME)
MCP_HUB = _mcp_call(f"{WS_AGENT}__{TOOL_NAME}")
"""``tools/call`` of ``echo``: served by the MCP server itself, or by the hub's ``/mcp`` through
the WebSocket agent ``bench-ws`` (the orchestrator's name of its tool)."""


def _chat(agent_id: str) -> dict[str, object]:
    """The same question through the OpenAI-compatible API, scoped to the same agent."""
    return {"model": f"openagent/{agent_id}", "messages": [{"role": "user", "content": "hello"}]}


OPENAI_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"


def _responses(agent_id: str) -> dict[str, object]:
    """The same question through the Responses API (not stored: the chat door stores nothing)."""
    return {"model": f"openagent/{agent_id}", "input": "hello", "store": False}


A2A_CALL: dict[str, object] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "params": {
        "message": {
            "role": "ROLE_USER",
            "messageId": "replaced-per-request",
            "parts": [{"data": {"tool": "echo", "arguments": {"text": "hello"}}}],
        }
    },
}
"""A direct tool call over A2A: ``SendMessage`` with the data part (the same body to both systems)."""
A2A_CONCURRENCY = (1, 16)


def _a2a_cases() -> list[tuple[str, LoadCase]]:
    cases: list[tuple[str, LoadCase]] = []
    for conc in A2A_CONCURRENCY:
        cases.append(
            (
                "a2a_direct",
                LoadCase(
                    f"a2a_direct_c{conc}",
                    "baseline: echo on an a2a-sdk server",
                    "/",
                    conc,
                    A2A_CALL,
                    protocol="a2a",
                ),
            )
        )
        cases.append(
            (
                "master",
                LoadCase(
                    f"a2a_hub_c{conc}",
                    "master: A2A direct tool call to a WS agent",
                    f"/a2a/agents/{WS_AGENT}",
                    conc,
                    A2A_CALL,
                    protocol="a2a",
                ),
            )
        )
    return cases


ROUND_TRIPS: dict[str, tuple[str, LoadCase]] = {
    case.name: (setup, case)
    for setup, case in [
        ("relay_ws", LoadCase("baseline_a_c1", "baseline (a): FastAPI WebSocket relay", "/query", 1)),
        ("relay_ws", LoadCase("baseline_a_c32", "baseline (a): FastAPI WebSocket relay", "/query", 32)),
        ("master", LoadCase("ws_c1", "master: WS tool round trip", "/query", 1, _ask(WS_AGENT))),
        ("master", LoadCase("ws_c32", "master: WS tool round trip", "/query", 32, _ask(WS_AGENT))),
        ("master", LoadCase("openai_c1", "master: OpenAI API, WS tool", OPENAI_PATH, 1, _chat(WS_AGENT))),
        ("master", LoadCase("openai_c32", "master: OpenAI API, WS tool", OPENAI_PATH, 32, _chat(WS_AGENT))),
        (
            "master",
            LoadCase(
                "responses_c1", "master: Responses API, WS tool", RESPONSES_PATH, 1, _responses(WS_AGENT)
            ),
        ),
        (
            "master",
            LoadCase(
                "responses_c32", "master: Responses API, WS tool", RESPONSES_PATH, 32, _responses(WS_AGENT)
            ),
        ),
        (
            "relay_http",
            LoadCase("baseline_b_c32", "baseline (b): HTTP callback relay, aiohttp both sides", "/query", 32),
        ),
        (
            "relay_http",
            LoadCase(
                "baseline_b_httpx_c32",
                "baseline (b) with the master's httpx client as hub client",
                "/query-httpx",
                32,
            ),
        ),
        (
            "master",
            LoadCase(
                "http_sdk_c32",
                "master: HTTP invocation, SDK agent",
                "/query",
                32,
                _ask(HTTP_SDK_AGENT),
            ),
        ),
        (
            "master",
            LoadCase(
                "http_aiohttp_c32",
                "master: HTTP invocation, aiohttp agent",
                "/query",
                32,
                _ask(HTTP_AIOHTTP_AGENT),
            ),
        ),
        (
            "cluster",
            LoadCase(
                "cluster_c1", "two masters: agent on one, queries on the other", "/query", 1, _ask(WS_AGENT)
            ),
        ),
        (
            "cluster",
            LoadCase(
                "cluster_c32", "two masters: agent on one, queries on the other", "/query", 32, _ask(WS_AGENT)
            ),
        ),
        *(
            (
                f"workers{n}{REPLICAS if kind == REPLICAS else ''}",  # the setup: HTTP agent beside the WS ones
                LoadCase(
                    workers_case(n, kind),
                    f"{n} master{'s' if n > 1 else ''} on one Redis: {what}",
                    "/query",
                    PER_MASTER * n,
                    _ask(agent),
                ),
            )
            for kind, what, agent in (
                ("", "WS tool round trip", WS_AGENT),
                ("_http", "HTTP invocation, SDK agent", HTTP_SDK_AGENT),
                (REPLICAS, "WS, a replica on every master", WS_AGENT),
            )
            for n in WORKERS
        ),
        *(
            (
                f"workers{n}{REPLICAS if kind == REPLICAS else ''}",  # the setup: HTTP agent beside the WS ones
                LoadCase(
                    paced_case(n, kind),
                    f"{n} master{'s' if n > 1 else ''} on one Redis: {what}, {PACED} queries/s per master",
                    "/query",
                    PACED_WORKERS * n,
                    _ask(agent),
                    rate=PACED * n,
                ),
            )
            for kind, what, agent in (
                ("", "WS", WS_AGENT),
                ("_http", "HTTP invocation", HTTP_SDK_AGENT),
                (REPLICAS, "WS, a replica on every master", WS_AGENT),
            )
            for n in (1, 2, 4)
        ),
        *(
            (
                f"workers{n}",
                LoadCase(
                    f"workers{n}_c{SPREAD * n}",
                    f"{n} master{'s' if n > 1 else ''} on one Redis: WS, {SPREAD} in flight per master",
                    "/query",
                    SPREAD * n,
                    _ask(WS_AGENT),
                ),
            )
            for n in (1, 4)
        ),
        *(
            (
                "mcp_direct",
                LoadCase(
                    f"mcp_direct_c{n}",
                    "MCP server: tools/call, function in process",
                    "/mcp",
                    n,
                    MCP_DIRECT,
                    "mcp",
                ),
            )
            for n in (1, 16)
        ),
        *(
            (
                "master",
                LoadCase(f"mcp_hub_c{n}", "master /mcp: tools/call to a WS agent", "/mcp", n, MCP_HUB, "mcp"),
            )
            for n in (1, 16)
        ),
        *_a2a_cases(),
        (
            "scripted",
            LoadCase(
                "scripted_c1",
                "master via scripted OpenAI server: WS tool",
                "/query",
                1,
                _ask(SCRIPTED_WS_AGENT),
            ),
        ),
        (
            "scripted",
            LoadCase(
                "scripted_c32",
                "master via scripted OpenAI server: WS tool",
                "/query",
                32,
                _ask(SCRIPTED_WS_AGENT),
            ),
        ),
    ]
}

SESSION_GROWTH = "session_growth"
SCRIPTED_SESSION_GROWTH = "scripted_session_growth"
"""Session growth through the real OpenAI client, every earlier turn sent to the LLM (no compaction)."""
SCRIPTED_CONTEXT_MAX_TOKENS = 10_000_000
REDIS_TRIPS = "redis_trips"
CONNECTIONS_BASELINE = "connections_baseline_c"
CONNECTIONS_MASTER = "connections_master"
SOAK = "soak"

ALL_CASES: list[str] = [
    *ROUND_TRIPS,
    SESSION_GROWTH,
    SCRIPTED_SESSION_GROWTH,
    REDIS_TRIPS,
    CONNECTIONS_BASELINE,
    CONNECTIONS_MASTER,
    SOAK,
]
WORKERS_PACED = [paced_case(n, kind) for kind in ("", "_http", REPLICAS) for n in (1, 2, 4)]
OPT_IN = {SOAK, f"workers1_c{SPREAD}", f"workers4_c{SPREAD * 4}"}
"""Cases that run only when named (``--cases soak``), never in ``all``."""
DEFAULT_CASES: list[str] = [name for name in ALL_CASES if name not in OPT_IN]

GROUPS: dict[str, list[str]] = {
    "baselines": [
        "baseline_a_c1",
        "baseline_a_c32",
        "baseline_b_c32",
        "baseline_b_httpx_c32",
        CONNECTIONS_BASELINE,
    ],
    "ws": ["baseline_a_c1", "baseline_a_c32", "ws_c1", "ws_c32"],
    "openai": ["ws_c1", "ws_c32", "openai_c1", "openai_c32", "responses_c1", "responses_c32"],
    "http": ["baseline_b_c32", "baseline_b_httpx_c32", "http_sdk_c32", "http_aiohttp_c32"],
    "scripted": ["scripted_c1", "scripted_c32", SCRIPTED_SESSION_GROWTH],
    "mcp": ["mcp_direct_c1", "mcp_direct_c16", "mcp_hub_c1", "mcp_hub_c16"],
    "connections": [CONNECTIONS_BASELINE, CONNECTIONS_MASTER],
    "cluster": ["ws_c1", "ws_c32", "cluster_c1", "cluster_c32"],
    "sessions": [SESSION_GROWTH, SCRIPTED_SESSION_GROWTH],
    "redis": [REDIS_TRIPS],
    "a2a": [f"a2a_{system}_c{conc}" for conc in A2A_CONCURRENCY for system in ("direct", "hub")],
    "workers": [
        "ws_c32",
        "http_sdk_c32",
        *(workers_case(n, kind) for kind in ("", "_http", REPLICAS) for n in WORKERS),
        *WORKERS_PACED,
    ],
    "workers_spread": [f"workers1_c{SPREAD}", f"workers4_c{SPREAD * 4}"],
    "workers_paced": WORKERS_PACED,
}


def select(spec: str | None) -> list[str]:
    """Case names from ``--cases`` (names and group names, comma-separated; ``all``: every case
    but the opt-in ones), in run order."""
    wanted: set[str] = set()
    for item in (part.strip() for part in (spec or "all").split(",")):
        if item == "all":
            wanted.update(DEFAULT_CASES)
        elif item in GROUPS:
            wanted.update(GROUPS[item])
        elif item in ALL_CASES:
            wanted.add(item)
        elif item:
            known = ", ".join(["all", *GROUPS, *ALL_CASES])
            raise ValueError(f"unknown case {item!r}; known: {known}")
    return [name for name in ALL_CASES if name in wanted]
