"""The master's view of the Kubernetes API: the official ``kubernetes`` client behind a small async face.

The client is synchronous (urllib3); every call runs in a worker thread with a per-request
timeout (``OPENAGENT_K8S_API_TIMEOUT``), so the event loop never blocks on the cluster. Lists and
reads ask for the raw JSON (``_preload_content=False``) and hand back plain dicts.

Connection: in a Pod, the in-cluster service account; elsewhere the kubeconfig (``KUBECONFIG``
or ``~/.kube/config``, its current context). When neither exists :meth:`Cluster.connect` still
returns a cluster, one that answers every call with :class:`~master.errors.SandboxUnavailable`
saying why, so the master starts without a cluster.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from master.errors import SandboxRejected, SandboxUnavailable

logger = logging.getLogger("master.sandbox")

T = TypeVar("T")

# The client accepts plain dicts as bodies and returns raw responses with _preload_content=False,
# which its annotations do not say: it is used through Any.
_load_incluster_config: Any = k8s_config.load_incluster_config
_load_kube_config: Any = k8s_config.load_kube_config


class Cluster:
    """Pods, ConfigMaps, Secrets and logs in one namespace."""

    def __init__(
        self, api: k8s.ApiClient | None, namespace: str, *, timeout: float, reason: str = ""
    ) -> None:
        self._api: Any = api
        self._core: Any = k8s.CoreV1Api(api) if api is not None else None
        self.namespace = namespace
        self.timeout = timeout
        self.reason = reason
        """Why there is no cluster configuration (empty when there is one)."""
        self.server = api.configuration.host if api is not None else None

    @classmethod
    def connect(cls, namespace: str, *, timeout: float) -> Cluster:
        """In-cluster configuration, else the kubeconfig; a cluster without API when neither exists."""
        configuration = k8s.Configuration()
        try:
            _load_incluster_config(client_configuration=configuration)
            source = "in-cluster service account"
        except ConfigException as in_cluster:
            try:
                _load_kube_config(client_configuration=configuration)
                source = "kubeconfig"
            except (ConfigException, OSError, TypeError) as kubeconfig:
                reason = (
                    f"no Kubernetes configuration: not in a cluster ({in_cluster}) and no usable "
                    f"kubeconfig ({kubeconfig}); set KUBECONFIG or run the master in the cluster"
                )
                return cls(None, namespace, timeout=timeout, reason=reason)
        configuration.retries = (
            1  # an unreachable cluster answers quickly instead of after urllib3's 3 retries
        )
        logger.info("Kubernetes sandbox: %s, API %s, namespace %s", source, configuration.host, namespace)
        return cls(k8s.ApiClient(configuration), namespace, timeout=timeout)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()

    # calls --------------------------------------------------------------------------------

    async def _call(self, what: str, function: Callable[[Any], T]) -> T:
        """Run ``function(core_v1_api)`` in a thread; API and transport errors become domain errors."""
        if self._core is None:
            raise SandboxUnavailable(self.reason)
        core = self._core
        try:
            return await asyncio.to_thread(function, core)
        except ApiException as exc:
            message = _api_message(exc)
            if exc.status in (400, 409, 422):
                raise SandboxRejected("invalid_request", f"Kubernetes refused to {what}: {message}") from exc
            if exc.status == 404:
                raise SandboxMissing(f"{what}: {message}") from exc
            raise SandboxUnavailable(
                f"Kubernetes answered {exc.status} to {what} in namespace {self.namespace!r}: {message}"
            ) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SandboxUnavailable(
                f"the Kubernetes API at {self.server} did not answer ({what}): {type(exc).__name__}: {exc}"
            ) from exc

    async def version(self) -> dict[str, Any]:
        """``GET /version``: the cheapest proof that the API answers."""
        if self._api is None:
            raise SandboxUnavailable(self.reason)
        api = self._api

        def call(_: Any) -> dict[str, Any]:
            version_api: Any = k8s.VersionApi(api)
            response = version_api.get_code(_preload_content=False, _request_timeout=self.timeout)
            return _json(response)

        return await self._call("version", call)

    async def list_pods(self, label_selector: str) -> list[dict[str, Any]]:
        return await self._list("list_namespaced_pod", "list pods", label_selector)

    async def list_config_maps(self, label_selector: str) -> list[dict[str, Any]]:
        return await self._list("list_namespaced_config_map", "list config maps", label_selector)

    async def list_secrets(self, label_selector: str) -> list[dict[str, Any]]:
        """The Secrets with the labels (their metadata is what the sandbox uses)."""
        return await self._list("list_namespaced_secret", "list secrets", label_selector)

    async def _list(self, method: str, what: str, label_selector: str) -> list[dict[str, Any]]:
        """The items of the namespace's ``method`` (``list_namespaced_<kind>``) with the labels."""

        def call(core: Any) -> list[dict[str, Any]]:
            response = getattr(core, method)(
                self.namespace,
                label_selector=label_selector,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
            items: list[dict[str, Any]] = _json(response).get("items") or []
            return items

        return await self._call(what, call)

    async def create_secret(self, body: dict[str, Any]) -> None:
        await self._call(
            "create secret",
            lambda core: core.create_namespaced_secret(
                self.namespace, body, _preload_content=False, _request_timeout=self.timeout
            ),
        )

    async def delete_secret(self, name: str) -> bool:
        return await self._delete(
            "delete secret",
            lambda core: core.delete_namespaced_secret(
                name, self.namespace, _preload_content=False, _request_timeout=self.timeout
            ),
        )

    async def create_pod(self, body: dict[str, Any]) -> None:
        await self._call(
            "create pod",
            lambda core: core.create_namespaced_pod(
                self.namespace, body, _preload_content=False, _request_timeout=self.timeout
            ),
        )

    async def create_config_map(self, body: dict[str, Any]) -> None:
        await self._call(
            "create config map",
            lambda core: core.create_namespaced_config_map(
                self.namespace, body, _preload_content=False, _request_timeout=self.timeout
            ),
        )

    async def delete_pod(self, name: str) -> bool:
        """Delete a Pod; ``False`` when it was already gone."""
        return await self._delete(
            "delete pod",
            lambda core: core.delete_namespaced_pod(
                name,
                self.namespace,
                grace_period_seconds=5,
                _preload_content=False,
                _request_timeout=self.timeout,
            ),
        )

    async def delete_config_map(self, name: str) -> bool:
        return await self._delete(
            "delete config map",
            lambda core: core.delete_namespaced_config_map(
                name, self.namespace, _preload_content=False, _request_timeout=self.timeout
            ),
        )

    async def _delete(self, what: str, function: Callable[[Any], object]) -> bool:
        try:
            await self._call(what, function)
        except SandboxMissing:
            return False
        return True

    async def pod_log(self, name: str, container: str, tail_lines: int, *, previous: bool = False) -> str:
        def call(core: Any) -> str:
            response = core.read_namespaced_pod_log(
                name,
                self.namespace,
                container=container,
                tail_lines=tail_lines,
                previous=previous,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
            data: bytes = response.data
            return data.decode(errors="replace")

        return await self._call("read pod log", call)


class SandboxMissing(SandboxRejected):
    """The API answered 404: the object (or the namespace) does not exist."""

    def __init__(self, message: str) -> None:
        super().__init__("not_found", message)


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or exc.reason or exc)


def _json(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data or b"{}")
    return data
