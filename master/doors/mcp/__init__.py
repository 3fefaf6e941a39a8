"""The master as an MCP server (Streamable HTTP at ``/mcp``): :class:`McpDoor` (see :mod:`.server`)."""

from master.doors.mcp.server import McpDoor

__all__ = ["McpDoor"]
