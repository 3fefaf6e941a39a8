"""The agents the master can call, and how it reaches them.

- :mod:`~master.agents.registry`: live WebSocket agents and their compiled tool schemas.
- :mod:`~master.agents.invocation`: HTTP invocation agents, stored in Redis and health-checked.
- :mod:`~master.agents.remote`: an agent held by another master, as a tool-call target.
- :mod:`~master.agents.directory`: :class:`~master.agents.directory.AgentDirectory`, every agent the
  master can reach (the three kinds above) as one list: the query's tools, ``GET /agents``.
- :mod:`~master.agents.dispatch`: one tool call to any kind, with its timeout and callbacks.
- :mod:`~master.agents.calls`: a tool call as the layers above record it (``ToolRun``) and send it
  (``CallOptions``).
- :mod:`~master.agents.call_records`: each invocation call in Redis, so its callback can reach
  another master, or this one after a restart.
- :mod:`~master.agents.catalog`: the limits and name rules a registration must pass.
- :mod:`~master.agents.toolbox`: the tools of one query under OpenAI function names.

Nothing here knows about sessions, queries or the cluster: the agents of other masters come in
through the :class:`~master.agents.dispatch.RemoteCalls` and
:class:`~master.agents.directory.RemoteAgents` protocols, implemented in :mod:`master.cluster`. The WebSocket hub that registers the
agents is a gateway above the query layer: :mod:`master.gateway`.
"""
