"""The lifespan (``master/lifespan/``) closes what it opened, also when start-up fails half-way."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import pytest
import redis.asyncio as aioredis

from master import lifespan
from master.app import create_app
from master.cluster.directory import ClusterDirectory
from master.lifespan import services
from master.settings import Settings
from tests.factories import TEST_REDIS_URL


class _Opened:
    """The clients the lifespan opens, caught at their factories; Redis clients note their close."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.redis: list[aioredis.Redis] = []
        self.redis_closed: list[aioredis.Redis] = []
        self.sessions: list[aiohttp.ClientSession] = []
        self.clients: list[httpx.AsyncClient] = []
        create_redis = services.create_redis

        def redis(*args: Any, **kwargs: Any) -> aioredis.Redis:
            client = create_redis(*args, **kwargs)
            self.redis.append(client)
            client.aclose = self._noting_close(client, client.aclose)  # type: ignore[method-assign]
            return client

        def session(*args: Any, **kwargs: Any) -> aiohttp.ClientSession:
            self.sessions.append(aiohttp.ClientSession(*args, **kwargs))
            return self.sessions[-1]

        def client(*args: Any, **kwargs: Any) -> httpx.AsyncClient:
            self.clients.append(httpx.AsyncClient(*args, **kwargs))
            return self.clients[-1]

        monkeypatch.setattr(services, "create_redis", redis)
        monkeypatch.setattr(services, "ClientSession", session)
        monkeypatch.setattr(services, "AsyncClient", client)

    def _noting_close(
        self, client: aioredis.Redis, close: Callable[..., Awaitable[None]]
    ) -> Callable[..., Awaitable[None]]:
        async def aclose(*args: Any, **kwargs: Any) -> None:
            self.redis_closed.append(client)
            await close(*args, **kwargs)

        return aclose


async def test_a_cluster_that_cannot_start_leaves_no_client_open(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _Opened(monkeypatch)

    async def refuse(self: ClusterDirectory) -> None:
        raise RuntimeError("the cluster refused to start (test)")

    monkeypatch.setattr(ClusterDirectory, "start", refuse)
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, redis_url=TEST_REDIS_URL, openagent_cluster=True, openagent_master_id="leak-test"
    )
    app = create_app(settings)

    with pytest.raises(RuntimeError, match="refused to start"):
        async with app.router.lifespan_context(app):
            pytest.fail("the lifespan started although the cluster did not")

    assert len(opened.redis) == 3, (
        "the session Redis client, the attachments' blob client, the A2A tasks' client"
    )
    assert opened.redis_closed == list(reversed(opened.redis)), "each Redis pool closed once, in reverse"
    assert [session.closed for session in opened.sessions] == [True], "the aiohttp session of the agent calls"
    assert [client.is_closed for client in opened.clients] == [True], "the sandbox's httpx client"


def test_steady_gc_freezes_what_start_up_built_until_shutdown() -> None:
    """Issue 26: while the master serves, start-up's objects are out of the collector's reach and the
    young generation is collected less often; both are undone on shutdown."""
    threshold = gc.get_threshold()
    with lifespan.steady_gc():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] >= lifespan.GC_GEN0_THRESHOLD
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == 0
