"""``GET`` and ``DELETE /sessions/{session_id}`` against a real master and Redis."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess

KEY = "sessions-key"


@pytest.fixture(scope="module")
def secured(scripted_llm: ScriptedOpenAIServer) -> Iterator[MasterProcess]:
    with MasterProcess(master_env(scripted_llm, OPENAGENT_API_KEY=KEY)) as m:
        yield m


def _client(master: MasterProcess, key: str | None = KEY) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=master.base_url, headers=headers, timeout=10)


def test_read_then_delete_a_session(secured: MasterProcess, llm: ScriptedOpenAIServer) -> None:
    llm.add_text("Hello there")
    with _client(secured) as client:
        answer = client.post("/query", json={"query": "hi"}).json()
        session_id = answer["session_id"]

        read = client.get(f"/sessions/{session_id}")
        assert read.status_code == 200
        body = read.json()
        assert body["session_id"] == session_id
        assert [(turn["query"], turn["decision"], turn["answer"]) for turn in body["turns"]] == [
            ("hi", "answer_directly", "Hello there")
        ]
        # The turn names the run that made it, so a client reads its record (GET /runs/{run_id}).
        assert answer["run_id"] and body["turns"][0]["run_id"] == answer["run_id"]

        deleted = client.delete(f"/sessions/{session_id}")
        assert deleted.status_code == 200 and deleted.json() == {"session_id": session_id, "deleted": True}
        assert client.get(f"/sessions/{session_id}").status_code == 404
        assert client.delete(f"/sessions/{session_id}").status_code == 404

        # A follow-up on the deleted session is refused, not silently answered without context.
        follow_up = client.post("/query", json={"query": "again", "session_id": session_id})
        assert follow_up.status_code == 404 and follow_up.json()["error_code"] == "unknown_session"


def test_unknown_session_names_it(secured: MasterProcess) -> None:
    with _client(secured) as client:
        response = client.get("/sessions/no-such-session")
    assert response.status_code == 404 and "'no-such-session'" in response.json()["detail"]


def test_a_malformed_session_id_is_refused(secured: MasterProcess) -> None:
    with _client(secured) as client:
        assert client.get("/sessions/bad%20id").status_code == 422


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_sessions_need_the_key(secured: MasterProcess, method: str) -> None:
    for key in (None, "wrong"):
        with _client(secured, key) as client:
            assert client.request(method, "/sessions/any").status_code == 401
