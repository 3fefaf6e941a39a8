"""The ``openagent`` command: run the master, ask it a question, list its agents, run an agent.

::

    openagent master                       # run the master (needs pip install 'openagent[master]')
    openagent ask "What is 12 times 7?"    # print the answer, the agents used and the session id
    openagent ask --session ID "And 8?"    # continue that session
    openagent ask --attach report.pdf "Summarize it"   # attach files (repeatable)
    openagent agents                       # list the connected and registered agents
    openagent keys create ci --role client # make an API key (prints its secret once)
    openagent keys list                    # the stored keys (never a secret)
    openagent keys revoke key_0123abcd     # revoke one, on every master at once
    openagent run path/to/agent.py         # run an agent module
    openagent mcp-bridge --agent-id time -- python -m mcp_server_time   # a stdio MCP server as an agent
    openagent workspace export > ws.yaml   # workspaces and the agent builder: see openagent.workspace.cli
    openagent workspace restore ws.yaml
    openagent generate "converts km to miles" --save
    openagent approvals                    # tool calls waiting for a person: see openagent.approvals_cli
    openagent approve ID --edit '{"amount": 200}'
    openagent reject ID --reason "not today"

Every command reads the environment and ``.env`` in the current directory as the SDK does
(:mod:`openagent.config`): ``MASTER_BASE_URL`` (or ``MASTER_HOST``/``MASTER_PORT``) says
where the master is, ``OPENAGENT_API_KEY`` is sent as the bearer token. Only ``openagent
master`` imports the master.

Exit status: 0 done; 1 the command failed (the master is unreachable or refused the request,
the answer failed, an agent file is not an agent; one line on stderr says why); 2 the command
line is wrong (usage on stderr).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import importlib.util
import json
import logging
import mimetypes
import os
import runpy
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from openagent._http_cli import CommandError, answer_timeout, request
from openagent.approvals_cli import add_subcommands as add_approval_commands
from openagent.config import ClientConfig, _client_host, _environ, _master_host, _port
from openagent.errors import ConfigurationError, OpenAgentError
from openagent.workspace.cli import add_subcommands as add_workspace_commands

__all__ = ["main"]

_MASTER_MODULES = ("fastapi", "uvicorn", "redis", "openai", "pydantic_settings")
_AGENT_FACTORIES = ("build_agent", "make_agent")


# -- the commands ----------------------------------------------------------------------------------


def _master(args: argparse.Namespace) -> int:
    missing = [name for name in _MASTER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise CommandError(
            f"'openagent master' needs the master extra (missing: {', '.join(missing)}): "
            "pip install 'openagent[master]'"
        )
    environ = _environ(None)
    host = args.host or _master_host(environ)
    port = args.port if args.port is not None else _port(environ, "MASTER_PORT", 8000)
    # The master's settings derive MASTER_BASE_URL from these when it is not set explicitly.
    os.environ["MASTER_HOST"], os.environ["MASTER_PORT"] = host, str(port)
    os.environ.setdefault("MASTER_BASE_URL", f"http://{_client_host(host)}:{port}")
    raw_limit = environ.get("OPENAGENT_WS_MAX_MESSAGE_BYTES", "").strip() or "16777216"
    if not raw_limit.isdigit():
        raise CommandError(f"OPENAGENT_WS_MAX_MESSAGE_BYTES must be a number of bytes, got {raw_limit!r}")
    import uvicorn

    # As `python -m master`: the server's own frame limit is the master's, so a larger frame is
    # refused (close 1009) before it is buffered, and few frames wait per connection.
    uvicorn.run("master.app:app", host=host, port=port, ws_max_size=int(raw_limit), ws_max_queue=4)
    return 0


def _ask(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"query": args.question}
    if args.session:
        body["session_id"] = args.session
    if args.agent:
        body["allowed_agent_ids"] = args.agent
    if args.attach:
        body["attachments"] = [_attachment(path) for path in args.attach]
    result = request("POST", "/query", body=body, timeout=answer_timeout(), refusal=_refusal)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0 if result.get("success") else 1
    if result.get("success"):
        print(result.get("answer") or "")
    else:
        code = f" ({result['error_code']})" if result.get("error_code") else ""
        print(f"openagent ask: failed{code}: {result.get('error') or result.get('answer')}", file=sys.stderr)
    used = [f"{row.get('agent_id')} ({row.get('tool_name')})" for row in result.get("agents_used") or []]
    print()
    for approval in result.get("approvals") or [] if result.get("status") == "awaiting_approval" else []:
        arguments = json.dumps(approval.get("arguments"), ensure_ascii=False)
        print(f"waiting for approval: {approval.get('agent_id')}.{approval.get('tool_name')} {arguments}")
        print(
            f"  decide: openagent approve {approval.get('approval_id')} [--edit JSON]  |  reject ... --reason TEXT"
        )
    print(f"agents used: {', '.join(used) if used else 'none'}")
    session = result.get("session_id")
    print(f'session: {session}   (continue it: openagent ask --session {session} "...")')
    return 0 if result.get("success") else 1


def _attachment(path: Path) -> dict[str, str]:
    """A file as a ``/query`` attachment (``protocol.Attachment``): its name, its type guessed
    from the name, its bytes in base64; the master checks sizes and counts."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot attach {str(path)!r}: {exc.strerror or exc}") from None
    mime_type, _ = mimetypes.guess_type(path.name)
    return {
        "filename": path.name,
        "mime_type": mime_type or "application/octet-stream",
        "content_base64": base64.b64encode(data).decode("ascii"),
    }


def _agents(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = request("GET", "/agents", timeout=10.0, refusal=_refusal).get("agents", [])
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("no agents (start one: openagent run path/to/agent.py)")
        return 0
    width = max(len(str(row.get("agent_id"))) for row in rows)
    for row in rows:
        tools = ", ".join(str(tool.get("name")) for tool in row.get("tools") or []) or "-"
        where = row.get("connection_type", "?")
        print(
            f"{row.get('agent_id')!s:<{width}}  {row.get('role', '?'):<6}  {where:<10}  "
            f"{row.get('status', '?'):<8}  tools: {tools}"
        )
    return 0


def _keys_create(args: argparse.Namespace) -> int:
    body = {
        "name": args.name,
        "role": args.role,
        "tenant": args.tenant,
        "agent_ids": args.agent_id or [],
        "approves": args.approves or [],
    }
    key = request("POST", "/keys", timeout=10.0, body=body, refusal=_refusal)
    if args.json:
        print(json.dumps(key, indent=2, ensure_ascii=False))
        return 0
    print(
        f"created {key.get('key_id')} ({key.get('name')}, role {key.get('role')}, tenant {key.get('tenant')})"
    )
    print(f"secret: {key.get('secret')}")
    print("the secret is shown only now: send it as 'Authorization: Bearer <secret>'")
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = request("GET", "/keys", timeout=10.0, refusal=_refusal).get("keys", [])
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("no stored keys (OPENAGENT_API_KEY is the administrator's; make one: openagent keys create)")
        return 0
    for row in rows:
        patterns = ",".join(row.get("agent_ids") or []) or "-"
        approves = ",".join(row.get("approves") or []) or "-"
        used = row.get("last_used")
        print(
            f"{row.get('key_id')}  {row.get('role'):<7}  tenant {row.get('tenant')}  agents {patterns}  "
            f"approves {approves}  last used {_when(used) if used else 'never'}  {row.get('name')}"
        )
    return 0


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _keys_revoke(args: argparse.Namespace) -> int:
    request("DELETE", f"/keys/{args.key_id}", timeout=10.0, refusal=_refusal)
    print(f"revoked {args.key_id}")
    return 0


def _run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.is_file():
        raise CommandError(f"no such agent file: {str(path)!r}")
    _environ(None)  # load .env before the module reads its settings
    # As `python path/to/agent.py` would, plus the current directory (for `sample_agents.x` imports).
    for entry in (str(Path.cwd()), str(path.resolve().parent)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    module = _load(path)
    agent = _find_agent(module, path)
    if agent is None:
        runpy.run_path(str(path), run_name="__main__")  # a plain script: run it as Python would
        return 0
    from openagent.action import OrchestratorWebSocketActionAgent, run_action_agent

    if isinstance(agent, OrchestratorWebSocketActionAgent):
        run_action_agent(agent)
        return 0
    invocation = sys.modules.get("openagent.invocation")
    if invocation is not None and isinstance(agent, invocation.InvocationActionAgent):
        invocation.run_invocation_agent(agent)
        return 0
    raise CommandError(
        f"{path}: {type(agent).__name__} is not an agent (expected an OrchestratorWebSocketActionAgent "
        "or InvocationActionAgent)"
    )


def _mcp_bridge(args: argparse.Namespace) -> int:
    command = list(args.server_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CommandError(
            "mcp-bridge needs the MCP server's command after --, e.g. "
            "openagent mcp-bridge --agent-id time -- python -m mcp_server_time"
        )
    _environ(None)  # load .env before the configuration is read
    config = ClientConfig.from_env()
    if args.master:
        config = dataclasses.replace(config, master_ws=_ws_url(args.master))
    from openagent.mcp import McpBridge

    bridge = McpBridge(args.agent_id, command, config=config)
    from openagent._runner import run_until_signalled

    try:
        run_until_signalled(bridge, kind="MCP bridge", log=logging.getLogger("openagent.mcp"))
    except OpenAgentError as exc:
        raise CommandError(f"mcp-bridge {args.agent_id}: {exc}") from None
    return 0


def _ws_url(master: str) -> str:
    """``--master``: a ``ws(s)://`` URL as is; an ``http(s)://`` base URL becomes its ``/ws`` URL."""
    url = master.strip().rstrip("/")
    if url.startswith(("ws://", "wss://")):
        return url
    for scheme, ws_scheme in (("https://", "wss://"), ("http://", "ws://")):
        if url.startswith(scheme):
            return f"{ws_scheme}{url[len(scheme) :]}/ws"
    raise CommandError(f"--master must be an http(s):// or ws(s):// URL, got {master!r}")


# -- helpers -------------------------------------------------------------------------------------


def _refusal(method: str, url: str, status: int, payload: Any, text: str) -> str:
    """The master refused: ``POST http://.../query answered 404: unknown_session: ...``."""
    if status == 401:
        return f"{method} {url}: 401, set OPENAGENT_API_KEY (environment or .env) to the master's key"
    return f"{method} {url} answered {status}: {_error_message(payload, text)}"


def _error_message(payload: Any, text: str = "") -> str:
    """The readable message of an error body, with its code: ``unknown_session: unknown session 'x'``.

    Knows the master's shapes (``{"detail": "..."}``, ``{"detail": {"code", "message"}}``, a
    validation error's ``{"detail": [{"loc", "msg"}]}``, ``{"error_code", "error"}`` and
    ``{"error": {"code", "message"}}``); anything else is shown as text, never as a Python repr.
    """
    if not isinstance(payload, dict):
        return text.strip()[:300] or "no detail"
    for key in ("detail", "error"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            code = payload.get("error_code") or payload.get("code")
            return f"{code}: {value}" if isinstance(code, str) and code else value
        if isinstance(value, dict):
            message = value.get("message") or value.get("msg") or value.get("detail")
            code = value.get("code") or value.get("error_code")
            if isinstance(message, str):
                return f"{code}: {message}" if isinstance(code, str) and code else message
        if isinstance(value, list) and value:
            return "; ".join(_problem(item) for item in value[:5])
    message = payload.get("message")
    if isinstance(message, str):
        return message
    return json.dumps(payload, ensure_ascii=False)[:300]


def _problem(item: Any) -> str:
    if isinstance(item, dict):
        where = ".".join(str(part) for part in item.get("loc") or [] if part != "body")
        message = str(item.get("msg") or item.get("message") or "")
        return f"{where}: {message}" if where else message
    return str(item)


def _load(path: Path) -> Any:
    name = f"_openagent_run_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CommandError(f"cannot load {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _find_agent(module: Any, path: Path) -> Any:
    """``module.agent``, else what ``build_agent()`` or ``make_agent()`` returns, else ``None``."""
    agent = getattr(module, "agent", None)
    if agent is not None and not callable(agent):
        return agent
    for name in _AGENT_FACTORIES:
        factory = getattr(module, name, None)
        if callable(factory):
            try:
                return factory()
            except TypeError as exc:
                raise CommandError(f"{path}: {name}() must be callable without arguments ({exc})") from None
    return None


EXIT_STATUS = """\
exit status:
  0  done
  1  the command failed: the master is unreachable or refused the request, the answer
     failed, or the agent file is not an agent (one line on stderr says why)
  2  the command line is wrong (usage on stderr)"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openagent",
        description="OpenAgent: run the master, ask it questions, list and run agents.",
        epilog=(
            "Settings come from the environment and ./.env: MASTER_BASE_URL (or MASTER_HOST and\n"
            "MASTER_PORT) locate the master, OPENAGENT_API_KEY authenticates.\n"
            "'openagent COMMAND --help' describes a command.\n\n" + EXIT_STATUS
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    master = commands.add_parser(
        "master",
        help="run the master (needs: pip install 'openagent[master]')",
        description="Run the master with uvicorn. Needs the master extra: pip install 'openagent[master]'.",
    )
    master.add_argument("--host", help="address to listen on (default: MASTER_HOST or 127.0.0.1)")
    master.add_argument("--port", type=int, help="port to listen on (default: MASTER_PORT or 8000)")
    master.set_defaults(handler=_master)

    ask = commands.add_parser(
        "ask",
        help="ask the master a question; prints the answer, the agents used and the session id",
        description="Send a question to POST /query and print the answer, the agents used and the session id.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ask.add_argument("question", help='the question, e.g. "What is 12 times 7?"')
    ask.add_argument(
        "--session", metavar="SESSION_ID", help="continue this session (printed by an earlier ask)"
    )
    ask.add_argument(
        "--agent", action="append", metavar="AGENT_ID", help="only use this agent's tools (repeatable)"
    )
    ask.add_argument(
        "--attach",
        action="append",
        type=Path,
        metavar="FILE",
        help="attach this file (repeatable); the RAG agents answer from it, and later questions "
        "of the same session can use it too",
    )
    ask.add_argument("--json", action="store_true", help="print the whole JSON response")
    ask.set_defaults(handler=_ask)

    agents = commands.add_parser(
        "agents", help="list the agents the master knows", description="List the agents (GET /agents)."
    )
    agents.add_argument("--json", action="store_true", help="print the JSON rows")
    agents.set_defaults(handler=_agents)

    keys = commands.add_parser(
        "keys",
        help="create, list and revoke API keys (needs an administrator's key)",
        description="Manage the master's stored API keys (POST, GET and DELETE /keys).",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    key_commands = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = key_commands.add_parser("create", help="make a key; prints its secret, shown only once")
    create.add_argument("name", help="who or what holds the key, e.g. ci-bot")
    create.add_argument(
        "--role", required=True, choices=["admin", "client", "agent", "viewer"], help="what the key may do"
    )
    create.add_argument("--tenant", default="default", help="the tenant it belongs to (default: default)")
    create.add_argument(
        "--agent-id",
        action="append",
        metavar="PATTERN",
        help="for --role agent: an agent id pattern it may register, e.g. 'weather-*' (repeatable)",
    )
    create.add_argument(
        "--approves",
        action="append",
        metavar="PATTERN",
        help="for --role client or admin: a pattern of the tools whose approvals it decides, e.g. "
        "'bank__*' (repeatable); once a key of the tenant has one, only such keys decide those tools' "
        "approvals, never the asker's",
    )
    create.add_argument("--json", action="store_true", help="print the JSON answer")
    create.set_defaults(handler=_keys_create)
    listing = key_commands.add_parser("list", help="the stored keys (never a secret)")
    listing.add_argument("--json", action="store_true", help="print the JSON rows")
    listing.set_defaults(handler=_keys_list)
    revoke = key_commands.add_parser("revoke", help="revoke a key, on every master at once")
    revoke.add_argument("key_id", help="the key's id (openagent keys list)")
    revoke.set_defaults(handler=_keys_revoke)

    run = commands.add_parser(
        "run",
        help="run an agent module, e.g. openagent run sample_agents/calculator.py",
        description=(
            "Run the agent defined in a Python file: its module-level 'agent', else what its "
            "build_agent() or make_agent() returns; a file with none of these runs as a script."
        ),
    )
    run.add_argument("path", help="the agent's .py file")
    run.set_defaults(handler=_run)

    bridge = commands.add_parser(
        "mcp-bridge",
        help="run a stdio MCP server and connect its tools to the master as one agent",
        description=(
            "Start a local (stdio) MCP server as a child process and connect its tools to the master "
            "as a WebSocket action agent. When the server exits, the agent leaves the hub and the "
            "server is started again after a backoff delay. Needs: pip install 'openagent[mcp]'."
        ),
        epilog="example: openagent mcp-bridge --agent-id time -- python -m mcp_server_time",
    )
    bridge.add_argument("--agent-id", required=True, help="the agent's id on the master")
    bridge.add_argument(
        "--master", help="the master's URL, http(s)://host:port or ws(s)://host:port/ws (default: MASTER_WS)"
    )
    bridge.add_argument(
        "server_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the MCP server's command",
    )
    bridge.set_defaults(handler=_mcp_bridge)

    add_workspace_commands(commands)  # workspace export|restore|start|stop|check, generate
    add_approval_commands(commands)  # approvals, approve, reject
    return parser


def _fail(message: str) -> NoReturn:
    print(f"openagent: error: {message}", file=sys.stderr)
    raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``openagent`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    args = _parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except (CommandError, ConfigurationError) as exc:
        _fail(str(exc))
    return status
