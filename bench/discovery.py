"""Discovery of agent modules: ``GET /agents/discover`` over many files (target: 500 files in < 1 s).

``python -m bench.discovery [--files 500] [--repeat 7]`` writes ``--files`` agent modules (about
60 lines and 3 tools each, like generated ones; one in fifty broken) into a temporary
repository, then times :meth:`master.builder.discovery.AgentDiscovery.discover`:

- cold: a new discovery object each time (every file read and parsed), what the first
  request after a start costs;
- warm: the same object again (unchanged files come from the cache), what the UI's polling costs;
- http cold / warm: ``GET /agents/discover`` through the master app in process (httpx ASGI
  transport), with an empty cache before each cold request.

It prints the medians and PASS/FAIL against the target (judged on CPU seconds, since wall-clock
time on a shared machine measures the neighbours too), and writes ``bench/results/discovery.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from master.builder.discovery import AgentDiscovery

TARGET_SECONDS = 1.0
RESULTS = Path(__file__).resolve().parent / "results" / "discovery.json"

MODULE = '''\
# module: {module}
"""Agent number {index}: converts and looks things up (benchmark fixture)."""

from __future__ import annotations

from typing import Any

from openagent import ClientConfig, OrchestratorActionAgent, ToolError, ToolSchema, run_action_agent

AGENT_ID = "{agent_id}"

TOOLS = [
    ToolSchema(
        name="convert",
        description="Convert a value between units.",
        parameters={{
            "type": "object",
            "properties": {{
                "value": {{"type": "number"}},
                "from_unit": {{"type": "string"}},
                "to_unit": {{"type": "string"}},
            }},
            "required": ["value", "from_unit", "to_unit"],
        }},
    ),
    ToolSchema(
        name="lookup",
        description="Look a term up.",
        parameters={{"type": "object", "properties": {{"term": {{"type": "string"}}}}, "required": ["term"]}},
    ),
    ToolSchema(name="status", description="Agent status.", parameters={{"type": "object", "properties": {{}}}}),
]


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:
    if tool_name == "convert":
        return {{"value": float(arguments["value"]) * {index}}}
    if tool_name == "lookup":
        return {{"term": arguments["term"], "found": False}}
    if tool_name == "status":
        return {{"ok": True}}
    raise ToolError(f"unknown tool {{tool_name!r}}")


def build_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    return OrchestratorActionAgent(AGENT_ID, TOOLS, handle_tool, config=config)


if __name__ == "__main__":
    run_action_agent(build_agent())
'''


def write_repository(root: Path, files: int) -> None:
    for folder in ("agents", "system_agents", "sample_agents"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for index in range(files):
        folder = "system_agents" if index % 10 == 0 else "agents"
        module = f"bench_agent_{index:04d}"
        source = MODULE.format(module=module, agent_id=f"bench-agent-{index}", index=index)
        if index % 50 == 49:
            source = source.replace("def build_agent(", "def build_agent((")  # a syntax error
        (root / folder / f"{module}.py").write_text(source)


def timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of each run."""
    wall, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return wall, cpu


async def http_samples(root: Path, repeat: int) -> tuple[list[float], list[float]]:
    import httpx

    from master.app import create_app
    from master.settings import Settings

    app = create_app(Settings(openagent_agents_root=root, redis_url="redis://127.0.0.1:1/0"))
    cold: list[float] = []
    warm: list[float] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
            await asyncio.sleep(3)  # let the master's start-up work (tokenizer warm-up thread) finish
            for _ in range(repeat):
                app.state.services.builder.discovery = AgentDiscovery(root)
                for samples in (cold, warm):
                    started = time.perf_counter()
                    response = await http.get("/agents/discover")
                    response.raise_for_status()
                    samples.append(time.perf_counter() - started)
    return cold, warm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-http", action="store_true", help="skip the in-process HTTP measurement")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="openagent-bench-discovery-") as tmp:
        root = Path(tmp)
        write_repository(root, args.files)
        found = AgentDiscovery(root).discover()
        cold, cold_cpu = timed(lambda: AgentDiscovery(root).discover(), args.repeat)
        warm_discovery = AgentDiscovery(root)
        warm_discovery.discover()
        warm, _ = timed(warm_discovery.discover, args.repeat)
        http_cold, http_warm = ([], []) if args.no_http else asyncio.run(http_samples(root, args.repeat))
    figures = {
        "files": args.files,
        "agents": len(found.agents),
        "errors": len(found.errors),
        "cold_median_s": statistics.median(cold),
        "cold_cpu_median_s": statistics.median(cold_cpu),
        "warm_median_s": statistics.median(warm),
        "http_cold_median_s": statistics.median(http_cold) if http_cold else None,
        "http_warm_median_s": statistics.median(http_warm) if http_warm else None,
        "target_s": TARGET_SECONDS,
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    # CPU seconds: on a machine shared with other work, wall-clock time measures the neighbours.
    verdict = "PASS" if figures["cold_cpu_median_s"] < TARGET_SECONDS else "FAIL"
    figures["verdict"] = verdict
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"discovery of {args.files} files ({figures['agents']} agents, {figures['errors']} errors): "
        f"cold {figures['cold_median_s'] * 1000:.0f} ms ({figures['cold_cpu_median_s'] * 1000:.0f} ms CPU), warm {figures['warm_median_s'] * 1000:.1f} ms"
        + (
            f"; HTTP cold {figures['http_cold_median_s'] * 1000:.0f} ms, warm {figures['http_warm_median_s'] * 1000:.1f} ms"
            if http_cold
            else ""
        )
        + f" -> {verdict} (target < {TARGET_SECONDS:g} s cold, CPU; load average {figures['load_average_1m']:.1f})"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
