"""What an A2A agent's card tells the hub: its skills as tools, the interface to call, its id.

The card is read by :class:`master.agents.a2a_client.A2AConnector` (discovery and health); this
module only interprets it. Each skill becomes a tool named after the skill's id (characters
outside ``[A-Za-z0-9_-]`` become ``_``, cut to 64, made unique) that takes a ``message`` and an
optional ``data``; the interface is the card's first one whose binding the SDK client speaks
here, on the registered origin when the agent has headers to send.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from a2a.types.a2a_pb2 import AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import TransportProtocol

from master.agents.connectors import ConnectorError
from protocol import AGENT_ID_PATTERN, ToolSchema

BINDINGS = (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
"""The bindings this connector speaks, in the order it prefers when the card has no preference."""
DESCRIPTION_CHARS = 1000
"""A skill's description is offered to the model cut to this many characters."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_names(skill_ids: Sequence[str]) -> list[str]:
    """Each skill id as a tool name (``^[A-Za-z0-9_-]{1,64}$``), unique within the agent."""
    names: list[str] = []
    for skill_id in skill_ids:
        base = _UNSAFE.sub("_", skill_id)[:64] or "skill"
        name, n = base, 2
        while name in names:
            suffix = f"_{n}"
            name, n = base[: 64 - len(suffix)] + suffix, n + 1
        names.append(name)
    return names


def suggested_agent_id(card_name: str) -> str | None:
    """An agent id made of the card's name (``Currency Agent`` → ``currency-agent``), or ``None``."""
    slug = re.sub(r"[^A-Za-z0-9._:-]+", "-", card_name.strip()).strip("-._:").lower()[:128]
    return slug if slug and re.fullmatch(AGENT_ID_PATTERN, slug) else None


def _skill_tool(skill: AgentSkill, name: str) -> ToolSchema:
    text = skill.description or skill.name or skill.id
    if skill.name and skill.description and skill.name != skill.description:
        text = f"{skill.name}: {skill.description}"
    if skill.examples:
        text += " Examples: " + "; ".join(skill.examples[:5])
    if len(text) > DESCRIPTION_CHARS:
        text = text[: DESCRIPTION_CHARS - 1] + "…"
    return ToolSchema(
        name=name,
        description=text,
        parameters={
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "What to ask the agent, in plain words."},
                "data": {"type": "object", "description": "Structured input, sent as a data part."},
            },
            "required": ["message"],
            "additionalProperties": False,
        },
    )


def card_tools(card: AgentCard) -> tuple[list[ToolSchema], dict[str, str]]:
    """The card's skills as tools, and each tool's skill id."""
    skills = list(card.skills)
    names = tool_names([skill.id for skill in skills])
    tools = [_skill_tool(skill, name) for skill, name in zip(skills, names, strict=True)]
    return tools, {name: skill.id for name, skill in zip(names, skills, strict=True)}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def pick_interface(card: AgentCard, url: str, headers: Mapping[str, str]) -> AgentInterface:
    """The interface the hub will call: the card's first one with a binding it speaks, over
    http(s), on the registered origin when there are headers to send (``ConnectorError`` if none)."""
    offered = [i for i in card.supported_interfaces if i.protocol_binding in BINDINGS]
    if not offered:
        bindings = sorted({i.protocol_binding for i in card.supported_interfaces}) or ["none"]
        raise ConnectorError(
            f"the agent card at {url} offers no binding the hub speaks (it offers {', '.join(bindings)}; "
            f"the hub speaks {', '.join(BINDINGS)})"
        )
    usable: list[AgentInterface] = [i for i in offered if urlsplit(i.url).scheme in ("http", "https")]
    if headers:
        usable = [i for i in usable if _origin(i.url) == _origin(url)]
    if not usable:
        where = ", ".join(i.url for i in offered)
        raise ConnectorError(
            f"the agent card at {url} lists its endpoints at {where}: none is an http(s) URL on the "
            "registered origin, and the hub sends the agent's headers only there"
            if headers
            else f"the agent card at {url} lists no http(s) endpoint (it lists {where})"
        )
    return usable[0]


def card_metadata(card: AgentCard, interface: AgentInterface, skills: dict[str, str]) -> dict[str, Any]:
    """What the hub keeps of the card with the agent (``GET /agents``' ``metadata``)."""
    return {
        "name": card.name,
        "description": card.description[:DESCRIPTION_CHARS],
        "version": card.version,
        "url": interface.url,
        "binding": interface.protocol_binding,
        "protocol_version": interface.protocol_version or None,
        "streaming": card.capabilities.streaming,
        "skills": skills,
    }
