"""The master as an MCP server (Streamable HTTP at ``/mcp``)."""
