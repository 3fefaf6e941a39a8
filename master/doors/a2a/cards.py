"""The agent cards: the hub's (one skill, "ask the orchestrator") and each hub agent's (its tools).

What a card reveals (the guide docs/guides/a2a-clients.md says the same):

- the hub's card: the master's A2A URL and bindings, that it streams, that it wants a bearer
  key; nothing about the agents connected;
- an agent's card: the agent's id, and for each of its tools the name, the description and the
  JSON Schema of its arguments (in the skill's description and, machine-readable, in the
  :data:`TOOL_SCHEMAS_EXTENSION` extension's params), exactly what the orchestrator's LLM sees.
  Never the agent's address, headers, transport or the master it is connected to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from google.protobuf.struct_pb2 import Struct

from master.query.entry import OfferedTool

HUB_PATH = "/a2a"
"""The hub's A2A endpoint (JSON-RPC ``POST``; HTTP+JSON under it)."""
AGENTS_PATH = "/a2a/agents"
"""``{AGENTS_PATH}/{agent_id}``: one hub agent's A2A endpoint."""
CARD_PATH = "/.well-known/agent-card.json"
HUB_CARD_PATHS = (CARD_PATH, f"{HUB_PATH}{CARD_PATH}")
"""The hub's card: at the server's root and under its endpoint (``create_from_url(".../a2a")``)."""

PROTOCOL_VERSION_0_3 = "0.3.0"
"""The 0.3 interfaces' version, as 0.3 cards spell it (the SDK's ``"0.3"`` is the same to it)."""

TOOL_SCHEMAS_EXTENSION = "https://github.com/openagent/openagent/a2a/tool-schemas/v1"
"""The extension whose ``params.tools`` maps each skill id to its tool's argument JSON Schema."""

ASK_SKILL_ID = "ask"
VERSION = "0.1.0"

_MODES = ["text/plain", "application/json"]
_BEARER = "bearer"


def agent_path(agent_id: str) -> str:
    return f"{AGENTS_PATH}/{agent_id}"


def _interfaces(url: str) -> list[AgentInterface]:
    """Both bindings at ``url``, in 1.0 then in 0.3 (the door serves both versions there).

    The 0.3 interfaces make the SDK's card serializer add the 0.3 fields (``url``,
    ``preferredTransport``, ``additionalInterfaces``, ``protocolVersion``) beside the 1.0
    ``supportedInterfaces``, so that 0.3 clients discover the card too; 1.0 clients take the
    first interface of their binding, a 1.0 one."""
    return [
        AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
        for version in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        for binding in (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
    ]


def _security() -> dict[str, object]:
    return {
        "security_schemes": {
            _BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    description="The master's OPENAGENT_API_KEY, as 'Authorization: Bearer <key>'.",
                )
            )
        },
        "security_requirements": [SecurityRequirement(schemes={_BEARER: StringList()})],
    }


def hub_card(base_url: str) -> AgentCard:
    """The hub as one A2A agent: the orchestrator, with every agent on offer."""
    base = base_url.rstrip("/")
    return AgentCard(
        name="OpenAgent",
        description=(
            "The OpenAgent hub's orchestrator: it answers a text message with the tools of every "
            "agent connected to the hub. Each agent is also an A2A agent of its own, at "
            f"{base}{AGENTS_PATH}/<agent_id>."
        ),
        supported_interfaces=_interfaces(f"{base}{HUB_PATH}"),
        provider=AgentProvider(organization="OpenAgent", url=base),
        version=VERSION,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=[
            AgentSkill(
                id=ASK_SKILL_ID,
                name="Ask the orchestrator",
                description=(
                    "Send a question as text; the orchestrator answers it, calling the hub's "
                    "agents' tools as needed. A follow-up in the same contextId continues the conversation."
                ),
                tags=["orchestrator", "tools"],
                input_modes=["text/plain"],
                output_modes=["text/plain"],
            )
        ],
        **_security(),  # type: ignore[arg-type]
    )


def agent_card(base_url: str, agent_id: str, tools: Iterable[OfferedTool]) -> AgentCard:
    """One hub agent as an A2A agent: its skills are its tools."""
    base = base_url.rstrip("/")
    tools = list(tools)
    schemas = Struct()
    schemas.update({"tools": {tool.tool_name: tool.parameters for tool in tools}})
    return AgentCard(
        name=agent_id,
        description=(
            f"The OpenAgent hub agent {agent_id!r}. Send text: the hub's orchestrator answers with "
            'this agent\'s tools only. Send a data part {"tool": "<skill id>", "arguments": {...}}: '
            "the hub calls that tool directly, the arguments checked against its schema."
        ),
        supported_interfaces=_interfaces(f"{base}{agent_path(agent_id)}"),
        provider=AgentProvider(organization="OpenAgent", url=base),
        version=VERSION,
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extensions=[
                AgentExtension(
                    uri=TOOL_SCHEMAS_EXTENSION,
                    description="params.tools maps each skill id to the JSON Schema of its arguments",
                    required=False,
                    params=schemas,
                )
            ],
        ),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=[_skill(tool) for tool in tools],
        **_security(),  # type: ignore[arg-type]
    )


def _skill(tool: OfferedTool) -> AgentSkill:
    schema = json.dumps(tool.parameters, separators=(",", ":"), sort_keys=True)
    description = (tool.description or tool.tool_name).strip()
    return AgentSkill(
        id=tool.tool_name,
        name=tool.tool_name,
        description=(
            f"{description}\n\nCall it directly with a data part "
            f'{{"tool": "{tool.tool_name}", "arguments": {{...}}}}; arguments JSON Schema: {schema}'
        ),
        tags=["tool"],
        input_modes=["application/json", "text/plain"],
        output_modes=["application/json", "text/plain"],
    )
