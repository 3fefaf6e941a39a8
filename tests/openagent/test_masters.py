"""Several masters in ``MASTER_WS``: the first that answers, the next after a drop, at once after close 1012."""

from __future__ import annotations

import socket

import pytest

from openagent import ClientConfig, ConfigurationError
from openagent.client import AgentClient
from protocol import CLOSE_SERVICE_RESTART, Register
from tests.openagent.conftest import WAIT, StartMaster, eventually, fast_config


def dead_url() -> str:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return f"ws://127.0.0.1:{probe.getsockname()[1]}/ws"


def test_master_urls_are_a_comma_separated_list() -> None:
    config = ClientConfig(master_ws=" ws://a:1/ws, wss://b:2/ws ,")
    assert config.master_urls == ("ws://a:1/ws", "wss://b:2/ws")
    with pytest.raises(ConfigurationError, match="comma-separated list"):
        ClientConfig(master_ws="ws://a:1/ws,http://b:2/ws")


async def test_connects_to_the_first_master_that_answers(start_master: StartMaster) -> None:
    master = await start_master()
    client = AgentClient(
        Register(agent_id="multi", role="query"), config=fast_config(f"{dead_url()},{master.url}")
    )
    try:
        await client.connect()
        assert (await master.next_registration()).agent_id == "multi"
        assert client.master_url == master.url
    finally:
        await client.close()


async def test_a_draining_master_hands_the_agent_to_the_next_at_once(start_master: StartMaster) -> None:
    first, second = await start_master(), await start_master()
    # Backoff long enough that only the immediate reconnect of close 1012 can reach `second` in time.
    config = fast_config(
        f"{first.url},{second.url}", reconnect_initial_delay=WAIT * 10, reconnect_max_delay=WAIT * 10
    )
    client = AgentClient(Register(agent_id="drained", role="query"), config=config)
    try:
        await client.connect()
        await first.next_registration()
        await first.close_connection("drained", code=CLOSE_SERVICE_RESTART, reason="master draining")
        assert (await second.next_registration()).agent_id == "drained"
        await eventually(lambda: client.connected and client.master_url == second.url)
    finally:
        await client.close()
