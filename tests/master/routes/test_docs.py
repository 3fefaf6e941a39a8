"""``/docs`` and ``/redoc`` work offline: their pages reference only the master's own URLs, and
Swagger UI renders in a browser that can reach nothing but the master."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest

from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import InProcessMaster, in_process_master

_REFERENCE = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""")


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(FunctionChatModel(lambda m, t: ChatResult("ok"))) as m:
        yield m


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_reference_only_the_master_s_own_urls(
    master: InProcessMaster, page: str
) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        response = await http.get(page)
        assert response.status_code == 200 and "text/html" in response.headers["content-type"]
        references = _REFERENCE.findall(response.text)
        assert "/openapi.json" in references and "/favicon.svg" in references
        for url in references:
            assert url.startswith("/") and not url.startswith("//"), f"{page} loads {url!r} from elsewhere"
            asset = await http.get(url)
            assert asset.status_code == 200, f"{page} references {url}, which answers {asset.status_code}"
        assert "fonts.googleapis" not in response.text and "cdn" not in response.text.lower()


async def test_the_favicon_is_served(master: InProcessMaster) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        for path in ("/favicon.svg", "/favicon.ico"):
            icon = await http.get(path)
            assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
            assert icon.text.startswith("<svg")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
async def test_swagger_ui_renders_with_every_other_host_blocked(master: InProcessMaster) -> None:
    """Chromium resolves no host but the master's loopback address: a CDN script would not load."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--virtual-time-budget=20000",
        "--dump-dom",
        f"{master.base_url}/docs",
    ]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    async with asyncio.timeout(120):
        dom, _ = await process.communicate()
    text = dom.decode(errors="replace")
    assert 'class="swagger-ui' in text, text[-2000:]
    assert "opblock" in text and "/query/orchestrator-models" in text  # the operations are listed
