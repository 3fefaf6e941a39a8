"""The built web UI at ``/ui`` (and ``/`` redirecting there), only when a build exists."""

from __future__ import annotations

from pathlib import Path

import httpx

from master.app import create_app
from master.settings import Settings


def _client(ui_dir: Path) -> httpx.AsyncClient:
    app = create_app(Settings(_env_file=None, openagent_ui_dir=str(ui_dir)))  # type: ignore[call-arg]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://master")


async def test_serves_the_build_and_redirects_root(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<title>OpenAgent</title>")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "app.js").write_text("console.log(1)")
    async with _client(tmp_path) as client:
        root = await client.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/ui/"
        page = await client.get("/ui/")
        assert page.status_code == 200 and "<title>OpenAgent</title>" in page.text
        asset = await client.get("/ui/assets/app.js")
        assert asset.status_code == 200 and "javascript" in asset.headers["content-type"]
        assert (await client.get("/ui/../pyproject.toml")).status_code == 404


async def test_nothing_is_served_without_a_build(tmp_path: Path) -> None:
    async with _client(tmp_path) as client:
        assert (await client.get("/")).status_code == 404
        assert (await client.get("/ui/")).status_code == 404
