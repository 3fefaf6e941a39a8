"""The OpenAgent master: WebSocket hub, HTTP API, registry, sessions and LLM orchestrator.

Run it with ``python -m master`` (uvicorn with the server limits of the settings).

The packages form layers. Each imports only from the layers below it, never from one above
(``lint-imports`` checks this against ``[tool.importlinter]`` in ``pyproject.toml``); packages
side by side on one line do not import each other::

    app, __main__                 create_app; python -m master
        │
    routes │ lifespan             HTTP and WebSocket doors │ builds and closes the objects below
        │
    openapi                       shared responses in /openapi.json
        │
    deps │ asgi                   the routes' dependencies (Services) │ the lean ASGI path
        │
    doors                         MCP │ A2A │ the OpenAI API: thin adapters onto query and dispatch
        │
    drain                         SIGTERM: refuse new work, finish what runs, hand off
        │
    gateway                       the WebSocket hub (/ws): agents register, queries come in
        │
    query                         one query: admission, session, context, orchestrator, answer
        │
    sandbox                       Kubernetes: deploy saved agents (auto mode spawns them)
        │
    builder                       generate, check, save and discover agents; workspaces
        │
    cluster                       several masters on one Redis: directory, inboxes, collaborations
        │
    orchestration │ collaboration the tool-calling loop and plans │ peer-to-peer sessions
        │
    conversation │ attachments    session turns and context │ files and the RAG link
        │
    agents                        registry, invocation agents, dispatch, the agent directory
        │
    observability                 metrics, logs, traces
        │
    llm                           the ChatModel seam, the OpenAI-compatible client, tokens
        │
    auth │ caches │ errors │ error_responses │ redis_client │ redis_keys │ settings

A query walks down once: a route or the hub hands it to the query service, which runs the
orchestrator, which calls agents through the dispatcher, which stores through Redis.
Where a lower package needs something an upper one provides, it declares a small protocol and
takes the implementation in its constructor: the dispatcher's
:class:`~master.agents.dispatch.RemoteCalls`, the agent directory's
:class:`~master.agents.directory.RemoteAgents` and the collaboration manager's
:class:`~master.collaboration.remote.RemoteMembers`, all three implemented in :mod:`master.cluster`.
"""
