"""The MCP baseline: the bench's ``echo`` tool served directly by an MCP server.

``python -m bench.mcp_direct --port 9103``. Built with the same SDK and the same pieces as the
master's ``/mcp`` (:mod:`master.doors.mcp`): the low-level ``Server`` with ``tools/list`` and
``tools/call`` handlers and a ``get_tool_input_schema`` lookup, its Streamable HTTP session
manager (DNS-rebinding check on loopback, as the master has), uvicorn. So the ``mcp_*`` cases
compare what the hub adds (auth, admission, dispatch to a WebSocket agent and back, metrics,
records) with a server that runs the function itself.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bench.child import raise_fd_limit
from bench.echo_tool import ECHO_TOOL, TOOL_NAME, echo

TOOL = types.Tool(name=TOOL_NAME, description=ECHO_TOOL["description"], input_schema=ECHO_TOOL["parameters"])


async def _list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name != TOOL_NAME:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"unknown tool {params.name!r}")], is_error=True
        )
    result = await echo(params.name, params.arguments or {})
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))], structured_content=result
    )


def _schema(name: str) -> dict[str, Any] | None:
    return TOOL.input_schema if name == TOOL_NAME else None


def app() -> Any:
    server = Server(
        "bench-mcp-direct",
        version="1",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        get_tool_input_schema=_schema,
    )
    return server.streamable_http_app(custom_starlette_routes=[Route("/health", _health)])


async def _health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_direct")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    raise_fd_limit()
    config = uvicorn.Config(app(), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
