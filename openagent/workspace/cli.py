"""Command line for workspaces and the agent builder, over the master's HTTP endpoints.

::

    openagent workspace export > ws.yaml            # GET  /internal/workspace/export
    openagent workspace restore ws.yaml [--start]   # POST /internal/workspace/restore (+ yaml-agents/start);
                                                    # ${NAME} references of MCP headers from the environment
    openagent workspace start ws.yaml               # POST /internal/yaml-agents/start
    openagent workspace stop [AGENT_ID ...]         # POST /internal/yaml-agents/stop
    openagent workspace check ws.yaml               # offline: parse and validate
    openagent generate "converts km to miles" [--name NAME] [--save]   # POST /generate-agent (+ /save-agent)

They are subcommands of the ``openagent`` command (:mod:`openagent.cli`); ``python -m
openagent.workspace.cli ...`` runs them alone. The master is ``--master`` or, as for every
``openagent`` command, ``MASTER_BASE_URL`` (or ``MASTER_HOST``/``MASTER_PORT``) from the
environment or ``.env``; its key ``--api-key`` or ``OPENAGENT_API_KEY``. Exit status: 0 on
success, 1 when the master refused or an agent failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx

from openagent.config import RegistrationConfig, _environ
from openagent.errors import ConfigurationError

__all__ = ["add_subcommands", "main"]

_TIMEOUT = httpx.Timeout(180.0, connect=10.0)
_GOOD = {"registered", "started", "already_running", "skipped", "stopped", "not_running"}


class _Failed(Exception):
    """The master refused, or an agent did not come up; the message says why."""


def _client(args: argparse.Namespace) -> httpx.Client:
    config = RegistrationConfig.from_env(master_base_url=args.master or None, api_key=args.api_key)
    return httpx.Client(base_url=config.master_base_url, headers=config.auth_headers, timeout=_TIMEOUT)


def _check(response: httpx.Response) -> Any:
    if response.is_success:
        return response.json() if "json" in response.headers.get("content-type", "") else response.text
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    if isinstance(detail, dict):
        lines = [f"{detail.get('code', 'error')}: {detail.get('message', '')}"]
        lines += [
            f"  line {p.get('line')}: {p.get('field')}: {p.get('message')}"
            for p in detail.get("problems", [])
        ]
        lines += [
            f"  check {c['name']}: {c.get('detail', '')}"
            for c in detail.get("checks", [])
            if not c.get("passed")
        ]
        detail = "\n".join(lines)
    raise _Failed(
        f"{response.request.method} {response.request.url.path} answered {response.status_code}: {detail}"
    )


def _report(rows: Sequence[dict[str, Any]], out: TextIO) -> bool:
    ok = True
    for row in rows:
        reason = f" ({row['reason']})" if row.get("reason") else ""
        out.write(f"{row['agent_id']}: {row['status']}{reason}\n")
        ok = ok and row["status"] in _GOOD
    return ok


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")


def _export(args: argparse.Namespace) -> int:
    with _client(args) as http:
        text = _check(http.get("/internal/workspace/export"))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}")


def _secrets(text: str) -> dict[str, str]:
    """The values of the ``${NAME}`` references in the YAML (MCP agents' headers) that are set in
    the environment or ``.env``; the master uses them to register, and never stores the YAML's
    agents with them."""
    environ = _environ(None)
    return {name: environ[name] for name in sorted(set(_REFERENCE.findall(text))) if environ.get(name)}


def _restore(args: argparse.Namespace) -> int:
    text = _read(args.file)
    request: dict[str, Any] = {"yaml": text, "register_http": not args.no_register_http}
    secrets = _secrets(text)
    if secrets:
        request["secrets"] = secrets
    with _client(args) as http:
        body = _check(http.post("/internal/workspace/restore", json=request))
        ok = _report(body["agents"], sys.stdout)
        if args.start:
            ok = (
                _report(
                    _check(http.post("/internal/yaml-agents/start", json={"yaml": text}))["agents"],
                    sys.stdout,
                )
                and ok
            )
    return 0 if ok else 1


def _start(args: argparse.Namespace) -> int:
    with _client(args) as http:
        body = _check(http.post("/internal/yaml-agents/start", json={"yaml": _read(args.file)}))
    return 0 if _report(body["agents"], sys.stdout) else 1


def _stop(args: argparse.Namespace) -> int:
    with _client(args) as http:
        body = _check(http.post("/internal/yaml-agents/stop", json={"agent_ids": args.agent_ids or None}))
    _report(body["agents"], sys.stdout)
    return 0


def _check_file(args: argparse.Namespace) -> int:
    from openagent.errors import WorkspaceError
    from openagent.workspace.loading import load_workspace

    try:
        workspace = load_workspace(_read(args.file))
    except WorkspaceError as exc:
        raise _Failed(str(exc)) from None
    sys.stdout.write(f"ok: {len([a for a in workspace.agents if not a.builtin])} agents\n")
    return 0


def _generate(args: argparse.Namespace) -> int:
    name = args.name or " ".join(args.description.split()[:4])
    request: dict[str, Any] = {
        "name": name,
        "description": args.description,
        "transport": args.transport,
        "tools": args.tool,
        "requires_collaboration": args.collaboration,
    }
    if args.model:
        request["model"] = args.model
    with _client(args) as http:
        generated = _check(http.post("/generate-agent", json=request))
        for check in generated["checks"]:
            sys.stderr.write(f"check {check['name']}: passed {check.get('detail', '')}\n")
        if args.save:
            saved = _check(
                http.post(
                    "/save-agent",
                    json={
                        "module": generated["module"],
                        "source": generated["source"],
                        "overwrite": args.overwrite,
                    },
                )
            )
            sys.stderr.write(f"saved {saved['file']} (handler {saved['handler']})\n")
    if args.output:
        Path(args.output).write_text(generated["source"], encoding="utf-8")
    elif not args.save:
        sys.stdout.write(generated["source"])
    return 0


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Failures become one line on stderr and exit status 1, like the other ``openagent`` commands."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (_Failed, ConfigurationError, OSError) as exc:
            sys.stderr.write(f"openagent: error: {exc}\n")
        except httpx.HTTPError as exc:
            sys.stderr.write(f"openagent: error: cannot reach the master: {exc}\n")
        return 1

    return run


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", help="master HTTP URL (MASTER_BASE_URL, default http://127.0.0.1:8000)")
    parser.add_argument("--api-key", help="the master's API key (OPENAGENT_API_KEY)")


def add_subcommands(subparsers: Any) -> None:
    """Add ``workspace`` and ``generate`` to an ``argparse`` subparsers object (the ``openagent`` CLI)."""
    workspace = subparsers.add_parser("workspace", help="export, restore, start and stop YAML workspaces")
    actions = workspace.add_subparsers(dest="workspace_command", required=True)

    export = actions.add_parser("export", help="print the master's workspace YAML")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(handler=_guarded(_export))

    restore = actions.add_parser("restore", help="re-register a workspace's HTTP agents on the master")
    restore.add_argument("file", help="workspace YAML ('-' for stdin)")
    restore.add_argument("--no-register-http", action="store_true", help="only validate and report")
    restore.add_argument("--start", action="store_true", help="also start its WebSocket agents in the master")
    restore.set_defaults(handler=_guarded(_restore))

    start = actions.add_parser("start", help="run a workspace's WebSocket agents inside the master")
    start.add_argument("file", help="workspace YAML ('-' for stdin)")
    start.set_defaults(handler=_guarded(_start))

    stop = actions.add_parser("stop", help="stop agents the master's YAML runner started")
    stop.add_argument("agent_ids", nargs="*", help="agent ids (all when omitted)")
    stop.set_defaults(handler=_guarded(_stop))

    check = actions.add_parser("check", help="validate a workspace YAML offline")
    check.add_argument("file", help="workspace YAML ('-' for stdin)")
    check.set_defaults(handler=_guarded(_check_file))

    generate = subparsers.add_parser("generate", help="generate an agent module with the master's LLM")
    generate.add_argument("description", help="what the agent should do")
    generate.add_argument("--name", help="agent name (default: the description's first words)")
    generate.add_argument("--transport", choices=["websocket", "invocation"], default="websocket")
    generate.add_argument("--model", help="one of GET /generate-agent/models")
    generate.add_argument("--tool", action="append", default=[], help="a tool name the agent must offer")
    generate.add_argument("--collaboration", action="store_true", help="collaboration-aware template")
    generate.add_argument("--save", action="store_true", help="save it as agents/<module>.py on the master")
    generate.add_argument("--overwrite", action="store_true", help="with --save: replace an existing module")
    generate.add_argument("-o", "--output", help="write the source to this file")
    generate.set_defaults(handler=_guarded(_generate))

    for parser in (export, restore, start, stop, generate):
        _common(parser)
    check.set_defaults(master=None, api_key=None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="openagent", description="OpenAgent workspaces and agent builder")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
