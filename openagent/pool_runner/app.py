"""The pool runner's HTTP API (Starlette), called by the master's sandbox.

Every route but ``GET /health`` needs ``Authorization: Bearer <POOL_RUNNER_TOKEN>`` when a
token is configured (compared in constant time); 401 otherwise.

============================== ====================================================================
Route                          What it does
============================== ====================================================================
``GET /health``                ``{"status": "ok", "agents": N}`` (no token: the kubelet probes it)
``GET /agents``                every agent: status, healthy, crash_loop, pid, restarts, exit code
``POST /agents``               start (or replace) ``{agent_id, module | source, env?, master_ws?, api_key?}``
``GET /agents/{id}``           one agent
``DELETE /agents/{id}``        stop it and remove its files
``GET /agents/{id}/logs``      ``?tail_lines=N`` (default 100): its last output lines, as JSON
============================== ====================================================================
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent.pool_runner.config import PoolRunnerConfig
from openagent.pool_runner.errors import InvalidAgentSpec, PoolFull, PoolRunnerError, UnknownAgent
from openagent.pool_runner.supervisor import AgentSpec, Supervisor

__all__ = ["create_app"]

_STATUS = {InvalidAgentSpec: 400, UnknownAgent: 404, PoolFull: 409}
_MAX_TAIL = 10_000


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


def _spec(body: Any) -> AgentSpec:
    if not isinstance(body, dict):
        raise InvalidAgentSpec("the body must be a JSON object")
    env = body.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise InvalidAgentSpec("'env' must be an object of strings")
    for name in ("agent_id", "module", "source", "master_ws", "api_key"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise InvalidAgentSpec(f"{name!r} must be a string")
    return AgentSpec(
        agent_id=body.get("agent_id") or "",
        module=body.get("module"),
        source=body.get("source"),
        env=env,
        master_ws=body.get("master_ws"),
        api_key=body.get("api_key"),  # the key the master made for this agent alone
    )


def create_app(config: PoolRunnerConfig, supervisor: Supervisor | None = None) -> Starlette:
    """The ASGI app; its lifespan stops every agent on shutdown."""
    supervisor = supervisor or Supervisor(config)
    token = config.token.encode() if config.token else None

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token)

    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> JSONResponse:
            if not authorized(request):
                return JSONResponse(
                    {"detail": "missing or invalid token: send 'Authorization: Bearer <POOL_RUNNER_TOKEN>'"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            try:
                response: JSONResponse = await handler(request)
            except PoolRunnerError as exc:
                return _error(_STATUS.get(type(exc), 400), str(exc))
            return response

        return endpoint

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "agents": len(supervisor.all())})

    async def list_agents(request: Request) -> JSONResponse:
        return JSONResponse(
            {"agents": [agent.describe() for agent in supervisor.all()], "max_agents": config.max_agents}
        )

    async def start_agent(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            raise InvalidAgentSpec("the body is not JSON") from None
        agent, replaced = await supervisor.start(_spec(body))
        return JSONResponse({**agent.describe(), "replaced": replaced}, status_code=201)

    async def get_agent(request: Request) -> JSONResponse:
        return JSONResponse(supervisor.get(request.path_params["agent_id"]).describe())

    async def stop_agent(request: Request) -> JSONResponse:
        agent = await supervisor.stop(request.path_params["agent_id"])
        return JSONResponse(agent.describe())

    async def logs(request: Request) -> JSONResponse:
        agent = supervisor.get(request.path_params["agent_id"])
        raw = request.query_params.get("tail_lines", "100")
        if not raw.isdigit():
            raise InvalidAgentSpec(f"tail_lines must be a non-negative integer, got {raw!r}")
        lines = agent.tail(min(int(raw), _MAX_TAIL))
        return JSONResponse({"agent_id": agent.agent_id, "lines": lines, **agent.describe()})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        config.workdir.mkdir(parents=True, exist_ok=True)
        try:
            yield
        finally:
            await supervisor.aclose()

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/agents", guarded(list_agents), methods=["GET"]),
            Route("/agents", guarded(start_agent), methods=["POST"]),
            Route("/agents/{agent_id:path}/logs", guarded(logs), methods=["GET"]),
            Route("/agents/{agent_id:path}", guarded(get_agent), methods=["GET"]),
            Route("/agents/{agent_id:path}", guarded(stop_agent), methods=["DELETE"]),
        ],
        lifespan=lifespan,
    )
    app.state.supervisor = supervisor
    return app
