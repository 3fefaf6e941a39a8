"""AgentClient against a fake master: registration, auth, keepalive, reconnects, fatal closes."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from openagent import (
    AgentClient,
    AgentReplacedError,
    AuthenticationError,
    ClientConfig,
    ConfigurationError,
    ConnectionFailedError,
    ConnectionLostError,
    OpenAgentError,
    RegistrationError,
    connect_master,
)
from protocol import (
    CLOSE_POLICY_VIOLATION,
    ErrorMessage,
    Message,
    Ping,
    Register,
    ToolCall,
    ToolProgress,
    ToolSchema,
)
from tests.openagent.conftest import WAIT, FakeMaster, StartMaster, eventually, fast_config

REGISTER = Register(agent_id="probe", role="action", tools=[ToolSchema(name="echo")])


class Recorder:
    """Collects what the client hands to its callbacks."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Message] = asyncio.Queue()
        self.disconnects: asyncio.Queue[OpenAgentError] = asyncio.Queue()

    async def on_message(self, message: Message) -> None:
        await self.messages.put(message)

    async def on_disconnect(self, error: OpenAgentError) -> None:
        await self.disconnects.put(error)

    async def next_message(self) -> Message:
        async with asyncio.timeout(WAIT):
            return await self.messages.get()

    async def next_disconnect(self) -> OpenAgentError:
        async with asyncio.timeout(WAIT):
            return await self.disconnects.get()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def connect(master: FakeMaster, recorder: Recorder | None = None, **config: object) -> AgentClient:
    recorder = recorder or Recorder()
    return AgentClient(
        REGISTER,
        config=fast_config(master.url, **config),
        on_message=recorder.on_message,
        on_disconnect=recorder.on_disconnect,
    )


async def test_registers_and_exchanges_frames(fake_master: FakeMaster, recorder: Recorder) -> None:
    config = fast_config(fake_master.url)
    async with connect_master(REGISTER, config=config, on_message=recorder.on_message) as client:
        registration = await fake_master.next_registration()
        assert registration == REGISTER
        assert client.connected

        await client.send(ToolProgress(call_id="c1", message="working", progress=0.5))
        assert await fake_master.next_frame() == (
            "probe",
            ToolProgress(call_id="c1", message="working", progress=0.5),
        )

        await fake_master.send("probe", ToolCall(call_id="c2", tool_name="echo", arguments={"x": 1}))
        assert await recorder.next_message() == ToolCall(call_id="c2", tool_name="echo", arguments={"x": 1})

    assert not client.connected
    with pytest.raises(ConnectionLostError, match="'probe' is not connected"):
        await client.send(Ping())


async def test_sends_the_api_key_as_bearer_token(start_master: StartMaster) -> None:
    master = await start_master(api_key="s3cret")
    async with connect_master(REGISTER, config=fast_config(master.url, api_key="s3cret")) as client:
        assert client.connected
    assert master.request_headers[0]["Authorization"] == "Bearer s3cret"


async def test_sends_no_authorization_header_without_api_key(fake_master: FakeMaster) -> None:
    async with connect_master(REGISTER, config=fast_config(fake_master.url)):
        pass
    assert "Authorization" not in fake_master.request_headers[0]


@pytest.mark.parametrize("reject_in_handshake", [False, True], ids=["close-1008", "http-403"])
async def test_wrong_api_key_raises_authentication_error(
    start_master: StartMaster, reject_in_handshake: bool
) -> None:
    master = await start_master(api_key="right", reject_in_handshake=reject_in_handshake)

    with pytest.raises(AuthenticationError, match="OPENAGENT_API_KEY"):
        async with connect_master(REGISTER, config=fast_config(master.url, api_key="wrong")):
            pass
    assert len(master.request_headers) == 1


async def test_rejected_registration_carries_the_masters_message(fake_master: FakeMaster) -> None:
    fake_master.on_register = lambda reg: ErrorMessage(message="invalid tool 'x'", code="invalid_message")

    with pytest.raises(RegistrationError, match="rejected agent 'probe': invalid tool 'x'"):
        async with connect_master(REGISTER, config=fast_config(fake_master.url)):
            pass


async def test_registration_timeout(fake_master: FakeMaster) -> None:
    fake_master.on_register = lambda reg: None  # never answers

    with pytest.raises(RegistrationError, match=r"within 0.2s \(WS_REGISTRATION_TIMEOUT\)"):
        async with connect_master(REGISTER, config=fast_config(fake_master.url, registration_timeout=0.2)):
            pass


async def test_unreachable_master_raises_connection_failed() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"ws://127.0.0.1:{sock.getsockname()[1]}/ws"  # nothing listens once closed

    with pytest.raises(ConnectionFailedError, match=f"could not connect to the master at {url}"):
        async with connect_master(REGISTER, config=fast_config(url)):
            pass


async def test_connect_twice_is_a_configuration_error(fake_master: FakeMaster) -> None:
    async with connect_master(REGISTER, config=fast_config(fake_master.url)) as client:
        with pytest.raises(ConfigurationError, match="only once"):
            await client.connect()


@pytest.mark.parametrize("how", ["close-1011", "abort"])
async def test_reconnects_and_registers_again_after_a_drop(
    fake_master: FakeMaster, recorder: Recorder, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    caplog.set_level(logging.INFO, logger="openagent.client")
    client = connect(fake_master, recorder)
    await client.connect()
    try:
        await fake_master.next_registration()
        if how == "abort":
            fake_master.abort_connection("probe")
        else:
            await fake_master.close_connection("probe", 1011, "internal error")

        assert isinstance(await recorder.next_disconnect(), ConnectionLostError)
        assert await fake_master.next_registration() == REGISTER
        await eventually(lambda: client.connected)
        await client.send(ToolProgress(call_id="after", message="still here"))
        assert (await fake_master.next_frame())[1] == ToolProgress(call_id="after", message="still here")
    finally:
        await client.close()
    logged = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(name == "openagent.client" and "reconnecting agent probe" in text for name, _, text in logged)


async def test_reconnects_after_a_master_restart_on_the_same_port(
    start_master: StartMaster, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openagent.client")
    first = await start_master()
    client = connect(first, recorder)
    await client.connect()
    try:
        await first.next_registration()
        await first.stop()
        assert isinstance(await recorder.next_disconnect(), ConnectionLostError)
        await eventually(lambda: "reconnect attempt 2 of agent probe failed" in caplog.text)

        second = await start_master(port=first.port)
        assert await second.next_registration() == REGISTER
        await eventually(lambda: client.connected)
        await second.send("probe", ToolCall(call_id="c1", tool_name="echo"))
        assert await recorder.next_message() == ToolCall(call_id="c1", tool_name="echo")
    finally:
        await client.close()
    failures = [r for r in caplog.records if "failed" in r.getMessage() and r.name == "openagent.client"]
    assert failures and all(r.levelno == logging.WARNING for r in failures)


async def test_policy_violation_close_is_fatal(fake_master: FakeMaster, recorder: Recorder) -> None:
    client = connect(fake_master, recorder)
    await client.connect()
    try:
        await fake_master.next_registration()
        await fake_master.close_connection("probe", CLOSE_POLICY_VIOLATION, "key revoked")

        with pytest.raises(AuthenticationError, match="1008"):
            async with asyncio.timeout(WAIT):
                await client.wait_closed()
        assert isinstance(await recorder.next_disconnect(), AuthenticationError)
        # wait_closed returned: the supervisor, the only thing that reconnects, has ended.
        assert len(fake_master.request_headers) == 1
        assert not client.connected
        with pytest.raises(ConnectionLostError, match="1008"):
            await client.send(Ping())
    finally:
        await client.close()


async def test_replaced_agent_stops_and_leaves_the_new_connection_alone(
    fake_master: FakeMaster, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    old = connect(fake_master, recorder)
    await old.connect()
    try:
        await fake_master.next_registration()
        async with connect_master(REGISTER, config=fast_config(fake_master.url)) as new:
            await fake_master.next_registration()

            with pytest.raises(AgentReplacedError, match="newer connection registered the same agent_id"):
                async with asyncio.timeout(WAIT):
                    await old.wait_closed()
            # wait_closed returned: the old client's supervisor (which reconnects) has ended.
            assert new.connected
            assert len(fake_master.request_headers) == 2
            assert isinstance(old.fatal_error, AgentReplacedError)
    finally:
        await old.close()
    assert any(r.levelno == logging.ERROR and "not reconnecting" in r.getMessage() for r in caplog.records)


async def test_keepalive_pings(fake_master: FakeMaster) -> None:
    async with connect_master(
        REGISTER, config=fast_config(fake_master.url, keepalive_interval=0.02)
    ) as client:
        await eventually(lambda: fake_master.pings >= 3)
        assert client.connected


class KeepaliveClock:
    """A fake clock for the SDK's keepalive task only: records each interval it sleeps, lets
    the first one pass at once (as if it had elapsed) and holds the task on the next."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.intervals: list[float] = []
        self._real_sleep = asyncio.sleep
        monkeypatch.setattr(asyncio, "sleep", self._sleep)

    @staticmethod
    def keepalive_tasks() -> list[asyncio.Task[object]]:
        code = AgentClient._keepalive.__code__
        return [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "cr_code", None) is code]

    async def _sleep(self, delay: float, result: object = None) -> object:
        task = asyncio.current_task()
        if task is None or task not in self.keepalive_tasks():
            return await self._real_sleep(delay, result)
        self.intervals.append(delay)
        if len(self.intervals) > 1:
            await asyncio.Event().wait()  # time stands still after the first interval
        return result


@pytest.mark.parametrize("interval", ["30", "0"])
async def test_ws_keepalive_interval_from_the_environment(
    fake_master: FakeMaster, recorder: Recorder, monkeypatch: pytest.MonkeyPatch, interval: str
) -> None:
    """``WS_KEEPALIVE_INTERVAL=30`` pings after 30 s of (fake) time; ``0`` starts no keepalive at all."""
    clock = KeepaliveClock(monkeypatch)
    config = ClientConfig.from_env({"MASTER_WS": fake_master.url, "WS_KEEPALIVE_INTERVAL": interval})
    async with connect_master(REGISTER, config=config, on_message=recorder.on_message):
        await fake_master.next_registration()
        # A frame delivered proves the client's read loop runs (the keepalive starts before it).
        await fake_master.send("probe", ToolCall(call_id="c0", tool_name="echo"))
        assert await recorder.next_message() == ToolCall(call_id="c0", tool_name="echo")
        if interval == "0":
            assert clock.keepalive_tasks() == [] and clock.intervals == []
        else:
            await eventually(lambda: fake_master.pings == 1 and len(clock.intervals) == 2)
            assert clock.intervals == [30.0, 30.0] and len(clock.keepalive_tasks()) == 1
    assert fake_master.pings == (0 if interval == "0" else 1)


async def test_silent_master_is_detected_and_reconnected(fake_master: FakeMaster, recorder: Recorder) -> None:
    fake_master.answer_pings = False
    client = connect(fake_master, recorder, keepalive_interval=0.05)
    await client.connect()
    try:
        await fake_master.next_registration()
        error = await recorder.next_disconnect()
        assert isinstance(error, ConnectionLostError)
        assert await fake_master.next_registration() == REGISTER
    finally:
        await client.close()


async def test_invalid_frames_are_logged_and_skipped(
    fake_master: FakeMaster, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    async with connect_master(REGISTER, config=fast_config(fake_master.url), on_message=recorder.on_message):
        await fake_master.next_registration()
        await fake_master.send_raw("probe", "not json")
        await fake_master.send_raw("probe", '{"type": "no_such_type"}')
        await fake_master.send("probe", ToolCall(call_id="ok", tool_name="echo"))

        assert await recorder.next_message() == ToolCall(call_id="ok", tool_name="echo")
    warnings = [
        r for r in caplog.records if r.name == "openagent.client" and "invalid frame" in r.getMessage()
    ]
    assert len(warnings) == 2


async def test_a_failing_message_handler_does_not_stop_the_client(
    fake_master: FakeMaster, caplog: pytest.LogCaptureFixture
) -> None:
    seen: asyncio.Queue[Message] = asyncio.Queue()

    async def on_message(message: Message) -> None:
        if isinstance(message, ToolCall) and message.call_id == "boom":
            raise RuntimeError("handler bug")
        await seen.put(message)

    async with connect_master(REGISTER, config=fast_config(fake_master.url), on_message=on_message):
        await fake_master.next_registration()
        await fake_master.send("probe", ToolCall(call_id="boom", tool_name="echo"))
        await fake_master.send("probe", ToolCall(call_id="fine", tool_name="echo"))
        async with asyncio.timeout(WAIT):
            assert await seen.get() == ToolCall(call_id="fine", tool_name="echo")
    assert "message handler of agent probe failed on a tool_call frame" in caplog.text
