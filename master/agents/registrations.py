"""What registers an agent: the bodies of ``POST /register`` (HTTP invocation, MCP, A2A) and the
record each becomes in Redis (:mod:`master.agents.invocation` keeps them)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

from master.agents.base_urls import MAX_REPLICA_URLS, URL_PATH, URL_PATTERN, check_base_url, checked_base_url
from protocol import AGENT_ID_PATTERN, ToolSchema

DEFAULT_ENDPOINT = "/invoke"
"""Path the master POSTs a call to when the tool declares no ``endpoint``."""

Health = Literal["UP", "DOWN", "UNKNOWN"]
Transport = Literal["invocation", "mcp", "a2a"]
"""How a registered agent is reached: HTTP invocation, an MCP server, an A2A agent
(:mod:`master.agents.connectors`)."""


class InvocationRegistration(BaseModel):
    """Body of ``POST /register``."""

    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    # The pattern is checked by _usable_url, whose messages name the problem (not the expression).
    invocation_base_url: str = Field(max_length=2048, json_schema_extra={"pattern": URL_PATTERN})
    """Where the agent's HTTP server listens, e.g. ``http://127.0.0.1:9000`` (ASCII, no user info)."""
    tools: list[ToolSchema] = Field(min_length=1, json_schema_extra={"uniqueItems": True})
    """Each tool once (a name declared twice is refused with 422)."""
    metadata: dict[str, Any] = Field(default_factory=dict)

    replica_urls: list[Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": URL_PATTERN})]] = (
        Field(default_factory=list, max_length=MAX_REPLICA_URLS, json_schema_extra={"uniqueItems": True})
    )
    """Further base URLs of copies of the same agent (the same tools): calls are balanced over
    ``invocation_base_url`` and these (fewest in flight, then in turn); a call whose connection
    is refused goes to another one (it was not sent)."""

    @field_validator("invocation_base_url")
    @classmethod
    def _usable_url(cls, url: str) -> str:
        return checked_base_url(url)

    @field_validator("replica_urls")
    @classmethod
    def _usable_replica_urls(cls, urls: list[str]) -> list[str]:
        for index, url in enumerate(urls):
            try:
                checked_base_url(url)
            except ValueError as exc:
                raise ValueError(f"replica_urls[{index}] {exc}") from None
        bare = [url.rstrip("/") for url in urls]
        if len(set(bare)) != len(bare):
            raise ValueError("replica_urls must not list a URL twice")
        return urls

    @model_validator(mode="after")
    def _distinct_urls(self) -> InvocationRegistration:
        if self.invocation_base_url.rstrip("/") in {url.rstrip("/") for url in self.replica_urls}:
            raise ValueError("replica_urls must not repeat invocation_base_url")
        return self

    @field_validator("tools")
    @classmethod
    def _usable_endpoints(cls, tools: list[ToolSchema]) -> list[ToolSchema]:
        for tool in tools:
            endpoint = tool.endpoint
            if endpoint is not None and (len(endpoint) > 512 or not URL_PATH.fullmatch(endpoint)):
                raise ValueError(
                    f"tool {tool.name!r}: endpoint must be a URL path of at most 512 ASCII characters"
                )
        return tools


_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"


def _printable_headers(headers: dict[str, str]) -> dict[str, str]:
    """Header values as HTTP sends them: printable ASCII (and tabs) only, so no header can be
    smuggled in with a line break and the HTTP clients can encode every one (never echoed)."""
    for name, value in headers.items():
        if not all(" " <= char <= "~" or char == "\t" for char in value):
            raise ValueError(f"header {name!r}: its value must be printable ASCII (no line breaks or NUL)")
    return headers


def _checked_url(url: str) -> str:
    check_base_url(url)
    if not re.fullmatch(URL_PATTERN, url):
        raise ValueError("must be http(s)://host[:port][/path], e.g. http://127.0.0.1:9000/mcp")
    return url


Headers = Annotated[
    dict[Annotated[str, Field(pattern=_HEADER_NAME)], Annotated[str, Field(max_length=8192)]],
    Field(max_length=32),
    AfterValidator(_printable_headers),
]
"""Headers sent with every request to a remote agent (e.g. ``Authorization``): secrets, never
shown in ``GET /agents``, never logged, never echoed in an error."""

RemoteUrl = Annotated[
    str, Field(max_length=2048, json_schema_extra={"pattern": URL_PATTERN}), AfterValidator(_checked_url)
]
"""An MCP server's or A2A agent's URL: ``http(s)://host[:port][/path]``, ASCII, no user info."""


class McpRegistration(BaseModel):
    """Body of ``POST /register`` for an MCP server (Streamable HTTP)."""

    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    mcp_url: RemoteUrl
    """The server's MCP endpoint, e.g. ``http://127.0.0.1:9000/mcp``."""
    mcp_headers: Headers = Field(default_factory=dict)
    """Sent with every request (e.g. ``{"Authorization": "Bearer ..."}``); secrets."""


class A2ARegistration(BaseModel):
    """Body of ``POST /register`` for an A2A agent."""

    agent_id: str | None = Field(default=None, pattern=AGENT_ID_PATTERN)
    """Defaults to a name taken from the agent's card."""
    a2a_url: RemoteUrl
    """Where the agent's card is: ``{a2a_url}/.well-known/agent-card.json``."""
    a2a_headers: Headers = Field(default_factory=dict)
    """Sent with every request, the card's included; secrets."""


class StoredAgent(InvocationRegistration):
    """A registered agent's record in Redis, whatever its transport."""

    transport: Transport = "invocation"
    headers: dict[str, str] = Field(default_factory=dict)
    tools: list[ToolSchema] = Field(default_factory=list)  # a remote server may have none yet
    tenant: str | None = None
