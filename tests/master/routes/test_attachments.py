"""``GET /attachments/{ref}`` is a download, never a page; a session's attachments have a cap."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import EVERY_TENANT, in_process_master

CAP = 3000
LLM_CALLS: list[int] = []


def answer(messages: Any, tools: Any) -> ChatResult:
    LLM_CALLS.append(1)
    return ChatResult("ok")


def attachment(name: str, data: bytes, mime: str = "text/plain") -> dict[str, str]:
    return {"filename": name, "mime_type": mime, "content_base64": base64.b64encode(data).decode()}


async def test_an_html_attachment_is_served_as_a_download_not_a_page() -> None:
    page = b"<html><body><script>alert(document.cookie)</script></body></html>"
    async with in_process_master(FunctionChatModel(answer)) as master:
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            query = await http.post(
                "/query",
                json={"query": "read it", "attachments": [attachment("page.html", page, "text/html")]},
            )
            assert query.status_code == 200, query.text
            session_id = query.json()["session_id"]
            store = master.app.state.services.attachments
            (item,) = await store.files(session_id, EVERY_TENANT)
            token = await store.issue_token(session_id, 60)
            blob = await http.get(f"/attachments/{item.ref}", headers={"X-OpenAgent-Call-Token": token})
    assert blob.status_code == 200 and blob.content == page
    assert blob.headers["x-content-type-options"] == "nosniff"
    assert blob.headers["content-disposition"] == "attachment; filename*=UTF-8''page.html"


async def test_a_session_s_attachments_are_capped_with_a_413_naming_the_setting() -> None:
    async with in_process_master(
        FunctionChatModel(answer), openagent_session_attachment_max_bytes=CAP, rag_max_attachment_bytes=2000
    ) as master:
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            first = await http.post(
                "/query", json={"query": "one", "attachments": [attachment("a.txt", b"a" * 1500)]}
            )
            assert first.status_code == 200, first.text
            session_id = first.json()["session_id"]
            again = {
                "query": "same file",
                "session_id": session_id,
                "attachments": [attachment("a.txt", b"a" * 1500)],
            }
            assert (await http.post("/query", json=again)).status_code == 200  # stored once, counted once
            calls = len(LLM_CALLS)
            over = await http.post(
                "/query",
                json={
                    "query": "two",
                    "session_id": session_id,
                    "attachments": [attachment("b.txt", b"b" * 1600)],
                },
            )
            assert over.status_code == 413, over.text
            body = over.json()
            message = str(body.get("error") or body.get("detail"))
            assert "OPENAGENT_SESSION_ATTACHMENT_MAX_BYTES" in message and "3000 bytes per session" in message
            assert len(LLM_CALLS) == calls  # refused before the model ran
            files = await master.app.state.services.attachments.files(session_id, EVERY_TENANT)
            assert [item.filename for item in files] == ["a.txt"]
            other = await http.post(
                "/query", json={"query": "fresh", "attachments": [attachment("b.txt", b"b" * 1600)]}
            )
            assert other.status_code == 200  # the cap is per session
