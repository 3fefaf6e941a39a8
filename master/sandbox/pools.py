"""The master's client of the pool runners (``openagent/pool_runner``), one HTTP API per pool Pod.

A pool runner is reached at its Pod IP on ``OPENAGENT_K8S_POOL_RUNNER_PORT`` with the master's
API key as the bearer token (the runner's ``POOL_RUNNER_TOKEN`` falls back to the same
``OPENAGENT_API_KEY``). Failures become :class:`~master.errors.SandboxUnavailable` (the runner
did not answer, or answered 5xx) or :class:`~master.errors.SandboxRejected` (it refused).
"""

from __future__ import annotations

from typing import Any

import httpx

from master.errors import SandboxRejected, SandboxUnavailable


class PoolRunners:
    """Calls to pool runner Pods by their address."""

    def __init__(self, http: httpx.AsyncClient, *, port: int, token: str | None) -> None:
        self._http = http
        self.port = port
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def url(self, pod_ip: str) -> str:
        return f"http://{pod_ip}:{self.port}"

    async def _request(self, method: str, pod_ip: str, path: str, **kwargs: Any) -> dict[str, Any]:
        url = self.url(pod_ip) + path
        try:
            response = await self._http.request(method, url, headers=self._headers, **kwargs)
        except httpx.HTTPError as exc:
            raise SandboxUnavailable(
                f"pool runner {url} did not answer: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code >= 500 or response.status_code == 401:
            raise SandboxUnavailable(
                f"pool runner {url} answered {response.status_code}: {response.text[:300]}"
            )
        try:
            body: dict[str, Any] = response.json()
        except ValueError:
            raise SandboxUnavailable(
                f"pool runner {url} answered non-JSON ({response.status_code})"
            ) from None
        if response.status_code == 404:
            raise SandboxRejected("not_deployed", str(body.get("detail", "not running in the pool")))
        if response.status_code >= 400:
            raise SandboxRejected("pool_refused", f"pool runner {url} refused: {body.get('detail', body)}")
        return body

    async def agents(self, pod_ip: str) -> list[dict[str, Any]]:
        agents: list[dict[str, Any]] = (await self._request("GET", pod_ip, "/agents"))["agents"]
        return agents

    async def start(self, pod_ip: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._request("POST", pod_ip, "/agents", json=body)

    async def stop(self, pod_ip: str, agent_id: str) -> dict[str, Any]:
        return await self._request("DELETE", pod_ip, f"/agents/{agent_id}")

    async def logs(self, pod_ip: str, agent_id: str, tail_lines: int) -> dict[str, Any]:
        return await self._request(
            "GET", pod_ip, f"/agents/{agent_id}/logs", params={"tail_lines": tail_lines}
        )
