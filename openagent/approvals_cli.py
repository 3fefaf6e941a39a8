"""Command line for tool calls that wait for a person (``docs/guides/approvals.md``).

::

    openagent approvals [--session ID]                    # GET  /approvals[?session_id=]
    openagent approve ID [--edit JSON] [--remember-session]   # POST /approvals/{ID} {"decision": "approve"}
    openagent reject ID --reason TEXT                     # POST /approvals/{ID} {"decision": "reject"}

They are subcommands of the ``openagent`` command (:mod:`openagent.cli`). The master is found as
for every ``openagent`` command: ``MASTER_BASE_URL`` (or ``MASTER_HOST``/``MASTER_PORT``) from the
environment or ``.env``, its key ``OPENAGENT_API_KEY``. When a decision is the last one of its
round, the run resumes and the command prints its answer, as ``openagent ask`` does.

Exit status: 0 done; 1 the master refused (unknown approval 404, decided already 409 naming the
decision that stands, edited arguments that do not fit the tool's schema 422) or is unreachable;
2 the command line is wrong (``--edit`` that is not a JSON object).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from openagent._http_cli import CommandError, answer_timeout, request
from openagent.errors import ConfigurationError

__all__ = ["add_subcommands", "time_left"]


class _Usage(Exception):
    """The command line is wrong (exit status 2)."""


def time_left(expires_at: float, now: float) -> str:
    """``23h59m``, ``4m05s``, ``12s`` until ``expires_at``; ``expired`` once past."""
    seconds = int(expires_at - now)
    if seconds <= 0:
        return "expired"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _refusal(method: str, url: str, status: int, payload: Any, text: str) -> str:
    """One line for a refusal: the master's message, and for a 409 the decision that stands (the
    approval id says what was asked, so neither ``method`` nor ``url`` is repeated)."""
    if not isinstance(payload, dict):
        return f"the master answered {status}: {text.strip()[:300] or 'no detail'}"
    code = payload.get("error_code")
    detail = payload.get("detail")
    if status == 401:
        return "401: set OPENAGENT_API_KEY (environment or .env) to the master's key"
    if isinstance(detail, dict) and isinstance(detail.get("approval"), dict):
        approval = detail["approval"]
        stands = []
        if approval.get("edited_arguments") is not None:
            stands.append(f"with arguments {json.dumps(approval['edited_arguments'], ensure_ascii=False)}")
        if approval.get("message"):
            stands.append(f"reason {approval['message']!r}")
        more = f" ({', '.join(stands)})" if stands else ""
        return f"{status} {code}: {detail.get('message')}{more}"
    if isinstance(detail, list):  # FastAPI's own validation errors
        detail = "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', []) if p != 'body')}: {item.get('msg')}"
            for item in detail
            if isinstance(item, dict)
        )
    return f"{status} {code or 'error'}: {detail}"


def _print_result(result: dict[str, Any]) -> int:
    if result.get("status") == "awaiting_approval":
        waiting = [a for a in result.get("approvals") or [] if a.get("status") == "pending"]
        ids = ", ".join(str(a.get("approval_id")) for a in waiting)
        print(f"decided; the run waits for {len(waiting)} more decision(s) of its round: {ids}")
        return 0
    if result.get("success"):
        print(result.get("answer") or "")
    else:
        code = f" ({result['error_code']})" if result.get("error_code") else ""
        print(f"the resumed run failed{code}: {result.get('error') or result.get('answer')}", file=sys.stderr)
    used = [f"{row.get('agent_id')} ({row.get('tool_name')})" for row in result.get("agents_used") or []]
    print()
    print(f"agents used: {', '.join(used) if used else 'none'}")
    print(f"session: {result.get('session_id')}")
    return 0 if result.get("success") else 1


def _list(args: argparse.Namespace) -> int:
    route = "/approvals" + (f"?session_id={quote(args.session)}" if args.session else "")
    rows: list[dict[str, Any]] = request("GET", route, timeout=10.0, refusal=_refusal).get("approvals", [])
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("no approvals" + (f" in session {args.session}" if args.session else " pending"))
        return 0
    now = time.time()
    table = [("ID", "SESSION", "AGENT", "TOOL", "STATUS", "TIME LEFT")] + [
        (
            str(row.get("approval_id")),
            str(row.get("session_id")),
            str(row.get("agent_id")),
            str(row.get("tool_name")),
            str(row.get("status")),
            time_left(float(row.get("expires_at") or 0), now) if row.get("status") == "pending" else "-",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return 0


def _decide(approval_id: str, body: dict[str, Any]) -> int:
    route = f"/approvals/{quote(approval_id)}"
    return _print_result(request("POST", route, body=body, timeout=answer_timeout(), refusal=_refusal))


def _approve(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"decision": "approve"}
    if args.edit is not None:
        try:
            edited = json.loads(args.edit)
        except ValueError as exc:
            raise _Usage(f"--edit is not valid JSON ({exc}): {args.edit!r}") from None
        if not isinstance(edited, dict):
            raise _Usage(f"--edit must be a JSON object of the tool's arguments, got {args.edit!r}")
        body["arguments"] = edited
    if args.remember_session:
        body["remember"] = "session"
    return _decide(args.approval_id, body)


def _reject(args: argparse.Namespace) -> int:
    return _decide(args.approval_id, {"decision": "reject", "message": args.reason})


def _guarded(name: str, handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (CommandError, ConfigurationError) as exc:
            print(f"openagent {name}: error: {exc}", file=sys.stderr)
            return 1
        except _Usage as exc:
            print(f"openagent {name}: error: {exc}", file=sys.stderr)
            return 2

    return run


def add_subcommands(subparsers: Any) -> None:
    """Add ``approvals``, ``approve`` and ``reject`` to the ``openagent`` command's subparsers."""
    listing = subparsers.add_parser(
        "approvals",
        help="list the tool calls waiting for a person (GET /approvals)",
        description=(
            "List approvals: without --session, the pending ones of every session; with it, the "
            "session's approvals whatever their status."
        ),
    )
    listing.add_argument("--session", metavar="SESSION_ID", help="only this session's approvals")
    listing.add_argument("--json", action="store_true", help="print the JSON rows")
    listing.set_defaults(handler=_guarded("approvals", _list))

    approve = subparsers.add_parser(
        "approve",
        help="approve a held tool call, optionally with edited arguments",
        description=(
            "Approve a held tool call (POST /approvals/ID). When it is the last pending call of its "
            "round, the run resumes and its answer is printed."
        ),
    )
    approve.add_argument("approval_id", metavar="ID", help="the approval's id (openagent approvals)")
    approve.add_argument(
        "--edit",
        metavar="JSON",
        help='run the call with these arguments instead, e.g. \'{"to": "bob", "amount": 200}\'',
    )
    approve.add_argument(
        "--remember-session",
        action="store_true",
        help="approve this tool for the rest of the session too",
    )
    approve.set_defaults(handler=_guarded("approve", _approve))

    reject = subparsers.add_parser(
        "reject",
        help="refuse a held tool call; the model is told why",
        description="Refuse a held tool call (POST /approvals/ID); it is not run and the model is told the reason.",
    )
    reject.add_argument("approval_id", metavar="ID", help="the approval's id (openagent approvals)")
    reject.add_argument("--reason", required=True, help="why, told to the model")
    reject.set_defaults(handler=_guarded("reject", _reject))
