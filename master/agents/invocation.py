"""HTTP invocation agents: registered in Redis, called over HTTP, health-checked.

An invocation agent runs its own HTTP server. Its registration (base URL, tools,
metadata) lives in Redis under ``agent:{agent_id}`` with TTL
``REDIS_AGENT_TTL_SECONDS`` (refreshed on use), so it survives a master restart.
:class:`InvocationAgents` keeps the records in memory, loaded from Redis at
start-up and on ``GET /refresh``, and knows each agent's health (UP/DOWN): a
DOWN agent's tools are not offered to the model until a check finds it UP.

With several masters on one Redis, every registration and removal bumps the counter
``agents:invocation:version`` in the same transaction as the record; each master compares it
with the value of its last load (:meth:`InvocationAgents.sync`, every third of the cluster lease)
and re-reads the records when it moved. A counter rather than pub/sub: a change made while a
master was disconnected from Redis, or starting, is not lost, it is seen at the next check.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.agents.base_urls import (
    BaseUrls,
)
from master.agents.connectors import (
    CONNECTORS,
    Connector,
    ConnectorContext,
    ConnectorError,
    ConnectorFactory,
    Discovered,
)
from master.agents.registrations import (
    DEFAULT_ENDPOINT,
    Health,
    StoredAgent,
    Transport,
)
from master.agents.registrations import (  # re-exported: importers of it here predate the split
    InvocationRegistration as InvocationRegistration,
)
from master.agents.registry import AgentTool, compile_tools, lookup
from master.agents.url_policy import AgentUrlPolicy, UrlRefused
from master.auth import Principal
from master.errors import InvalidToolSchema, RegistrationRefused, SessionStoreUnavailable
from master.settings import Settings
from master.storage.redis_keys import AGENT_INDEX, AGENT_INDEX_VERSION, agent_key, quarantined_agent_key
from protocol import ErrorCode, ToolSchema

logger = logging.getLogger("master.agents.invocation")


_TOUCH_INTERVAL = 60.0
"""Seconds between TTL refreshes of a used agent's record (the TTL is hours)."""


@dataclass(eq=False)
class InvocationAgent:
    """A registered HTTP agent and its last known health."""

    agent_id: str
    base_url: str
    tools: dict[str, AgentTool]
    metadata: dict[str, Any]
    registered_at: float
    status: Health = "UNKNOWN"
    last_check: float | None = None
    last_error: str | None = None
    last_touched: float = float("-inf")
    transport: Transport = "invocation"
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    """Sent to a remote agent with each request: secrets (never in :meth:`describe`, never logged)."""
    tenant: str | None = None
    """The tenant whose queries it serves (registered with that tenant's key, or by an
    administrator naming it); ``None``: shared with every tenant."""
    replica_urls: list[str] = field(default_factory=list)
    """Further base URLs of copies of the agent (HTTP invocation only)."""
    urls: BaseUrls = field(init=False, repr=False)
    """``base_url`` and ``replica_urls``, with each one's calls in flight: where a call goes."""

    def __post_init__(self) -> None:
        self.urls = BaseUrls([self.base_url, *self.replica_urls])

    @classmethod
    def from_registration(
        cls, reg: InvocationRegistration, registered_at: float | None = None
    ) -> InvocationAgent:
        """Compile the tools (raises :class:`master.agents.registry.InvalidToolSchema`)."""
        stored = reg if isinstance(reg, StoredAgent) else None
        return cls(
            reg.agent_id,
            reg.invocation_base_url
            if stored and stored.transport != "invocation"
            else reg.invocation_base_url.rstrip("/"),
            compile_tools(reg.agent_id, reg.tools),
            dict(reg.metadata),
            registered_at or time.time(),
            transport=stored.transport if stored else "invocation",
            headers=dict(stored.headers) if stored else {},
            tenant=stored.tenant if stored else None,
            replica_urls=[url.rstrip("/") for url in reg.replica_urls],
        )

    def endpoint_url(self, tool_name: str, index: int = 0) -> str:
        """Where a call of ``tool_name`` goes on the agent's URL number ``index`` (``urls.urls``)."""
        endpoint = self.tools[tool_name].schema.endpoint or DEFAULT_ENDPOINT
        return f"{self.urls.urls[index]}/{endpoint.lstrip('/')}"

    def record(self) -> dict[str, Any]:
        """What Redis stores."""
        record = {
            "agent_id": self.agent_id,
            "invocation_base_url": self.base_url,
            "tools": [tool.schema.model_dump(exclude_none=True) for tool in self.tools.values()],
            "metadata": self.metadata,
            "registered_at": self.registered_at,
        }
        if self.transport != "invocation":
            record["transport"], record["headers"] = self.transport, self.headers
        if self.tenant is not None:
            record["tenant"] = self.tenant
        if self.replica_urls:
            record["replica_urls"] = self.replica_urls
        return record

    def describe(self) -> dict[str, Any]:
        """The agent's row in ``GET /agents`` (never the headers)."""
        return {
            "agent_id": self.agent_id,
            "role": "action",
            "connection_type": self.transport,
            "status": self.status,
            "last_check": self.last_check,
            "last_error": self.last_error,
            f"{self.transport}_{'base_url' if self.transport == 'invocation' else 'url'}": self.base_url,
            "registered_at": self.registered_at,
            "metadata": self.metadata,
            "tools": [tool.schema.model_dump(exclude_none=True) for tool in self.tools.values()],
            **({"tenant": self.tenant} if self.tenant is not None else {}),
            **({"replica_urls": self.replica_urls} if self.replica_urls else {}),
        }


@dataclass
class InvocationAgents:
    """In-memory view of the invocation agents stored in Redis, with their health."""

    redis: aioredis.Redis
    http: aiohttp.ClientSession
    ttl_seconds: int
    health_timeout: float
    settings: Settings | None = None
    """Given to the connectors (``None``: no connectors, HTTP invocation agents only)."""
    url_policy: AgentUrlPolicy = field(default_factory=AgentUrlPolicy)
    """Checks every registered URL (``UrlRefused``: 422); the connectors' clients check each request.
    ``http`` should be the lifespan's session, whose resolver and trace apply the same policy."""
    connector_factories: dict[str, ConnectorFactory] = field(default_factory=lambda: dict(CONNECTORS))
    connectors: dict[str, Connector] = field(init=False, default_factory=dict)
    """Transport → the connector that reaches its agents (:mod:`master.agents.connectors`)."""
    _agents: dict[str, InvocationAgent] = field(default_factory=dict)
    _version: str | None = None
    """``AGENT_INDEX_VERSION`` as it was before the last load."""
    _loaded: bool = False

    def __post_init__(self) -> None:
        if self.settings is not None:
            context = ConnectorContext(self.settings, self.http, self.set_tools, self.url_policy)
            self.connectors = {name: make(context) for name, make in self.connector_factories.items()}

    async def aclose(self) -> None:
        """Close the connectors (the master stops)."""
        for connector in self.connectors.values():
            try:
                await connector.aclose()
            except Exception:  # one connector's failure must not keep the others open
                logger.exception("could not close the %s connector", connector.transport)

    def get(self, agent_id: str) -> InvocationAgent | None:
        return self._agents.get(agent_id)

    def all(self) -> list[InvocationAgent]:
        return list(self._agents.values())

    def available(self, allowed: Iterable[str] | None = None) -> list[InvocationAgent]:
        """Agents whose tools may be offered: every one not known to be DOWN; only those of
        ``allowed`` ids when given (looked up by id)."""
        found = self._agents.values() if allowed is None else lookup(self._agents, allowed)
        return [agent for agent in found if agent.status != "DOWN"]

    async def register(
        self, reg: InvocationRegistration, *, registrant: Principal, tenant: str | None = None
    ) -> InvocationAgent:
        """Store the agent in Redis (atomically with the index) and check its health once; raises
        :class:`master.agents.url_policy.UrlRefused` when the URL policy refuses its base URL for
        ``registrant``. ``tenant``: the only tenant whose queries it serves (``None``: every tenant's)."""
        await self.url_policy.check_url(reg.invocation_base_url, "invocation_base_url", registrant=registrant)
        for url in reg.replica_urls:
            await self.url_policy.check_url(url, "replica_urls", registrant=registrant)
        agent = InvocationAgent.from_registration(reg)
        agent.tenant = tenant
        return await self._store(agent)

    async def discover(
        self,
        transport: Transport,
        url: str,
        headers: dict[str, str],
        wait_seconds: float,
        *,
        registrant: Principal,
    ) -> Discovered:
        """Ask a remote agent for its tools through its transport's connector; raises
        :class:`RegistrationRefused` (``invalid_request``, never naming a header value), and
        :class:`master.agents.url_policy.UrlRefused` when the URL policy refuses ``url`` or an
        endpoint the agent lists, for ``registrant``. A key that is not an administrator's learns
        only that the agent could not be listed, never why (a refused connection, a timeout, an
        answer that is not the protocol's): that would tell an open port from a closed one; the
        log says why."""
        field_name = f"{transport}_url"
        await self.url_policy.check_url(url, field_name, registrant=registrant)
        connector = self.connectors.get(transport)
        if connector is None:
            raise RegistrationRefused(
                ErrorCode.INVALID_REQUEST, f"this master cannot reach {transport} agents (no connector)"
            )
        try:
            async with asyncio.timeout(wait_seconds):
                found = await connector.discover(url, headers, wait_seconds)
        except TimeoutError:
            why = f"the {transport} agent at {url} did not answer within {wait_seconds:g} s"
            raise self._discovery_refused(transport, url, why, registrant) from None
        except ConnectorError as exc:
            raise self._discovery_refused(transport, url, str(exc), registrant) from None
        for endpoint in found.endpoints:
            try:
                await self.url_policy.check_url(endpoint, field_name, registrant=registrant)
            except UrlRefused as exc:
                raise UrlRefused(
                    field_name, f"the agent card at {url} lists its endpoint at {endpoint}: {exc.reason}"
                ) from None
        return found

    @staticmethod
    def _discovery_refused(transport: str, url: str, why: str, registrant: Principal) -> RegistrationRefused:
        if registrant.is_admin:
            return RegistrationRefused(ErrorCode.INVALID_REQUEST, why)
        logger.info(
            "registration of the %s agent at %s by %s failed: %s", transport, url, registrant.key_id, why
        )
        return RegistrationRefused(
            ErrorCode.INVALID_REQUEST,
            f"the {transport} agent at {url} could not be listed (unreachable, too slow, or not a "
            f"{transport} agent)",
        )

    async def register_remote(
        self,
        transport: Transport,
        agent_id: str,
        url: str,
        headers: dict[str, str],
        found: Discovered,
        *,
        tenant: str | None = None,
    ) -> InvocationAgent:
        """Store a remote agent whose tools :meth:`discover` found (raises
        :class:`master.agents.registry.InvalidToolSchema` for an unusable schema)."""
        stored = StoredAgent(
            agent_id=agent_id,
            invocation_base_url=url,
            tools=found.tools,
            metadata=found.metadata,
            transport=transport,
            headers=headers,
            tenant=tenant,
        )
        return await self._store(InvocationAgent.from_registration(stored))

    async def set_tools(self, agent_id: str, tools: list[ToolSchema]) -> None:
        """Replace a remote agent's tools (its server said they changed), here and in Redis."""
        agent = self._agents.get(agent_id)
        if agent is None:
            return
        try:
            agent.tools = compile_tools(agent_id, tools)
        except InvalidToolSchema as exc:
            logger.warning("agent %s sent an unusable tool list, kept the previous one: %s", agent_id, exc)
            return
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(agent_key(agent_id), json.dumps(agent.record()), ex=self.ttl_seconds)
                pipe.incr(AGENT_INDEX_VERSION)
                await pipe.execute()
        except RedisError as exc:
            logger.warning("could not store the new tools of agent %s: %s", agent_id, exc)
        logger.info("agent %s now has %d tool(s)", agent_id, len(agent.tools))

    async def _store(self, agent: InvocationAgent) -> InvocationAgent:
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(agent_key(agent.agent_id), json.dumps(agent.record()), ex=self.ttl_seconds)
                pipe.sadd(AGENT_INDEX, agent.agent_id)
                pipe.incr(AGENT_INDEX_VERSION)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"agent store unavailable (Redis): {exc}") from exc
        self._agents[agent.agent_id] = agent
        await self.check(agent)
        logger.info(
            "registered %s agent %s at %s (%s)", agent.transport, agent.agent_id, agent.base_url, agent.status
        )
        return agent

    async def unregister(self, agent_id: str) -> bool:
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.delete(agent_key(agent_id))
                pipe.srem(AGENT_INDEX, agent_id)
                pipe.incr(AGENT_INDEX_VERSION)
                deleted, _, _ = await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"agent store unavailable (Redis): {exc}") from exc
        agent = self._agents.pop(agent_id, None)
        if agent is not None:
            await self._forget(agent)
        return bool(deleted) or agent is not None

    async def _forget(self, agent: InvocationAgent) -> None:
        """Let the agent's connector close what it holds for it (an MCP session, A2A clients)."""
        connector = self.connectors.get(agent.transport)
        if connector is None:
            return
        try:
            await connector.forget(agent.agent_id)
        except Exception:  # closing a link must never fail an unregistration
            logger.exception("could not close the %s link of agent %s", agent.transport, agent.agent_id)

    async def reload(self) -> None:
        """Re-read every record from Redis (start-up, ``/refresh``); expired ones are pruned."""
        try:
            version = await self.redis.get(AGENT_INDEX_VERSION)
            ids = sorted(str(member) for member in await self.redis.smembers(AGENT_INDEX))
            raws = await self.redis.mget([agent_key(agent_id) for agent_id in ids]) if ids else []
        except RedisError as exc:
            raise SessionStoreUnavailable(f"agent store unavailable (Redis): {exc}") from exc
        loaded: dict[str, InvocationAgent] = {}
        expired = []
        for agent_id, raw in zip(ids, raws, strict=True):
            if raw is None:
                expired.append(agent_id)
                continue
            previous = self._agents.get(agent_id)
            try:
                data = json.loads(raw)
                if previous is not None and previous.record() == data:  # unchanged: keep it as it is
                    loaded[agent_id] = previous
                    continue
                agent = InvocationAgent.from_registration(
                    StoredAgent.model_validate(data), data.get("registered_at")
                )
            except (ValueError, TypeError, AttributeError, RecursionError) as exc:
                await self._quarantine(agent_id, exc)
                continue
            if previous is not None:
                agent.status, agent.last_check, agent.last_error = (
                    previous.status,
                    previous.last_check,
                    previous.last_error,
                )
            loaded[agent_id] = agent
        if expired:
            await self.redis.srem(AGENT_INDEX, *expired)
        gone = [agent for agent_id, agent in self._agents.items() if agent_id not in loaded]
        self._agents = loaded
        for agent in gone:  # unregistered by another master, or expired
            await self._forget(agent)
        self._version, self._loaded = None if version is None else str(version), True

    async def sync(self) -> bool:
        """Re-read the records when another master registered or removed an agent since the last
        load (the version counter moved); True when it did. Health is kept for known agents."""
        try:
            version = await self.redis.get(AGENT_INDEX_VERSION)
        except RedisError as exc:
            raise SessionStoreUnavailable(f"agent store unavailable (Redis): {exc}") from exc
        if self._loaded and (None if version is None else str(version)) == self._version:
            return False
        await self.reload()
        return True

    async def follow(self, interval: float) -> None:
        """:meth:`sync` every ``interval`` seconds, forever (several masters: the lifespan runs it)."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sync()
            except SessionStoreUnavailable as exc:
                logger.warning("could not re-read the invocation agents: %s", exc)

    async def _quarantine(self, agent_id: str, exc: BaseException) -> None:
        """Move an unusable record out of the way (``agent_quarantine:{id}``), so that it never
        stops a start-up or a refresh again and stays there for someone to inspect."""
        logger.error(
            "quarantined the unusable record of invocation agent %s as %s: %s",
            agent_id,
            quarantined_agent_key(agent_id),
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.rename(agent_key(agent_id), quarantined_agent_key(agent_id))
                pipe.srem(AGENT_INDEX, agent_id)
                pipe.incr(AGENT_INDEX_VERSION)
                await pipe.execute()
        except RedisError as error:
            logger.warning("could not quarantine the record of agent %s: %s", agent_id, error)

    async def touch(self, agent: InvocationAgent) -> None:
        """Refresh the record's TTL when the agent is used (best effort, at most once a minute)."""
        now = time.monotonic()
        if now - agent.last_touched < _TOUCH_INTERVAL:
            return
        agent.last_touched = now
        try:
            await self.redis.expire(agent_key(agent.agent_id), self.ttl_seconds)
        except RedisError as exc:
            logger.warning("could not refresh TTL of agent %s: %s", agent.agent_id, exc)

    async def check(self, agent: InvocationAgent) -> Health:
        """``GET {base}/health`` within ``HEALTH_CHECK_TIMEOUT`` (a remote agent: its connector's check)."""
        if agent.transport != "invocation":
            connector = self.connectors.get(agent.transport)
            try:
                async with asyncio.timeout(self.health_timeout):
                    error = (
                        f"this master has no {agent.transport} connector"
                        if connector is None
                        else await connector.check(agent, self.health_timeout)
                    )
            except TimeoutError:
                error = f"no answer within {self.health_timeout:g} s"
            self.mark(agent, "UP" if error is None else "DOWN", error)
            return agent.status
        urls = agent.urls
        errors = await asyncio.gather(*(self._check_url(url) for url in urls.urls))
        for index, url_error in enumerate(errors):
            if url_error is None:
                urls.answered(index)
            else:
                urls.refused(index)
        ok = any(url_error is None for url_error in errors)  # UP while one copy answers
        error = (
            None
            if ok
            else errors[0]
            if len(errors) == 1
            else "; ".join(f"{url}: {url_error}" for url, url_error in zip(urls.urls, errors, strict=True))
        )
        self.mark(agent, "UP" if ok else "DOWN", error)
        return agent.status

    async def _check_url(self, base_url: str) -> str | None:
        """``GET {base_url}/health``: ``None`` when it answers 200, else what went wrong."""
        try:
            timeout = aiohttp.ClientTimeout(total=self.health_timeout)
            async with self.http.get(f"{base_url}/health", timeout=timeout) as response:
                return None if response.status == 200 else f"/health answered HTTP {response.status}"
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # ValueError: an unusable URL
            return f"{type(exc).__name__}: {exc}".rstrip(": ")

    def mark(self, agent: InvocationAgent, status: Health, error: str | None = None) -> None:
        if agent.status != status and agent.status != "UNKNOWN":
            logger.warning(
                "%s agent %s is now %s%s",
                agent.transport,
                agent.agent_id,
                status,
                f" ({error})" if error else "",
            )
        agent.status, agent.last_check, agent.last_error = status, time.time(), error

    async def check_all(self) -> dict[str, Health]:
        """Health-check every agent concurrently; returns and logs each one's status."""
        agents = self.all()
        statuses = await asyncio.gather(*(self.check(agent) for agent in agents))
        report = {agent.agent_id: status for agent, status in zip(agents, statuses, strict=True)}
        for agent_id, status in report.items():
            logger.info("refresh: %s %s", agent_id, status)
        return report
