"""``python -m fuzz [--duration S] [--seed N] ...``: fuzz the master, report, exit 1 on any failure.

By default a master is started on a free loopback port (``python -m master``, with a fresh API
key and the scripted fuzz LLM) over ``--redis-url`` (``FUZZ_REDIS_URL``, default
``redis://127.0.0.1:6379/12``). ``--base-url`` and ``--api-key`` target a running master instead
(loopback only). Both fuzzers run at once for ``--duration`` seconds; every loop is bounded in
time and count. Fails on: a 5xx response (but a documented 501), a master that died or logged a
traceback, a dropped well-behaved connection, a failed loop query, an accepted spoof.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from ipaddress import ip_address
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fuzz.harness import Master, clear_agents, dumps, start_master
from fuzz.http import HttpOutcome, run_schemathesis
from fuzz.ws import WsOutcome, run_ws

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/12"
MIN_HTTP_SECONDS = 45.0
"""Schemathesis gets at least this long: loading the document and its health checks take
seconds on a busy machine before the first request."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of fuzzing (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of both fuzzers (default 1)")
    parser.add_argument("--max-examples", type=int, default=50, help="schemathesis examples per operation")
    parser.add_argument("--redis-url", default=os.environ.get("FUZZ_REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--base-url", help="fuzz this running master (loopback) instead of starting one")
    parser.add_argument("--api-key", default=os.environ.get("OPENAGENT_API_KEY", ""), help="its API key")
    parser.add_argument("--work-dir", type=Path, help="where logs and reports go (default: a temp dir)")
    parser.add_argument(
        "--phases",
        help="schemathesis phases (default: fuzzing, plus examples, coverage "
        "and stateful for runs of 180 s and more)",
    )
    parser.add_argument("--no-http", action="store_true", help="skip schemathesis")
    parser.add_argument("--no-ws", action="store_true", help="skip the WebSocket fuzzer")
    return parser


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ip_address(host).is_loopback
    except ValueError:
        return False


def report(http: HttpOutcome | None, ws: WsOutcome | None, master: Master, seconds: float) -> dict[str, Any]:
    server_errors = http.server_errors() if http else {}
    allowed = {k: n for k, n in (http.statuses.items() if http else []) if k.endswith(" 501")}
    return {
        "seconds": round(seconds, 1),
        "http": None
        if http is None
        else {
            "requests": http.requests,
            "server_errors": server_errors,
            "documented_501": allowed,
            "schemathesis_findings": http.failures,
            "schemathesis_exit_code": http.exit_code,
        },
        "ws": None
        if ws is None
        else {
            "loop_ok": ws.loop_ok,
            "frames_sent": ws.frames_sent,
            "frames_by_kind": dict(ws.frames_by_kind),
            "errors_by_code": dict(ws.errors_by_code),
            "fuzzer_closes": dict(ws.fuzzer_closes),
            "loop_failed": ws.loop_failed[:20],
            "loop_failed_count": len(ws.loop_failed),
            "dropped": ws.dropped,
            "spoofs_accepted": ws.spoofs_accepted,
        },
        "master_alive": master.alive(),
        "master_log_problems": master.log_problems()[:20],
    }


def failures(result: dict[str, Any]) -> list[str]:
    found = []
    http, ws = result["http"], result["ws"]
    if http and not http["requests"]:
        found.append("schemathesis made no request")
    if http and http["server_errors"]:
        found.append(f"{sum(http['server_errors'].values())} 5xx responses")
    if ws and ws["loop_failed_count"]:
        found.append(f"{ws['loop_failed_count']} failed loop queries")
    if ws and ws["dropped"]:
        found.append(f"{len(ws['dropped'])} dropped well-behaved connections")
    if ws and ws["spoofs_accepted"]:
        found.append(f"{len(ws['spoofs_accepted'])} spoofed results accepted")
    if ws is not None and ws["loop_ok"] == 0:
        found.append("no loop query succeeded")
    if not result["master_alive"]:
        found.append("the master died")
    if result["master_log_problems"]:
        found.append(f"{len(result['master_log_problems'])} tracebacks in the master's log")
    return found


async def fuzz(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="openagent-fuzz-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    if args.base_url:
        if not _loopback(args.base_url):
            raise SystemExit(f"refusing to fuzz {args.base_url}: the fuzzer stays on loopback")
        master = Master(args.base_url.rstrip("/"), args.api_key)
    else:
        clear_agents(args.redis_url)
        master = start_master(args.redis_url, log_dir=work_dir)
    started = time.monotonic()
    try:
        http_task = (
            None
            if args.no_http
            else asyncio.create_task(
                asyncio.to_thread(
                    run_schemathesis,
                    master,
                    seed=args.seed,
                    max_time=max(args.duration, MIN_HTTP_SECONDS),
                    max_examples=args.max_examples,
                    work_dir=work_dir,
                    phases=args.phases,
                )
            )
        )
        ws = None if args.no_ws else await run_ws(master, seed=args.seed, duration=args.duration)
        http = await http_task if http_task is not None else None
        result = report(http, ws, master, time.monotonic() - started)
        result["work_dir"] = str(work_dir)
    finally:
        master.stop()
        if not args.base_url:
            clear_agents(args.redis_url)
    return result, failures(result)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    result, found = asyncio.run(fuzz(args))
    print(dumps(result))
    if found:
        print("FUZZ FAILED: " + "; ".join(found))
        return 1
    print("fuzz passed: no 5xx, no crash, no dropped well-behaved connection, no failed loop query")
    return 0
