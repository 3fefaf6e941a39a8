"""The one approval verdict (:class:`master.query.policy.ApprovalPolicy`): what waits, what is
refused, and that nothing that would wait ever runs for want of a place to keep it."""

from __future__ import annotations

import pytest

from master.agents.registry import AgentTool
from master.query.policy import ApprovalPolicy, Mode
from protocol import ToolSchema
from tests.factories import master_settings

GUARDED = AgentTool.compile(
    "bank", ToolSchema(name="transfer", parameters={"type": "object"}, requires_approval=True)
)
PLAIN = AgentTool.compile("bank", ToolSchema(name="balance", parameters={"type": "object"}))
NAMED = AgentTool.compile("bank", ToolSchema(name="close", parameters={"type": "object"}))


def _policy(*, can_wait: bool = True) -> ApprovalPolicy:
    settings = master_settings(openagent_approval_tools="bank__close", openagent_approval_exempt="bank__ok*")
    return ApprovalPolicy(settings, can_wait=can_wait)


@pytest.mark.parametrize(
    ("tool", "mode", "expected"),
    [
        (GUARDED, "policy", "hold"),
        (NAMED, "policy", "hold"),  # the operator's pattern
        (PLAIN, "policy", "run"),
        (PLAIN, "always", "hold"),
        (GUARDED, "never", "refuse"),
        (NAMED, "never", "refuse"),  # an asker cannot opt out of the operator's policy
        (PLAIN, "never", "run"),
    ],
)
def test_the_verdict(tool: AgentTool, mode: Mode, expected: str) -> None:
    name = f"bank__{tool.schema.name}"
    assert _policy().verdict(name, "bank", tool, mode=mode) == expected


def test_the_exemption_and_a_remembered_approval_run() -> None:
    policy = _policy()
    assert policy.verdict("bank__ok_transfer", "bank", GUARDED) == "run"
    assert (
        policy.verdict("bank__transfer", "bank", GUARDED, remembered=frozenset({("bank", "transfer")}))
        == "run"
    )
    assert (
        policy.verdict("bank__transfer", "bank", GUARDED, remembered=frozenset({("other", "transfer")}))
        == "hold"
    )


def test_without_a_place_to_keep_a_held_call_it_is_refused_not_run() -> None:
    policy = _policy(can_wait=False)
    assert policy.verdict("bank__transfer", "bank", GUARDED) == "refuse"
    assert policy.verdict("bank__close", "bank", NAMED, mode="always") == "refuse"
    assert policy.verdict("bank__balance", "bank", PLAIN) == "run"
