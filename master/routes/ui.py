"""The built web UI (``openagent-ui/dist``) at ``/ui``, with ``/`` redirecting to it.

Served only when the build exists (``scripts/run.sh`` builds it when missing or stale).
The page itself is public; it asks for the API key and sends it on every API request.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from master.access import Permission
from master.access.permissions import mark
from master.deps import needs

DEFAULT_DIST = Path(__file__).resolve().parents[2] / "openagent-ui" / "dist"
"""Where ``npm run build`` in ``openagent-ui/`` writes the UI."""


def ui_directory(configured: str | None) -> Path | None:
    """The UI build to serve: ``OPENAGENT_UI_DIR`` or the repository's, when it has an ``index.html``."""
    directory = Path(configured) if configured else DEFAULT_DIST
    return directory if (directory / "index.html").is_file() else None


def mount_ui(app: FastAPI, directory: Path) -> None:
    """Serve ``directory`` at ``/ui/`` and redirect ``/`` there."""

    @app.get("/", include_in_schema=False, dependencies=needs(Permission.OPEN))
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    app.mount("/ui", StaticFiles(directory=directory, html=True), name="ui")
    mark(app.routes[-1], Permission.OPEN)  # the UI asks for a key itself
