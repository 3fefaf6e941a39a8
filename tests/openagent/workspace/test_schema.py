"""``openagent.workspace.schema``: the JSON Schema published in docs/ and what it accepts."""

from __future__ import annotations

import json

import jsonschema_rs
import yaml

from openagent.workspace import json_schema_text, load_workspace
from tests.openagent.workspace.samples import EXAMPLE, MINIMAL, SCHEMA_FILE


def test_the_published_json_schema_is_up_to_date() -> None:
    assert SCHEMA_FILE.read_text() == json_schema_text(), (
        "docs/workspace.schema.json is stale: run "
        "python -m openagent.workspace schema > docs/workspace.schema.json"
    )


def test_the_json_schema_validates_the_repo_example_workspace() -> None:
    validator = jsonschema_rs.validator_for(json.loads(SCHEMA_FILE.read_text()))
    document = yaml.safe_load(EXAMPLE.read_text())
    assert validator.is_valid(document), list(validator.iter_errors(document))
    workspace = load_workspace(EXAMPLE.read_text())
    assert {agent.agent_id for agent in workspace.agents} >= {"weather-agent", "demo-invocation-agent"}


def test_the_json_schema_refuses_an_unknown_field() -> None:
    validator = jsonschema_rs.validator_for(json.loads(SCHEMA_FILE.read_text()))
    document = yaml.safe_load(MINIMAL)
    document["agents"][0]["toolz"] = []
    assert not validator.is_valid(document)
