"""A2A agents as hub agents: the ``a2a`` connector, built on the official ``a2a-sdk`` client.

``POST /register {"a2a_url": ..., "a2a_headers": {...}}`` makes one hub agent of one A2A agent:

- **Discovery** (:mod:`master.agents.a2a_cards`) reads the agent card at ``{a2a_url}/.well-known/agent-card.json`` and picks the
  first interface (in the card's order of preference) whose binding the SDK client speaks here:
  JSON-RPC or HTTP+JSON. Each of the card's skills becomes a tool named after the skill's id
  (characters outside ``[A-Za-z0-9_-]`` become ``_``, cut to 64, made unique) that takes a
  ``message`` (string) and an optional ``data`` (object). The card's name suggests the agent id.
- **A call** sends one message (a text part, plus a data part when ``data`` is given, with the
  skill's id in the message metadata as ``skill_id``). An agent whose card says it streams is
  called with ``SendStreamingMessage``; another one with ``SendMessage`` returning at once and
  ``GetTask`` polled until the task ends. Each status update of the remote task is relayed as
  progress. The result is the final artifacts' text, data and files; ``FAILED``, ``REJECTED``,
  ``CANCELED``, ``INPUT_REQUIRED`` and ``AUTH_REQUIRED`` are tool errors saying so. A call the
  dispatcher cancels (``TOOL_CALL_TIMEOUT``, the query's end) sends ``CancelTask`` for the
  remote task.
- **Health** (``/refresh``, registration) is a fetch of the card; a card whose skills changed
  replaces the agent's tools.

Header values are secrets: they are sent only to the registered origin (an interface of the
card on another host is refused when there are headers to send), never logged, and cut out of
every error message. One ``httpx.AsyncClient`` (with the agent's headers) and one SDK client
are kept per agent and closed in :meth:`A2AConnector.aclose`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientTimeoutError, AgentCardResolutionError
from a2a.helpers import get_data_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    AgentCard,
    AgentInterface,
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import A2AError

from master.agents.a2a_cards import BINDINGS, card_metadata, card_tools, pick_interface, suggested_agent_id
from master.agents.connectors import ConnectorContext, ConnectorError, Discovered, ToolsChanged
from master.agents.invocation import InvocationAgent
from master.agents.url_policy import AgentUrlPolicy
from master.errors import AgentUnavailable, ToolFailed

logger = logging.getLogger("master.agents.a2a_client")

CANCEL_TIMEOUT_SECONDS = 10.0
"""How long a ``CancelTask`` for an abandoned remote task may take (it runs in the background)."""
POLL_FIRST_SECONDS, POLL_MAX_SECONDS = 0.05, 1.0
"""``GetTask`` polling of an agent that does not stream: the first wait, doubled up to the last."""

_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
_INTERRUPTED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
_UNAVAILABLE_STATUS = {502, 503, 504}


# --------------------------------------------------------------------------- secrets in messages


def scrub(text: str, headers: Mapping[str, str]) -> str:
    """``text`` with every header value cut out (an error may quote a request or a response)."""
    for value in sorted(headers.values(), key=len, reverse=True):
        if value:
            text = text.replace(value, "[redacted]")
    return text


def _describe(exc: BaseException) -> str:
    message = exc.message if isinstance(exc, A2AError) else str(exc)
    return f"{type(exc).__name__}: {message}".rstrip(": ")


# --------------------------------------------------------------------------- one call


def _plain(value: Any) -> Any:
    """A data part as JSON: protobuf stores every number as a double, so whole ones become ints."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _text(parts: Sequence[Part]) -> str:
    return "\n".join(part.text for part in parts if part.HasField("text"))


def _result(parts: Sequence[Part]) -> dict[str, Any]:
    """Parts as the tool's result: ``text`` (joined), ``data`` and ``files`` when there are any."""
    result: dict[str, Any] = {"text": _text(parts)}
    data = [_plain(item) for item in get_data_parts(parts)]
    files = [
        {
            "url": part.url if part.HasField("url") else None,
            "filename": part.filename or None,
            "media_type": part.media_type or None,
            "bytes": len(part.raw) if part.HasField("raw") else None,
        }
        for part in parts
        if part.HasField("url") or part.HasField("raw")
    ]
    if data:
        result["data"] = data
    if files:
        result["files"] = [{key: value for key, value in file.items() if value is not None} for file in files]
    return result


def _state_name(state: int) -> str:
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass
class _Run:
    """What one call has seen of the remote task so far."""

    agent_id: str
    on_progress: Callable[[str, float | None], None]
    task_id: str | None = None
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    status: TaskStatus | None = None
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    reply: Message | None = None

    @property
    def settled(self) -> bool:
        return self.reply is not None or self.state in _TERMINAL or self.state in _INTERRUPTED

    def see(self, event: StreamResponse) -> None:
        kind = event.WhichOneof("payload")
        if kind == "message":
            self.reply = event.message
        elif kind == "task":
            self.see_task(event.task)
        elif kind == "status_update":
            self.task_id = self.task_id or event.status_update.task_id
            self._status(event.status_update.status)
        elif kind == "artifact_update":
            update = event.artifact_update
            self.task_id = self.task_id or update.task_id
            known = self.artifacts.get(update.artifact.artifact_id)
            if update.append and known is not None:
                known.parts.extend(update.artifact.parts)
            else:
                self.artifacts[update.artifact.artifact_id] = update.artifact

    def see_task(self, task: Task) -> None:
        self.task_id = task.id
        if task.artifacts:
            self.artifacts = {artifact.artifact_id: artifact for artifact in task.artifacts}
        self._status(task.status)

    def _status(self, status: TaskStatus) -> None:
        changed = status.state != self.state
        self.state, self.status = status.state, status
        if status.state in _TERMINAL or status.state in _INTERRUPTED:
            return
        text = _text(status.message.parts) if status.HasField("message") else ""
        if text or (changed and status.state == TaskState.TASK_STATE_WORKING):
            self.on_progress(text or f"remote task {_state_name(status.state)}", None)

    def outcome(self) -> dict[str, Any]:
        """The result of a finished call, or :class:`ToolFailed` saying how the task ended."""
        if self.reply is not None:
            return _result(self.reply.parts)
        said = _text(self.status.message.parts) if self.status and self.status.HasField("message") else ""
        name = _state_name(self.state)
        if self.state == TaskState.TASK_STATE_COMPLETED:
            parts = [part for artifact in self.artifacts.values() for part in artifact.parts]
            return _result(parts) if parts else {"text": said}
        if self.state in _INTERRUPTED:
            raise ToolFailed(
                f"A2A agent {self.agent_id!r} stopped its task in state {name}"
                f"{f' ({said})' if said else ''}: it needs "
                f"{'authorization' if name == 'auth-required' else 'more input'} the hub cannot give "
                "an A2A agent yet; ask again with everything it needs in the message"
            )
        verb = {"failed": "failed", "rejected": "rejected", "canceled": "canceled"}.get(
            name, f"ended ({name})"
        )
        raise ToolFailed(f"A2A agent {self.agent_id!r} {verb} the task: {said or 'no message given'}")


# --------------------------------------------------------------------------- the connector


@dataclass(eq=False)
class _Link:
    """One agent's HTTP client (carrying its headers), card and SDK client."""

    key: tuple[str, tuple[tuple[str, str], ...]]
    http: httpx.AsyncClient
    card: AgentCard
    client: Client


def _client(http: httpx.AsyncClient, card: AgentCard, interface: AgentInterface) -> Client:
    """An SDK client on ``interface`` of ``card`` (streaming if the card says so, else polling)."""
    chosen = AgentCard()
    chosen.CopyFrom(card)
    del chosen.supported_interfaces[:]
    chosen.supported_interfaces.append(interface)  # the factory picks among the card's: ours only
    streams = bool(card.capabilities.streaming)
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=list(BINDINGS), streaming=streams, polling=not streams
    )
    return ClientFactory(config).create(chosen)


def _request(card: AgentCard, tool_name: str, arguments: dict[str, Any]) -> SendMessageRequest:
    """The message of one call: ``message`` as a text part, ``data`` as a data part, and the
    skill's id (as the card now names it) in the metadata."""
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex)
    message.parts.append(new_text_part(str(arguments.get("message", ""))))
    data = arguments.get("data")
    if data is not None:
        message.parts.append(new_data_part(data))
    _, skills = card_tools(card)
    message.metadata.update({"skill_id": skills.get(tool_name, tool_name)})
    return SendMessageRequest(message=message)


def _key(agent: InvocationAgent) -> tuple[str, tuple[tuple[str, str], ...]]:
    return agent.base_url, tuple(sorted(agent.headers.items()))


class A2AConnector:
    """Registers, calls and health-checks A2A agents (see the module docstring)."""

    transport = "a2a"

    def __init__(
        self, tools_changed: ToolsChanged | None = None, url_policy: AgentUrlPolicy | None = None
    ) -> None:
        self._tools_changed = tools_changed
        self._url_policy = url_policy or AgentUrlPolicy()
        self._links: dict[str, _Link] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._cancels: set[asyncio.Task[None]] = set()
        """``CancelTask`` requests in flight (owned here: awaited or cancelled by :meth:`aclose`)."""

    def _http(self, headers: Mapping[str, str]) -> httpx.AsyncClient:
        """A client sending ``headers``, following no redirect, connecting only to addresses the
        agent URL policy allowed (the card's endpoints too)."""
        from master.agents.policy_transport import PolicyTransport

        return httpx.AsyncClient(
            headers=dict(headers), follow_redirects=False, transport=PolicyTransport(self._url_policy)
        )

    # ------------------------------------------------------------------ discovery and health

    async def _card(
        self, http: httpx.AsyncClient, url: str, headers: Mapping[str, str], seconds: float
    ) -> AgentCard:
        where = f"{url.rstrip('/')}{AGENT_CARD_WELL_KNOWN_PATH}"
        try:
            async with asyncio.timeout(seconds):
                return await A2ACardResolver(http, url).get_agent_card(http_kwargs={"timeout": seconds})
        except TimeoutError:
            raise ConnectorError(f"the agent card at {where} did not arrive within {seconds:g} s") from None
        except AgentCardResolutionError as exc:
            if exc.status_code in (401, 403):
                why = f"HTTP {exc.status_code}: the agent refused the headers"
            elif exc.status_code is not None:
                why = f"HTTP {exc.status_code}"
            else:
                why = _describe(exc.__cause__) if exc.__cause__ is not None else exc.message
        except (A2AError, httpx.HTTPError, ValueError) as exc:
            why = _describe(exc)
        raise ConnectorError(scrub(f"could not read the agent card at {where}: {why}", headers))

    async def discover(self, url: str, headers: Mapping[str, str], wait_seconds: float) -> Discovered:
        """Read the card: its skills as tools, a summary as metadata, an agent id from its name;
        the card's endpoint, which may be on another host than the card, among the URLs the agent
        URL policy judges with the registering principal (:meth:`InvocationAgents.discover`)."""
        async with self._http(headers) as http:
            card = await self._card(http, url, headers, wait_seconds)
        interface = pick_interface(card, url, headers)
        tools, skills = card_tools(card)
        if not tools:
            raise ConnectorError(
                f"the agent card at {url} lists no skills; the hub offers an A2A agent's skills as its tools"
            )
        return Discovered(
            tools,
            card_metadata(card, interface, skills),
            suggested_agent_id(card.name),
            endpoints=[interface.url],
        )

    async def check(self, agent: InvocationAgent, wait_seconds: float) -> str | None:
        """``None`` when the card can be read and used; else why not. A card whose skills changed
        replaces the agent's tools; one that changed at all is used from the next call on."""
        link = self._links.get(agent.agent_id)
        if link is not None and link.key == _key(agent):
            http, own = link.http, False
        else:
            http, own = self._http(agent.headers), True
        try:
            card = await self._card(http, agent.base_url, agent.headers, wait_seconds)
            interface = pick_interface(card, agent.base_url, agent.headers)
        except ConnectorError as exc:
            return str(exc)
        finally:
            if own:
                await http.aclose()
        if link is not None and link.card != card:  # the next calls use the new card (and binding)
            link.card, link.client = card, _client(link.http, card, interface)
        tools, _ = card_tools(card)
        known = [tool.schema.model_dump(exclude_none=True) for tool in agent.tools.values()]
        if tools and [tool.model_dump(exclude_none=True) for tool in tools] != known and self._tools_changed:
            logger.info("A2A agent %s: its card lists other skills now; replacing its tools", agent.agent_id)
            await self._tools_changed(agent.agent_id, tools)
        return None

    # ------------------------------------------------------------------ calls

    async def _link(self, agent: InvocationAgent, seconds: float) -> _Link:
        lock = self._locks.setdefault(agent.agent_id, asyncio.Lock())
        async with lock:
            link = self._links.get(agent.agent_id)
            if link is not None and link.key == _key(agent):
                return link
            await self._drop(agent.agent_id)
            http = self._http(agent.headers)
            try:
                card = await self._card(http, agent.base_url, agent.headers, seconds)
                interface = pick_interface(card, agent.base_url, agent.headers)
            except ConnectorError as exc:
                await http.aclose()
                raise AgentUnavailable(f"A2A agent {agent.agent_id!r}: {exc}") from None
            link = _Link(_key(agent), http, card, _client(http, card, interface))
            self._links[agent.agent_id] = link
            return link

    async def call(
        self,
        agent: InvocationAgent,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        wait_seconds: float,
        on_progress: Callable[[str, float | None], None],
    ) -> Any:
        """Send the message; the remote task's result, or ``ToolFailed`` / ``AgentUnavailable``."""
        link = await self._link(agent, wait_seconds)
        run = _Run(agent.agent_id, on_progress)
        context = ClientCallContext(timeout=wait_seconds)
        stream = link.client.send_message(_request(link.card, tool_name, arguments), context=context)
        try:
            try:
                async for event in stream:
                    run.see(event)
                    if run.settled:
                        break
            finally:
                close = getattr(stream, "aclose", None)  # the response ends with the stream
                if close is not None:
                    await close()
            delay = POLL_FIRST_SECONDS
            while not run.settled:
                if run.task_id is None:
                    raise ToolFailed(
                        f"A2A agent {agent.agent_id!r} answered with neither a task nor a message"
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, POLL_MAX_SECONDS)
                run.see_task(await link.client.get_task(GetTaskRequest(id=run.task_id), context=context))
        except asyncio.CancelledError:
            if run.task_id is not None and not run.settled:
                self._cancel_later(agent, link, run.task_id)
            raise
        except (A2AError, httpx.HTTPError) as exc:
            raise self._failure(agent, exc) from None
        if run.state in _INTERRUPTED and run.task_id is not None:
            self._cancel_later(agent, link, run.task_id)  # nobody will answer it
        return run.outcome()

    def _failure(self, agent: InvocationAgent, exc: BaseException) -> ToolFailed | AgentUnavailable:
        """The SDK's or httpx's error as the dispatcher's, without any header value."""
        chain: list[BaseException] = [exc]
        while chain[-1].__cause__ is not None and len(chain) < 10:
            chain.append(chain[-1].__cause__)
        status = next((c.response.status_code for c in chain if isinstance(c, httpx.HTTPStatusError)), None)
        detail = scrub(_describe(exc), agent.headers)
        if status in (401, 403):
            return ToolFailed(
                f"A2A agent {agent.agent_id!r} refused the hub's credentials (HTTP {status}); "
                "check the a2a_headers it was registered with"
            )
        transport = any(isinstance(c, httpx.TransportError | A2AClientTimeoutError) for c in chain)
        if transport or status in _UNAVAILABLE_STATUS:
            return AgentUnavailable(
                f"A2A agent {agent.agent_id!r} is unreachable at {agent.base_url} ({detail})"
            )
        return ToolFailed(f"A2A agent {agent.agent_id!r} refused the message: {detail}")

    # ------------------------------------------------------------------ cancellation and shutdown

    def _cancel_later(self, agent: InvocationAgent, link: _Link, task_id: str) -> None:
        """``CancelTask`` in the background: the cancelled caller does not wait for the agent."""
        task = asyncio.create_task(self._cancel(agent, link, task_id), name=f"a2a cancel {task_id}")
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel(self, agent: InvocationAgent, link: _Link, task_id: str) -> None:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT_SECONDS):
                task = await link.client.cancel_task(
                    CancelTaskRequest(id=task_id), context=ClientCallContext(timeout=CANCEL_TIMEOUT_SECONDS)
                )
            logger.info(
                "cancelled task %s of A2A agent %s (%s)",
                task_id,
                agent.agent_id,
                _state_name(task.status.state),
            )
        except (A2AError, httpx.HTTPError, TimeoutError) as exc:
            logger.warning(
                "could not cancel task %s of A2A agent %s: %s",
                task_id,
                agent.agent_id,
                scrub(_describe(exc), agent.headers),
            )

    async def _drop(self, agent_id: str) -> None:
        link = self._links.pop(agent_id, None)
        if link is not None:
            await link.http.aclose()

    async def forget(self, agent_id: str) -> None:
        """Close the clients of an agent that was unregistered."""
        await self._drop(agent_id)

    async def aclose(self) -> None:
        """Let the ``CancelTask`` requests in flight finish (each has its timeout), close the clients."""
        if self._cancels:
            await asyncio.gather(*self._cancels, return_exceptions=True)
        for agent_id in list(self._links):
            await self._drop(agent_id)


def connector(context: ConnectorContext) -> A2AConnector:
    """The ``a2a`` entry of :data:`master.agents.connectors.CONNECTORS`."""
    return A2AConnector(tools_changed=context.tools_changed, url_policy=context.url_policy)
