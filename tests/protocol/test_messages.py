"""The wire protocol's models."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

import protocol
from protocol import Query, QueryResult, Register, ToolResult, parse_message


def test_parse_each_direction() -> None:
    msg = parse_message('{"type":"register","agent_id":"a","role":"action","tools":[{"name":"t"}],"x":1}')
    assert isinstance(msg, Register) and msg.tools[0].parameters == {"type": "object", "properties": {}}
    msg = parse_message('{"type":"tool_result","call_id":"c","success":false,"error":"boom"}')
    assert isinstance(msg, ToolResult) and msg.error == "boom"
    msg = parse_message('{"type":"query","query_id":"q","query":"hi","auto_mode":true}')
    assert isinstance(msg, Query) and msg.auto_mode and msg.orchestrator_prompt_profile == "default"


def test_query_result_carries_the_query_response_fields() -> None:
    frame = QueryResult(query_id="q", session_id="s", success=True, answer="a").model_dump()
    assert set(frame) == {
        "type",
        "query_id",
        "run_id",
        "session_id",
        "success",
        "answer",
        "error",
        "error_code",
        "agents_used",
        "status",
        "plan",
        "stopped_by",
        "usage",
        "tool_calls",
        "steps",
        "approvals",
    }


@pytest.mark.parametrize(
    "frame",
    [
        "{",
        '{"type":"nope"}',
        '{"type":"register","agent_id":"","role":"action"}',
        '{"type":"register","agent_id":"a","role":"boss"}',
        '{"type":"tool_progress","call_id":"c","progress":2}',
        '{"type":"register","agent_id":"a","role":"action","tools":[{"name":"bad name"}]}',
        '{"type":"cancel"}',
        '{"type":"cancel","query_id":"q","run_id":"r"}',
    ],
)
def test_invalid_frames(frame: str) -> None:
    with pytest.raises(ValidationError):
        parse_message(frame)


def test_every_message_has_a_type_tag() -> None:
    members = get_args(get_args(protocol.Message)[0])
    types = {member.model_fields["type"].default for member in members}
    assert len(types) == len(members) == 17
    assert {
        "register",
        "query",
        "tool_call",
        "peer_message",
        "collaboration_start",
        "run_event",
        "collaboration_end",
    } <= types


def test_protocol_imports_nothing_of_master_or_openagent() -> None:
    import subprocess
    import sys

    code = (
        "import protocol, sys; assert not any(m.split('.')[0] in ('master','openagent') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
