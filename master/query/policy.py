"""Which tool calls wait for a person: :class:`ApprovalPolicy`, the one verdict every call gets.

The orchestrator's calls (:meth:`master.query.service.QueryService.run`, through its approval
hook) and the direct calls of every door (:meth:`master.query.entry.QueryEntry.call_tool`: MCP
``tools/call``, the A2A direct tool call) ask the same object, so no door can run a call that the
policy holds. A verdict is ``run``, ``hold`` (the call waits for a decision, :mod:`master.query.approvals`)
or ``refuse`` (it is not run at all). It weighs, in this order:

- ``OPENAGENT_APPROVAL_EXEMPT`` patterns over the function name: the exemption wins, ``run``;
- the tools a person approved for the rest of the session (``remembered``): ``run``;
- the request's ``approval`` mode: ``always`` holds every call;
- the tool's own ``requires_approval`` and ``OPENAGENT_APPROVAL_TOOLS`` patterns: ``hold``, or
  ``refuse`` when the request asked for no approval (``never``): the asker may ask for more
  approvals than the policy, never for fewer.

It fails closed: a master that keeps no approvals (no store for a paused call) refuses what
would wait, rather than running it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Literal

from master.agents.dispatch import Target
from master.agents.registry import AgentTool
from master.orchestration.orchestrator import Verdict
from master.settings import Settings

Mode = Literal["never", "always", "policy"]
"""A request's ``approval`` (:attr:`protocol.QueryRequest.approval`)."""

NO_REMEMBERED: frozenset[tuple[str, str]] = frozenset()


class ApprovalPolicy:
    """The verdict on one tool call (module docstring)."""

    def __init__(self, settings: Settings, *, can_wait: bool) -> None:
        self._wanted = _patterns(settings.openagent_approval_tools)
        self._exempt = _patterns(settings.openagent_approval_exempt)
        self.can_wait = can_wait
        """Whether a held call can be kept (an approval store): without one, ``hold`` is ``refuse``."""

    def verdict(
        self,
        name: str,
        agent_id: str,
        tool: AgentTool,
        *,
        mode: Mode = "policy",
        remembered: frozenset[tuple[str, str]] = NO_REMEMBERED,
    ) -> Verdict:
        """Whether the call of ``tool`` (function ``name``, on ``agent_id``) runs, waits for a
        person or is refused. ``remembered``: the ``(agent_id, tool_name)`` pairs a person approved
        for the rest of the session."""
        if any(fnmatch.fnmatchcase(name, p) for p in self._exempt):
            return "run"
        if (agent_id, tool.schema.name) in remembered:
            return "run"
        wanted = (
            mode == "always"
            or tool.schema.requires_approval
            or any(fnmatch.fnmatchcase(name, p) for p in self._wanted)
        )
        if not wanted:
            return "run"
        if mode == "never" or not self.can_wait:
            return "refuse"
        return "hold"

    def hook(
        self, mode: Mode = "policy", remembered: frozenset[tuple[str, str]] = NO_REMEMBERED
    ) -> Callable[[str, Target, AgentTool], Verdict]:
        """:meth:`verdict` as the orchestrator's approval hook (:attr:`RunHooks.approval`)."""

        def verdict(name: str, agent: Target, tool: AgentTool) -> Verdict:
            return self.verdict(name, agent.agent_id, tool, mode=mode, remembered=remembered)

        return verdict


def _patterns(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


__all__ = ["ApprovalPolicy", "Mode"]
