"""Test-suite guards and shared fixtures.

No test may reach a real LLM or a real Kubernetes cluster: before anything is imported, the OpenAI variables are
pointed at a dead loopback port and ``OPENAGENT_LLM_LOOPBACK_ONLY=1`` makes every
master (in-process or subprocess) refuse any LLM endpoint off this machine.
A developer's ``.env`` is not read: masters run in an empty working directory and
the variables it could set are pinned here. Masters do not start again the YAML agents another
test's master started (``OPENAGENT_YAML_AGENTS_RESTART=0``). ``KUBECONFIG`` points nowhere; sandbox tests
hand their masters a kubeconfig of their own fake API server (tests/master/sandbox).
"""

from __future__ import annotations

import os

os.environ.update(
    {
        "OPENAI_API_KEY": "sk-test-never-sent",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAGENT_LLM_LOOPBACK_ONLY": "1",
        "OPENAGENT_API_KEY": "",
        "MASTER_WS": "ws://127.0.0.1:9/ws",
        # No test reaches a real cluster: no kubeconfig, and no in-cluster service account.
        "KUBECONFIG": "/nonexistent/openagent-tests-kubeconfig",
        "OPENAGENT_K8S_SANDBOX": "0",
        # Masters share the tests' Redis: one must not start the YAML agents another test's
        # master left there (tests/master/builder/test_yaml_agents_restart.py turns it on).
        "OPENAGENT_YAML_AGENTS_RESTART": "0",
    }
)
if os.geteuid() != 0:  # agent code then runs as the tester's user: accepted for the tests
    os.environ["OPENAGENT_ALLOW_UNISOLATED_AGENTS"] = "1"
# Parallel workers (pytest-xdist) give agent code disjoint uid ranges: a master stopping an agent
# kills every process of its uid, so two masters must never hand out the same one.
# OPENAGENT_TEST_UID_BASE moves them all (two test runs at once on one machine).
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    base = int(os.environ.get("OPENAGENT_TEST_UID_BASE", "200000"))
    os.environ["OPENAGENT_AGENT_UID_BASE"] = str(base + 10_000 * int(worker.removeprefix("gw") or 0))
os.environ.pop("KUBERNETES_SERVICE_HOST", None)
os.environ.pop("KUBERNETES_SERVICE_PORT", None)

from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio as aioredis

from openagent.testing import ScriptedOpenAIServer
from tests.factories import TEST_REDIS_URL, MasterProcess


@pytest.fixture(scope="session", autouse=True)
def _clean_test_redis() -> Iterator[None]:
    """Tests use their own Redis database, emptied once per run."""
    client = redis.Redis.from_url(TEST_REDIS_URL, socket_connect_timeout=2)
    try:
        client.flushdb()
    except redis.ConnectionError as exc:  # pragma: no cover - environment problem
        pytest.exit(
            f"Redis at {TEST_REDIS_URL} is not answering ({exc}); run ./scripts/test.sh", returncode=2
        )
    finally:
        client.close()
    yield


@pytest.fixture(scope="session")
def scripted_llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def llm(scripted_llm: ScriptedOpenAIServer) -> Iterator[ScriptedOpenAIServer]:
    """The shared scripted LLM, emptied before and after each test."""
    scripted_llm.reset()
    yield scripted_llm
    scripted_llm.reset()


def master_env(llm: ScriptedOpenAIServer, **extra: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAGENT_LLM_MAX_RETRIES": "0",
        # Generous: tests that need a call to end early make it end (a result, a disconnect)
        # and check why it ended; the tests of the timeout itself set their own.
        "TOOL_CALL_TIMEOUT": "120",
        "TOOL_INVOKE_HTTP_TIMEOUT": "30",
        "HEALTH_CHECK_TIMEOUT": "30",
        **extra,
    }


@pytest.fixture(scope="session")
def master(scripted_llm: ScriptedOpenAIServer) -> Iterator[MasterProcess]:
    """A master without auth, shared by the tests that do not restart it."""
    with MasterProcess(master_env(scripted_llm)) as process:
        yield process


@pytest.fixture
async def redis_client() -> AsyncIterator[aioredis.Redis]:
    """The tests' Redis, with waits for a busy machine: a burst of 200 appends on 2 loaded cores
    may wait longer than the master's own pool allows (that limit is the master's business)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        TEST_REDIS_URL, max_connections=64, timeout=60, decode_responses=True, socket_timeout=60
    )
    client = aioredis.Redis.from_pool(pool)
    try:
        yield client
    finally:
        await client.aclose()
