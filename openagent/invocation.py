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
``OPENAGENT_API_KEY`` (bearer token for ``/register``), ``HTTP_REGISTER_TIMEOUT`` (``10``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import random
import re
import signal
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pydantic_core
from dotenv import load_dotenv
from pydantic import BaseModel, Field, ValidationError

from openagent.action import ProgressCallback, ToolHandler, _progress_parameters, _validate_tools
from openagent.config import _number, _text
from openagent.errors import AuthenticationError, ConfigurationError, RegistrationError, ToolError
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

DEFAULT_MASTER_BASE_URL = "http://127.0.0.1:8000"
_REGISTER_DELAYS = (0.5, 10.0)  # first and largest delay between registration attempts, seconds
_CALLBACK_ATTEMPTS, _CALLBACK_DELAY, _CALLBACK_TIMEOUT = 3, 0.2, 10.0
_PROGRESS_TIMEOUT, _UNREGISTER_TIMEOUT, _STARTUP_TIMEOUT = 5.0, 2.0, 10.0


class _Invocation(BaseModel):
    """The body of a tool call POSTed by the master."""

    call_id: str = Field(min_length=1)
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    callback_url: str
    progress_url: str | None = None


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
        unregister_on_stop: POST ``/unregister`` on :meth:`stop` (best effort). Off by default:
            the master keeps the agent across restarts of either side.

    Raises:
        ConfigurationError: Invalid ``agent_id``, tool, endpoint, URL or environment
            variable, or neither ``tool_handler`` nor :meth:`handle_tool` given.

    The resolved settings are plain attributes, to read, not to change: ``agent_id``,
    ``tools`` (with their effective ``endpoint``), ``metadata``, ``host``, ``master_base_url``,
    ``register_timeout``, ``unregister_on_stop`` and ``tool_handler``.
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
        self.tools = [_with_endpoint(agent_id, tool) for tool in _validate_tools(agent_id, tools)]
        self.metadata = dict(metadata or {})
        self.tool_handler = tool_handler
        if tool_handler is not None:
            self._progress_names = _progress_parameters(agent_id, tool_handler)
            self._handler_is_async = inspect.iscoroutinefunction(tool_handler) or inspect.iscoroutinefunction(
                type(tool_handler).__call__  # an object with an async __call__
            )
        env = _environ()
        self.host = host or _text(env, "INVOCATION_HOST") or "127.0.0.1"
        self._port = port if port is not None else _port(env)
        self._base_url = invocation_base_url or _text(env, "INVOCATION_BASE_URL")
        if self._base_url is not None:
            _check_http_url("invocation_base_url (env INVOCATION_BASE_URL)", self._base_url)
        self.master_base_url, self._api_key, self.register_timeout = _master_settings(
            master_base_url, api_key, register_timeout, env
        )
        self.unregister_on_stop = unregister_on_stop
        self._app: Starlette | None = None
        self._client: httpx.AsyncClient | None = None
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self._calls: dict[str, asyncio.Task[None]] = {}
        self._registered = False

    @property
    def port(self) -> int:
        """The port the server listens on: the bound one once started (so ``port=0`` works)."""
        if self._server is not None and self._server.started:
            return int(self._server.servers[0].sockets[0].getsockname()[1])
        return self._port

    @property
    def invocation_base_url(self) -> str:
        """The URL registered with the master (known for ``port=0`` only once started)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return self._base_url or f"http://{host}:{self.port}"

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
        if self.tool_handler is None:
            raise NotImplementedError(f"{type(self).__name__}.handle_tool() is not implemented")
        if self._handler_is_async:
            result = self.tool_handler(
                tool_name, arguments, **dict.fromkeys(self._progress_names, progress_callback)
            )
        else:
            loop = asyncio.get_running_loop()

            def blocking_progress(message: str, progress: float | None = None) -> None:
                asyncio.run_coroutine_threadsafe(progress_callback(message, progress), loop).result()

            kwargs = dict.fromkeys(self._progress_names, blocking_progress)
            result = await asyncio.to_thread(self.tool_handler, tool_name, arguments, **kwargs)
        return (await result) if inspect.isawaitable(result) else result

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
            self.app, self.host, self._port, log_level="warning", lifespan="off", ws="none"
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
                api_key=self._api_key or "",
                timeout=self.register_timeout,
                client=self._http(),
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
            with contextlib.suppress(httpx.HTTPError):
                await self._http().post(
                    f"{self.master_base_url}/unregister",
                    json={"agent_id": self.agent_id},
                    headers=_bearer(self._api_key),
                    timeout=_UNREGISTER_TIMEOUT,
                )
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
            await client.aclose()

    async def __aenter__(self) -> InvocationActionAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ serving

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
            self._client = httpx.AsyncClient(limits=limits, timeout=_CALLBACK_TIMEOUT)
        return self._client

    async def _health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "agent_id": self.agent_id})

    async def _invoke(self, request: Request) -> JSONResponse:
        """Every tool endpoint and ``/invoke``: accept the call (202) and run it in the background."""
        try:
            call = _Invocation.model_validate(await request.json())
            if httpx.URL(call.callback_url).scheme not in ("http", "https"):
                raise ValueError(f"callback_url must be an http(s) URL, got {call.callback_url!r}")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()
            )
            return JSONResponse({"detail": f"invalid tool call: {problems}"}, status_code=400)
        except (ValueError, httpx.InvalidURL) as exc:  # not JSON, or a bad callback_url
            return JSONResponse({"detail": f"invalid tool call: {exc}"}, status_code=400)
        if all(tool.name != call.tool_name for tool in self.tools):
            detail = f"unknown tool {call.tool_name!r} on agent {self.agent_id!r}"
            return JSONResponse({"detail": detail}, status_code=404)
        if call.call_id not in self._calls:  # a repeated POST of a running call does not run it twice
            task = asyncio.create_task(self._serve_call(call), name=f"openagent-call-{call.call_id}")
            self._calls[call.call_id] = task
            task.add_done_callback(lambda _: self._calls.pop(call.call_id, None))
        return JSONResponse({"accepted": True, "call_id": call.call_id}, status_code=202)

    async def _serve_call(self, call: _Invocation) -> None:
        progress_url = call.progress_url or _progress_url(call.callback_url)

        async def progress_callback(message: str, progress: float | None = None) -> None:
            if progress is not None and not 0.0 <= progress <= 1.0:
                raise ValueError(f"progress must be between 0 and 1, got {progress!r}")
            if progress_url is None:
                return
            body = {"call_id": call.call_id, "message": message, "progress": progress}
            try:
                await self._http().post(progress_url, json=body, timeout=_PROGRESS_TIMEOUT)
            except httpx.HTTPError as exc:
                logger.debug("could not post progress of call %s: %s", call.call_id, exc)

        content = await self._outcome(call, progress_callback)
        for attempt in range(1, _CALLBACK_ATTEMPTS + 1):
            try:
                response = await self._http().post(
                    call.callback_url, content=content, headers={"Content-Type": "application/json"}
                )
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return
                if response.status_code < 500:
                    logger.warning(
                        "master refused the result of call %s (HTTP %d: %s); dropping it",
                        call.call_id,
                        response.status_code,
                        _detail(response),
                    )
                    return
                problem = f"HTTP {response.status_code}"
            if attempt < _CALLBACK_ATTEMPTS:
                await asyncio.sleep(_CALLBACK_DELAY * 2 ** (attempt - 1))
        logger.error("could not deliver the result of call %s: %s", call.call_id, problem)

    async def _outcome(self, call: _Invocation, progress_callback: ProgressCallback) -> bytes:
        """The callback body (JSON bytes) of one call: its result, or why it failed."""
        try:
            value = await self.handle_tool(
                call.tool_name, call.arguments, progress_callback=progress_callback
            )
            return pydantic_core.to_json({"call_id": call.call_id, "success": True, "result": value})
        except ToolError as exc:
            logger.info("tool %s (call %s) failed: %s", call.tool_name, call.call_id, exc)
            error = str(exc)
        except pydantic_core.PydanticSerializationError as exc:
            logger.error("tool %s (call %s) returned a non-JSON value: %s", call.tool_name, call.call_id, exc)
            error = f"tool {call.tool_name!r} returned a value that is not JSON-serialisable: {exc}"
        except Exception as exc:
            logger.exception("tool %s (call %s) raised", call.tool_name, call.call_id)
            error = f"{type(exc).__name__}: {exc}"
        return pydantic_core.to_json({"call_id": call.call_id, "success": False, "error": error})


async def register_invocation_agent(
    agent_id: str,
    invocation_base_url: str,
    tools: Sequence[ToolSchema | Mapping[str, Any]],
    *,
    metadata: Mapping[str, Any] | None = None,
    master_base_url: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - seconds per attempt, not for the whole call
    client: httpx.AsyncClient | None = None,
) -> dict[str, Any]:
    """Register an HTTP agent you serve yourself: ``POST {master_base_url}/register``.

    Retries forever, with delays from 0.5 s doubling to 10 s (with jitter), while the master is
    unreachable, times out or answers 5xx; wrap it in :func:`asyncio.timeout` to give up sooner.

    Args:
        agent_id, invocation_base_url, tools, metadata: What to register.
        master_base_url: The master's HTTP URL (``MASTER_BASE_URL``, default ``http://127.0.0.1:8000``).
        api_key: Sent as ``Authorization: Bearer <api_key>`` (``OPENAGENT_API_KEY``; ``""`` for none).
        timeout: Seconds per attempt (``HTTP_REGISTER_TIMEOUT``, default 10).
        client: The HTTP client to use; a temporary one when omitted.

    Returns:
        The master's JSON reply (an empty dict when it is not a JSON object).

    Raises:
        AuthenticationError: The master answered 401: set ``OPENAGENT_API_KEY``.
        RegistrationError: Any other 4xx; the message carries the master's ``detail``.
        ConfigurationError: An invalid tool, URL or environment variable.
    """
    master_base_url, api_key, timeout = _master_settings(master_base_url, api_key, timeout, _environ())
    _check_http_url("invocation_base_url", invocation_base_url)
    body = {
        "agent_id": agent_id,
        "invocation_base_url": invocation_base_url,
        "tools": [tool.model_dump(mode="json") for tool in _validate_tools(agent_id, tools)],
        "metadata": dict(metadata or {}),
    }
    url, delay = f"{master_base_url}/register", _REGISTER_DELAYS[0]
    async with contextlib.AsyncExitStack() as stack:
        if client is None:
            client = await stack.enter_async_context(httpx.AsyncClient())
        while True:
            try:
                response = await client.post(url, json=body, headers=_bearer(api_key), timeout=timeout)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    reply = response.json() if response.content else {}
                    return reply if isinstance(reply, dict) else {}
                refused = f"master at {master_base_url} refused agent {agent_id!r}: HTTP {response.status_code}: {_detail(response)}"
                if response.status_code == 401:
                    raise AuthenticationError(f"{refused} (set OPENAGENT_API_KEY to the master's key)")
                if response.status_code < 500:
                    raise RegistrationError(refused)
                problem = f"HTTP {response.status_code}"
            wait = random.uniform(delay / 2, delay)
            logger.warning(
                "could not register agent %s at %s (%s); retrying in %.1f s", agent_id, url, problem, wait
            )
            await asyncio.sleep(wait)
            delay = min(delay * 2, _REGISTER_DELAYS[1])


def run_invocation_agent(agent: InvocationActionAgent) -> None:
    """Run an invocation agent until Ctrl-C or SIGTERM: the entry point of agent scripts.

    Like :func:`~openagent.action.run_action_agent`: configures ``logging.basicConfig(level=INFO)``
    when logging is not configured, runs :meth:`InvocationActionAgent.run` in a new event loop
    and returns after a clean stop. Must not be called from a running event loop.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> None:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await agent.run()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        logger.info("invocation agent %s interrupted", agent.agent_id)


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


def _environ() -> Mapping[str, str]:
    dotenv_path = Path.cwd() / ".env"
    if dotenv_path.is_file():
        load_dotenv(dotenv_path, override=False)
    return os.environ


def _master_settings(
    url: str | None, api_key: str | None, timeout: float | None, env: Mapping[str, str]
) -> tuple[str, str | None, float]:
    url = (url or _text(env, "MASTER_BASE_URL") or DEFAULT_MASTER_BASE_URL).rstrip("/")
    _check_http_url("master_base_url (env MASTER_BASE_URL)", url)
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"register timeout must be greater than 0, got {timeout!r}")
    key = api_key if api_key is not None else _text(env, "OPENAGENT_API_KEY")
    return url, key or None, timeout if timeout is not None else _number(env, "HTTP_REGISTER_TIMEOUT", 10.0)


def _port(env: Mapping[str, str]) -> int:
    raw = _text(env, "INVOCATION_PORT") or "9000"
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigurationError(f"INVOCATION_PORT must be a port number (0-65535), got {raw!r}")
    return int(raw)


def _check_http_url(name: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{name} must be an http:// or https:// URL, got {url!r}")


def _with_endpoint(agent_id: str, tool: ToolSchema) -> ToolSchema:
    endpoint = tool.endpoint or f"/tools/{tool.name}"
    if not endpoint.startswith("/") or endpoint == "/health":
        raise ConfigurationError(
            f"endpoint of tool {tool.name!r} of agent {agent_id!r} must be a path"
            f" starting with '/' other than '/health', got {endpoint!r}"
        )
    return tool.model_copy(update={"endpoint": endpoint})


def _progress_url(callback_url: str) -> str | None:
    """``callback_url`` with its path ending ``/tool_progress`` instead of ``/tool_callback``."""
    url = httpx.URL(callback_url)
    if not url.path.endswith("/tool_callback"):
        return None
    return str(url.copy_with(path=url.path.removesuffix("/tool_callback") + "/tool_progress"))


def _bearer(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _detail(response: httpx.Response) -> str:
    """The ``detail`` of an error answer (FastAPI style), else the start of its body."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return detail if isinstance(detail, str) else str(detail or response.text[:300] or "no detail")
