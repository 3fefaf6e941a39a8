"""The OpenAgent master: WebSocket hub, HTTP API, registry, sessions and LLM orchestrator.

Run it with ``python -m master`` (uvicorn with the server limits of the settings).

The packages form four tiers, each with a job (``lint-imports`` checks them against
``[tool.importlinter]`` in ``pyproject.toml``). Within a tier a line imports only the lines
below it; ``│`` separates packages that never import each other, ``,`` packages in no fixed
order::

    EDGE            how requests come in and the master is put together
      app │ __main__                    create_app; python -m master
      lifespan │ routes                 builds and closes everything │ the HTTP and /ws routes
      openapi, deps, asgi, doors,       shared answers; the routes' Services; the lean ASGI path;
      gateway                           MCP │ A2A │ OpenAI │ AG-UI doors; the /ws hub and SIGTERM's drain
        │
    USE CASES       what a caller asks for
      query                             the way in: admission, the run, events, the error answer
      runs, sandbox, builder, cluster   the run's state and verbs; Kubernetes deployments;
                                        agent generation and workspaces; several masters
        │
    DOMAIN          how a question is answered
      orchestration │ collaboration     the tool-calling loop and plans │ peer-to-peer sessions
      conversation │ attachments        session turns and context │ files and the RAG link
      agents                            registry, invocation agents, dispatch, the directory
        │
    INFRASTRUCTURE  what everything stands on
      access                            keys, roles, the access middleware, audit
      observability                     metrics, logs, traces
      llm                               the ChatModel interface, the OpenAI-compatible client
      auth │ errors │ settings │ storage  principals; the error envelope; settings; Redis: client, keys, caches

Tiers import only downward, and no two packages import each other, even through others.
Walls of their own:

- the edge never imports :mod:`master.storage.redis_keys` nor ``redis``: the stores below own the keys
  (:mod:`master.runs.a2a_tasks`, :mod:`master.runs.responses`, the session store, ...);
- the domain reaches the LLM only through :mod:`master.llm.model` (``ChatModel``, its
  messages and results), never the client's modules (``chat_endpoint``, ``chat_body``, ``compat``,
  pyreqwest);
- the doors never import each other; the SDK (``openagent``) never imports the master, and the
  wire models (``protocol``) import neither.

A query walks down once: a route or the hub hands it to the query service, which runs the
orchestrator, which calls agents through the dispatcher, which stores through Redis.
Where a lower package needs something an upper one provides, it declares a small protocol and
takes the implementation in its constructor: the dispatcher's
:class:`~master.agents.dispatch.RemoteCalls`, the agent directory's
:class:`~master.agents.directory.RemoteAgents` and the collaboration manager's
:class:`~master.collaboration.remote.RemoteMembers`, all three implemented in :mod:`master.cluster`.
"""
