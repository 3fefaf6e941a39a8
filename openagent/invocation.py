"""Invocation action agents: expose tools over HTTP instead of a WebSocket.

An invocation agent runs its own small HTTP server and registers once with
``POST {MASTER_BASE_URL}/register``. The master keeps the registration (in Redis), so the
agent survives master restarts. For each tool call the master POSTs
``{"call_id", "tool_name", "arguments", "callback_url", "progress_url"}`` to the tool's
endpoint; the agent answers ``202`` at once, runs the tool in the background and POSTs
``{"call_id", "success", "result" | "error"}`` to ``callback_url`` when it is done::

    from openagent import ToolSchema
    from openagent.invocation import InvocationActionAgent, run_invocation_agent

    ECHO = ToolSchema(name="echo", endpoint="/run",
                      parameters={"type": "object", "properties": {"text": {"type": "string"}}})

    async def handle_tool(tool_name, arguments, *, progress=None):
        if progress:
            await progress("echoing", 0.5)
        return {"echo": arguments.get("text")}

    run_invocation_agent(InvocationActionAgent("echo-agent", [ECHO], tool_handler=handle_tool))

Routes of the agent's app: ``GET /health``; ``POST`` on each tool's ``endpoint`` (default
``/tools/{name}``, registered as such); ``POST /invoke``, which serves every tool by
``tool_name``. A bad body is answered ``400``, an unknown tool ``404``, both with a JSON
``detail``. Results and failures follow :mod:`openagent.action`: a
:class:`~openagent.errors.ToolError`'s message as is, other exceptions as
``"<Type>: <message>"``. Needs the ``invocation`` extra: ``pip install 'openagent[invocation]'``.

Environment (``.env`` in the working directory is loaded first; arguments win):
``INVOCATION_HOST`` (``127.0.0.1``), ``INVOCATION_PORT`` (``9000``), ``INVOCATION_BASE_URL``
(``http://{host}:{port}``), ``MASTER_BASE_URL`` (``http://127.0.0.1:8000``),
``OPENAGENT_API_KEY`` (bearer token for ``/register``), ``HTTP_REGISTER_TIMEOUT`` (``10``);
see :class:`~openagent.config.InvocationConfig`. Registration itself is
:func:`~openagent.registration.register_invocation_agent`, re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, Field, ValidationError

from openagent._callbacks import CallReporter
from openagent._handlers import ProgressCallback, ToolFunction, ToolHandler, run_tool_call, validate_tools
from openagent._runner import run_until_signalled
from openagent.config import InvocationConfig
from openagent.errors import ConfigurationError
from openagent.registration import register_invocation_agent
from protocol import AGENT_ID_PATTERN, ToolSchema

try:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        f"openagent.invocation needs Starlette and uvicorn: pip install 'openagent[invocation]' ({exc})"
    ) from exc

__all__ = ["InvocationActionAgent", "register_invocation_agent", "run_invocation_agent"]

logger = logging.getLogger("openagent.invocation")

_CALLBACK_TIMEOUT, _UNREGISTER_TIMEOUT, _STARTUP_TIMEOUT = 10.0, 2.0, 10.0  # seconds


class _Invocation(BaseModel):
    """The body of a tool call POSTed by the master."""

    call_id: str = Field(min_length=1)
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    callback_url: str
    progress_url: str | None = None
    result_window_seconds: float | None = Field(default=None, gt=0)
    """How long the master keeps the call's record (its timeout + 60 s): results are retried until then."""


class InvocationActionAgent:
    """An action agent served over HTTP: pass ``tool_handler`` or subclass and implement :meth:`handle_tool`.

    Args:
        agent_id: Unique id on the master (letters, digits, ``. _ : -``; up to 128).
        tools: The tools, as :class:`~protocol.ToolSchema` or dicts of the same shape.
        invocation_base_url: URL the master uses to reach this agent (``INVOCATION_BASE_URL``;
            default ``http://{host}:{port}`` with the port actually bound).
        tool_handler: ``handler(tool_name, arguments, ...)``, async or not, called exactly like
            :class:`~openagent.action.OrchestratorActionAgent` calls it: a parameter named
            ``progress`` and/or ``progress_callback`` (or ``**kwargs``) gets the progress callback.
        metadata: Free-form description sent with the registration.
        host, port: Where the server listens (``INVOCATION_HOST``, ``INVOCATION_PORT``); port 0
            picks a free port, see :attr:`port`.
        master_base_url, api_key, register_timeout: See :func:`register_invocation_agent`.
        replica_urls: Base URLs of further copies of this agent (the same tools), registered with
            it: the master balances the calls over :attr:`invocation_base_url` and these, and a
            call whose connection is refused goes to another one. Each copy runs the same code;
            one of them registering them all is enough (see :func:`register_invocation_agent`).
        unregister_on_stop: POST ``/unregister`` on :meth:`stop` (best effort). Off by default:
            the master keeps the agent across restarts of either side.

    Raises:
        ConfigurationError: Invalid ``agent_id``, tool, endpoint, URL or environment
            variable, or neither ``tool_handler`` nor :meth:`handle_tool` given.

    The resolved settings are plain attributes, to read, not to change: ``agent_id``,
    ``tools`` (with their effective ``endpoint``), ``metadata``, ``host``, ``master_base_url``,
    ``register_timeout``, ``replica_urls``, ``unregister_on_stop`` and ``tool_handler``.
    """

    def __init__(
        self,
        agent_id: str,
        tools: Sequence[ToolSchema | Mapping[str, Any]],
        invocation_base_url: str | None = None,
        tool_handler: ToolHandler | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        host: str | None = None,
        port: int | None = None,
        master_base_url: str | None = None,
        api_key: str | None = None,
        register_timeout: float | None = None,
        replica_urls: Sequence[str] = (),
        unregister_on_stop: bool = False,
    ) -> None:
        if tool_handler is None and type(self).handle_tool is InvocationActionAgent.handle_tool:
            raise ConfigurationError(
                f"agent {agent_id!r}: pass tool_handler=... or subclass InvocationActionAgent"
                " and implement handle_tool()"
            )
        if not re.fullmatch(AGENT_ID_PATTERN, agent_id):
            raise ConfigurationError(f"invalid agent_id {agent_id!r}: must match {AGENT_ID_PATTERN}")
        self.agent_id = agent_id
        self.tools = [_with_endpoint(agent_id, tool) for tool in validate_tools(agent_id, tools)]
        self.metadata = dict(metadata or {})
        self.tool_handler = tool_handler
        self._tool_function = ToolFunction(agent_id, tool_handler) if tool_handler is not None else None
        self._config = config = InvocationConfig.from_env(
            host=host,
            port=port,
            invocation_base_url=invocation_base_url,
            master_base_url=master_base_url,
            api_key=api_key,
            register_timeout=register_timeout,
        )
        self.host = config.host
        self.master_base_url = config.registration.master_base_url
        self.register_timeout = config.registration.timeout
        if isinstance(replica_urls, str):
            raise ConfigurationError(f"agent {agent_id!r}: replica_urls must be a list of URLs, not a string")
        for url in replica_urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"agent {agent_id!r}: replica_urls must be http:// or https:// URLs, got {url!r}"
                )
        self.replica_urls = tuple(replica_urls)
        self.unregister_on_stop = unregister_on_stop
        self._app: Starlette | None = None
        self._client: aiohttp.ClientSession | None = None
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self._calls: dict[str, asyncio.Task[None]] = {}
        self._registered = False

    @property
    def port(self) -> int:
        """The port the server listens on: the bound one once started (so ``port=0`` works)."""
        if self._server is not None and self._server.started:
            return int(self._server.servers[0].sockets[0].getsockname()[1])
        return self._config.port

    @property
    def invocation_base_url(self) -> str:
        """The URL registered with the master (known for ``port=0`` only once started)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return self._config.invocation_base_url or f"http://{host}:{self.port}"

    @property
    def app(self) -> Starlette:
        """The agent's Starlette app, for serving it yourself (then call :func:`register_invocation_agent`,
        and :meth:`stop` at the end to cancel running calls and close the HTTP client)."""
        if self._app is None:
            paths = dict.fromkeys(["/invoke", *(str(tool.endpoint) for tool in self.tools)])
            routes = [Route(path, self._invoke, methods=["POST"]) for path in paths]
            self._app = Starlette(routes=[Route("/health", self._health, methods=["GET"]), *routes])
        return self._app

    async def handle_tool(
        self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
    ) -> Any:
        """Run one tool call and return its JSON-serialisable result; subclasses may override it.

        The default calls ``tool_handler`` (a plain function runs in a worker thread and gets a
        blocking progress callback). Raise :class:`~openagent.errors.ToolError` to fail the
        call with a clean message. ``progress_callback(message, progress=None)`` POSTs the
        master's ``progress_url``; failures to post are logged and ignored.
        """
        if self._tool_function is None:
            raise NotImplementedError(f"{type(self).__name__}.handle_tool() is not implemented")
        return await self._tool_function(tool_name, arguments, progress_callback)

    async def start(self) -> None:
        """Start the HTTP server, then register (retrying while the master is down); return once registered.

        Raises:
            ConfigurationError: Already started.
            OSError: The server could not listen on ``host:port``.
            AuthenticationError, RegistrationError: The master refused the registration.
        """
        if self._serving is not None:
            raise ConfigurationError(f"agent {self.agent_id!r} is already started")
        config = uvicorn.Config(
            self.app, self.host, self._config.port, log_level="warning", lifespan="off", ws="none"
        )
        config.timeout_graceful_shutdown = 5  # seconds for requests in flight when stopping
        self._server = server = _Server(config)
        self._serving = serving = asyncio.create_task(_serve(server), name=f"openagent-http-{self.agent_id}")
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT):
                while not server.started:
                    if serving.done():
                        serving.result()
                        raise OSError(f"the server of agent {self.agent_id!r} stopped during startup")
                    await asyncio.sleep(0.01)
            logger.info("invocation agent %s listening at %s", self.agent_id, self.invocation_base_url)
            await register_invocation_agent(
                self.agent_id,
                self.invocation_base_url,
                self.tools,
                metadata=self.metadata,
                master_base_url=self.master_base_url,
                api_key=self._config.registration.api_key or "",
                timeout=self.register_timeout,
                replica_urls=self.replica_urls,
            )
        except BaseException:
            await self.stop()
            raise
        self._registered = True
        logger.info(
            "invocation agent %s registered tools: %s", self.agent_id, ", ".join(t.name for t in self.tools)
        )

    async def run(self) -> None:
        """Start (unless started) and serve until :meth:`stop` is called or the task is cancelled."""
        if self._serving is None:
            await self.start()
        assert self._serving is not None
        try:
            await asyncio.shield(self._serving)
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Unregister (if ``unregister_on_stop``), stop the server, cancel the running calls (their
        results are never posted) and close the HTTP client. Safe to call twice."""
        if self.unregister_on_stop and self._registered:
            self._registered = False
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self._http().post(
                    f"{self.master_base_url}/unregister",
                    json={"agent_id": self.agent_id},
                    headers=self._config.registration.auth_headers,
                    timeout=aiohttp.ClientTimeout(total=_UNREGISTER_TIMEOUT),
                ):
                    pass
        serving, self._serving = self._serving, None
        if serving is not None and self._server is not None:  # first: no new calls come in
            self._server.should_exit = True
            await asyncio.gather(serving, return_exceptions=True)
            logger.info("invocation agent %s stopped", self.agent_id)
        self._server = None
        calls = list(self._calls.values())
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> InvocationActionAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ serving

    def _http(self) -> aiohttp.ClientSession:
        if self._client is None:
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=100),
                timeout=aiohttp.ClientTimeout(total=_CALLBACK_TIMEOUT),
            )
        return self._client

    async def _health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "agent_id": self.agent_id})

    async def _invoke(self, request: Request) -> JSONResponse:
        """Every tool endpoint and ``/invoke``: accept the call (202) and run it in the background."""
        try:
            call = _Invocation.model_validate(await request.json())
            if urlsplit(call.callback_url).scheme not in ("http", "https"):
                raise ValueError(f"callback_url must be an http(s) URL, got {call.callback_url!r}")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()
            )
            return JSONResponse({"detail": f"invalid tool call: {problems}"}, status_code=400)
        except ValueError as exc:  # not JSON, or a bad callback_url
            return JSONResponse({"detail": f"invalid tool call: {exc}"}, status_code=400)
        if all(tool.name != call.tool_name for tool in self.tools):
            detail = f"unknown tool {call.tool_name!r} on agent {self.agent_id!r}"
            return JSONResponse({"detail": detail}, status_code=404)
        if call.call_id not in self._calls:  # a repeated POST of a running call does not run it twice
            traceparent = request.headers.get("traceparent")
            task = asyncio.create_task(
                self._serve_call(call, traceparent), name=f"openagent-call-{call.call_id}"
            )
            self._calls[call.call_id] = task
            task.add_done_callback(lambda _: self._calls.pop(call.call_id, None))
        return JSONResponse({"accepted": True, "call_id": call.call_id}, status_code=202)

    async def _serve_call(self, call: _Invocation, traceparent: str | None = None) -> None:
        reporter = CallReporter(
            self._http, call.call_id, call.callback_url, call.progress_url, call.result_window_seconds
        )
        result = await run_tool_call(
            call.call_id,
            call.tool_name,
            lambda: self.handle_tool(call.tool_name, call.arguments, progress_callback=reporter.progress),
            logger,
            agent_id=self.agent_id,
            traceparent=traceparent,
        )
        await reporter.deliver(result)


def run_invocation_agent(agent: InvocationActionAgent) -> None:
    """Run an invocation agent until Ctrl-C or SIGTERM: the entry point of agent scripts.

    Like :func:`~openagent.action.run_action_agent`: configures ``logging.basicConfig(level=INFO)``
    when logging is not configured, runs :meth:`InvocationActionAgent.run` in a new event loop
    and returns after a clean stop. Must not be called from a running event loop.
    """
    run_until_signalled(agent, kind="invocation agent", log=logger)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves the process's signals alone: the agent's owner handles them."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def _serve(server: uvicorn.Server) -> None:
    try:
        await server.serve()
    except SystemExit:  # uvicorn exits the process when it cannot bind; fail the start instead
        raise OSError(
            f"could not listen on {server.config.host}:{server.config.port} (see the log)"
        ) from None


def _with_endpoint(agent_id: str, tool: ToolSchema) -> ToolSchema:
    endpoint = tool.endpoint or f"/tools/{tool.name}"
    if not endpoint.startswith("/") or endpoint == "/health":
        raise ConfigurationError(
            f"endpoint of tool {tool.name!r} of agent {agent_id!r} must be a path"
            f" starting with '/' other than '/health', got {endpoint!r}"
        )
    return tool.model_copy(update={"endpoint": endpoint})
