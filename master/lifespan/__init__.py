"""The master's long-lived objects, built once per app and closed in reverse by one exit stack.

:func:`lifespan` is the app's lifespan: :func:`~master.lifespan.services.build` creates the
master's objects in dependency order and enters each into one :class:`~contextlib.AsyncExitStack`
as soon as it holds something to close (:mod:`master.lifespan.services`), then starts what runs
in the background (:mod:`master.lifespan.start`). Leaving the stack closes them in reverse order,
on shutdown and just as well when start-up fails half-way (a cluster that cannot start leaks no
connection pool). While the master serves, the garbage collector is kept steady (:func:`steady_gc`).
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, contextmanager

from fastapi import FastAPI

from master.lifespan.services import build, llm_from_settings
from master.llm.model import ChatModel
from master.settings import Settings

__all__ = ["GC_GEN0_THRESHOLD", "build", "lifespan", "llm_from_settings", "steady_gc"]

GC_GEN0_THRESHOLD = 5000
"""Allocations between two young-generation collections while the master serves (CPython's default
is 700): a query allocates a few hundred objects that die with it, so at the default the
collector ran about once per 9 queries at concurrency 32; at 5,000, rarely."""


@contextmanager
def steady_gc() -> Iterator[None]:
    """While the master serves: what start-up built (modules, models, schemas, routes: some 200,000
    objects that live as long as the process) moved out of the garbage collector's reach
    (:func:`gc.freeze`), and the young generation collected less often (:data:`GC_GEN0_THRESHOLD`).
    Measured in process at concurrency 32 (issue 26): the collector took 29-35% of a query's CPU
    time, 8-11% after the freeze and none with the threshold too. Undone on shutdown (tests start
    many apps in one process)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], GC_GEN0_THRESHOLD), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def lifespan(
    settings: Settings, llm: ChatModel | None = None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: :func:`build` into one exit stack, serve, close everything in reverse."""

    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            app.state.services = await build(stack, settings, llm)
            stack.enter_context(steady_gc())
            yield

    return run
