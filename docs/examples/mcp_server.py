"""A small Streamable-HTTP MCP server, built with the official MCP SDK, to attach to the hub.

    pip install 'openagent[mcp]'
    MCP_SERVER_TOKEN=s3cret python docs/examples/mcp_server.py      # http://127.0.0.1:9100/mcp

With ``MCP_SERVER_TOKEN`` set, every request must carry ``Authorization: Bearer <token>``.
"""

import os

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("word-tools", version="1.0.0", instructions="Counts and reverses words.")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
async def count_words(text: str, ctx: Context) -> int:
    """Count the words of a text."""
    await ctx.report_progress(1, 2, "counting")
    return len(text.split())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def reverse_words(text: str) -> str:
    """Reverse the order of the words of a text."""
    return " ".join(reversed(text.split()))


def app():
    inner = server.streamable_http_app()
    token = os.environ.get("MCP_SERVER_TOKEN")

    async def guarded(scope, receive, send):
        if token and scope["type"] == "http":
            sent = dict(scope["headers"]).get(b"authorization", b"").decode()
            if sent != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await inner(scope, receive, send)

    return guarded


if __name__ == "__main__":
    port = int(os.environ.get("MCP_SERVER_PORT", "9100"))
    config = uvicorn.Config(app(), host="127.0.0.1", port=port, lifespan="on")
    anyio.run(uvicorn.Server(config).serve)
