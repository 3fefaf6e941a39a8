"""Checks run on generated agent code before anyone saves it.

In order: ``parses`` (ast), ``imports`` (only the SDK, the standard library minus a few
modules that reach outside the process, and an allow-list of packages; no relative or
dynamic imports), ``restricted_calls`` (no ``exec``/``eval``/``compile``/``__import__``/``open``, no dunder
attributes such as ``__subclasses__``, no attribute path that resolves to a denied module:
:mod:`master.builder.reach`),
``defines_agent`` (one agent with a literal id, of the asked transport), ``tool_schemas``
(valid, object-typed parameters, the hinted tools present), ``collaboration`` (when asked:
a real ``handle_collaboration`` wired in) and ``smoke_import`` (:mod:`master.builder.smoke`:
the module loads in a limited child process and builds exactly the agent it claims).

Passing says the code is well-formed and does what it claims at import time. It does not
prove the code safe: a tool handler is not run, and the checks cannot see what it would do.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from master.builder.analysis import AgentDefinition, ModuleAnalysis, analyse
from master.builder.reach import reach_problems
from master.builder.smoke import SmokeResult, smoke_test
from protocol import AGENT_ID_PATTERN


@dataclass(frozen=True)
class Check:
    """One check's outcome."""

    name: str
    passed: bool
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass
class CheckReport:
    """Every check that ran, and what was found."""

    checks: list[Check]
    agent: AgentDefinition | None = None
    smoke: SmokeResult | None = None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def failures(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]


def _agent_check(analysis: ModuleAnalysis, transport: str) -> tuple[Check, AgentDefinition | None]:
    agents = analysis.agents
    if not agents:
        return Check(
            "defines_agent", False, "no OrchestratorActionAgent or InvocationActionAgent is built"
        ), None
    if len(agents) > 1:
        return Check("defines_agent", False, f"{len(agents)} agents are built; a module defines one"), None
    agent = agents[0]
    if agent.problems or agent.agent_id is None:
        return Check("defines_agent", False, "; ".join(agent.problems) or "no literal agent_id"), agent
    if not re.fullmatch(AGENT_ID_PATTERN, agent.agent_id):
        return Check(
            "defines_agent", False, f"agent id {agent.agent_id!r} must match {AGENT_ID_PATTERN}"
        ), agent
    if agent.transport != transport:
        return Check(
            "defines_agent", False, f"builds a {agent.transport} agent, {transport} was asked"
        ), agent
    return Check("defines_agent", True, f"{agent.transport} agent {agent.agent_id!r}"), agent


def _tool_check(agent: AgentDefinition | None, hints: Sequence[str]) -> Check:
    if agent is None or not agent.tools:
        return Check("tool_schemas", False, "no tools could be read from the source")
    problems = []
    names = [tool["name"] for tool in agent.tools]
    for tool in agent.tools:
        parameters = tool.get("parameters", {})
        if parameters.get("type") != "object":
            problems.append(f"tool {tool['name']!r}: parameters must be a JSON Schema of type 'object'")
        elif not jsonschema_rs.meta.is_valid(parameters):
            problems.append(f"tool {tool['name']!r}: parameters is not a valid JSON Schema")
        if not tool.get("description"):
            problems.append(f"tool {tool['name']!r}: no description for the model to read")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        problems.append(f"duplicate tool names {duplicates}")
    missing = [hint for hint in hints if hint not in names]
    if missing:
        problems.append(f"asked-for tools missing: {missing}")
    if problems:
        return Check("tool_schemas", False, "; ".join(problems))
    return Check("tool_schemas", True, ", ".join(names))


def _collaboration_check(analysis: ModuleAnalysis, agent: AgentDefinition | None) -> Check:
    function = analysis.functions.get("handle_collaboration")
    if not isinstance(function, ast.AsyncFunctionDef):
        return Check("collaboration", False, "no 'async def handle_collaboration(ctx)' at module level")
    if agent is None or agent.transport != "websocket":
        return Check("collaboration", False, "collaboration needs a websocket agent")
    used = {
        node.func.attr
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    if not {"send_message", "receive_message"} <= used:
        return Check(
            "collaboration",
            False,
            "handle_collaboration must negotiate: call ctx.send_message and ctx.receive_message",
        )
    if agent.collaboration_handler != "handle_collaboration":
        return Check("collaboration", False, "pass collaboration_handler=handle_collaboration to the agent")
    return Check("collaboration", True, "handle_collaboration sends and receives peer messages")


def static_checks(
    source: str, *, transport: str, tool_hints: Sequence[str] = (), requires_collaboration: bool = False
) -> CheckReport:
    """The checks that read the source only (no process is started)."""
    try:
        analysis = analyse(source, "<generated>")
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        return CheckReport([Check("parses", False, f"{where}{exc.msg}")])
    except (ValueError, RecursionError) as exc:
        return CheckReport([Check("parses", False, str(exc))])
    checks = [Check("parses", True)]
    imports, dynamic = reach_problems(analysis.tree)
    checks.append(
        Check("imports", not imports, "; ".join(imports) or "SDK, standard library and allow-list only")
    )
    checks.append(Check("restricted_calls", not dynamic, "; ".join(dynamic)))
    agent_check, agent = _agent_check(analysis, transport)
    checks.append(agent_check)
    checks.append(_tool_check(agent if agent_check.passed else None, tool_hints))
    if requires_collaboration:
        checks.append(_collaboration_check(analysis, agent))
    return CheckReport(checks, agent=agent)


def _comparable(tools: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted(
        (tool["name"], tool.get("description", ""), json.dumps(tool.get("parameters", {}), sort_keys=True))
        for tool in tools
    )


async def check_source(
    source: str,
    module_name: str,
    *,
    transport: str,
    tool_hints: Sequence[str] = (),
    requires_collaboration: bool = False,
    smoke_timeout: float = 20.0,
) -> CheckReport:
    """Every check; the smoke test runs only when the static checks pass."""
    report = static_checks(
        source, transport=transport, tool_hints=tool_hints, requires_collaboration=requires_collaboration
    )
    if not report.passed:
        return report
    smoke = await smoke_test(source, module_name, time_limit=smoke_timeout)
    report.smoke = smoke
    agent = report.agent
    assert agent is not None
    if not smoke.ok:
        report.checks.append(Check("smoke_import", False, smoke.error))
    elif smoke.agent_id != agent.agent_id or smoke.transport != agent.transport:
        report.checks.append(
            Check(
                "smoke_import",
                False,
                f"the module built {smoke.transport} agent {smoke.agent_id!r}, "
                f"the source claims {agent.transport} agent {agent.agent_id!r}",
            )
        )
    elif _comparable(smoke.tools) != _comparable(agent.tools):
        report.checks.append(
            Check(
                "smoke_import",
                False,
                "the agent's tools at run time differ from the tool schemas in the source",
            )
        )
    else:
        report.checks.append(
            Check("smoke_import", True, f"loaded and built {smoke.agent_id!r} ({smoke.isolation})")
        )
    return report
