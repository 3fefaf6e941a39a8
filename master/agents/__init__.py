"""The agents the master can call, and how it reaches them.

- :mod:`~master.agents.hub`: the WebSocket hub at ``/ws`` (registration, frames, keep-alive).
- :mod:`~master.agents.registry`: live WebSocket agents and their compiled tool schemas.
- :mod:`~master.agents.invocation`: HTTP invocation agents, stored in Redis and health-checked.
- :mod:`~master.agents.dispatch`: one tool call to either kind, with its timeout and callbacks.
- :mod:`~master.agents.toolbox`: the tools of one query under OpenAI function names.

Nothing here knows about LLMs, sessions or queries: the hub hands ``query`` frames to a
callable it is given.
"""
