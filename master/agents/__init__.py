"""The agents the master can call, and how it reaches them.

- :mod:`~master.agents.registry`: live WebSocket agents and their compiled tool schemas.
- :mod:`~master.agents.invocation`: HTTP invocation agents, stored in Redis and health-checked.
- :mod:`~master.agents.dispatch`: one tool call to either kind, with its timeout and callbacks.
- :mod:`~master.agents.toolbox`: the tools of one query under OpenAI function names.

Nothing here knows about LLMs, sessions or queries. The WebSocket hub that registers the
agents is a gateway above the query layer: :mod:`master.gateway`.
"""
