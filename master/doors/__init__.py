"""The protocol doors: the master as an MCP server (:mod:`~master.doors.mcp`), an A2A agent
(:mod:`~master.doors.a2a`) and an OpenAI-compatible API (:mod:`~master.doors.openai`).

Each door is a thin adapter: it translates its protocol's requests into a
:class:`protocol.QueryRequest` for :meth:`master.query.entry.QueryEntry.submit`, or into a tool
call through :class:`master.agents.dispatch.Dispatcher`, and translates what comes back. None has
its own admission, auth or budgets, and none imports another (``[tool.importlinter]``). The routes
mount them; the lifespan builds them.
"""
