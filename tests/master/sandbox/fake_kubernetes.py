"""A Kubernetes API server for tests: kmock's stateful emulator on loopback, made a little more real.

kmock (``KubernetesEmulator``) is a real aiohttp server that stores what clients create, patch
and delete, and serves lists, reads and watches. On top of it this adds what the sandbox relies
on and the emulator leaves out: equality-based ``labelSelector`` on lists, the ``pods/log``
subresource (text, with ``tailLines`` and ``previous``), and the ``metadata.uid`` /
``creationTimestamp`` / Pending ``status`` a real API server sets on create. Tests play the
kubelet by setting Pod statuses (:meth:`FakeKubernetes.set_pod_status`).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import kmock
import yaml
from kmock._internal import rendering

from tests.factories import ROOT

PODS = "v1/pods"
CONFIG_MAPS = "v1/configmaps"
SECRETS = "v1/secrets"


def _matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key) != value.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@attrs.define(kw_only=True)
class FakeKubernetes(kmock.KubernetesEmulator):
    """kmock's emulator with label selectors, Pod logs and server-set metadata."""

    logs: dict[tuple[str, str, bool], str] = attrs.field(factory=dict)
    """``(namespace, pod, previous)`` → the log text."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback["get /version/"] << self._serve_server_version  # the Python client's spelling
        for resource, kind in (
            (PODS, "Pod"),
            (CONFIG_MAPS, "ConfigMap"),
            (SECRETS, "Secret"),
        ):  # listed empty before any exists
            self.resources[resource] = kmock.ResourceInfo(kind=kind, namespaced=True)

    async def _handle(self, request: rendering.Request) -> Any:
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            metadata = request.data.setdefault("metadata", {})
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", datetime.datetime.now(datetime.UTC).isoformat())
            if request.resource is not None and request.resource.plural == "pods":
                request.data.setdefault("status", {"phase": "Pending"})
        return await super()._handle(request)

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        answer: Any = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if selector:
            answer["items"] = [
                item
                for item in answer["items"]
                if _matches(selector, (item.get("metadata") or {}).get("labels") or {})
            ]
        return answer  # type: ignore[no-any-return]

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        if request.subresource != "log":
            return await super()._serve_fetch(request)
        assert request.namespace is not None and request.name is not None
        key = (kmock.resource(PODS), request.namespace, request.name)
        if key not in self.objects or self.objects[key].deleted:
            raise kmock.KubernetesObjectNotFoundError()
        previous = request.params.get("previous") == "true"
        text = self.logs.get((request.namespace, request.name, previous), "")
        tail = request.params.get("tailLines")
        if tail:
            text = "".join(text.splitlines(keepends=True)[-int(tail) :])
        return text.encode()

    # test helpers -----------------------------------------------------------------------------

    def live(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        """The objects of a resource that exist now (not deleted)."""
        return [
            obj.raw
            for (resource, ns, _), obj in self.objects.items()
            if resource.plural == plural and ns == namespace and not obj.deleted
        ]

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """An entry of a live Secret (``stringData`` as sent, or ``data`` decoded), else ``None``."""
        for secret in self.live("secrets", namespace):
            if secret["metadata"]["name"] == name:
                if key in (secret.get("stringData") or {}):
                    return str(secret["stringData"][key])
                if key in (secret.get("data") or {}):
                    return base64.b64decode(secret["data"][key]).decode()
        return None

    def set_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.objects[PODS, namespace, name].patch({"status": status})

    def add_pod(self, namespace: str, name: str, labels: dict[str, str], status: dict[str, Any]) -> None:
        self.objects[PODS, namespace, name] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "uid": str(uuid.uuid4())},
            "spec": {"containers": [{"name": "pool-runner", "image": "openagent/agent-pool-runner:latest"}]},
            "status": status,
        }


def running_status(pod_ip: str = "10.0.0.5", *, restarts: int = 0) -> dict[str, Any]:
    return {
        "phase": "Running",
        "podIP": pod_ip,
        "containerStatuses": [
            {"name": "agent", "ready": True, "restartCount": restarts, "state": {"running": {}}}
        ],
    }


def crash_loop_status(restarts: int = 4) -> dict[str, Any]:
    return {
        "phase": "Running",
        "podIP": "10.0.0.6",
        "containerStatuses": [
            {
                "name": "agent",
                "ready": False,
                "restartCount": restarts,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
            }
        ],
    }


def write_kubeconfig(path: Path, server: str, namespace: str = "agents") -> Path:
    """A kubeconfig whose current context points at ``server`` (plain HTTP, a dummy token)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "tester", "user": {"token": "fake-token"}}],
                "contexts": [
                    {"name": "fake", "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}
                ],
                "current-context": "fake",
            }
        )
    )
    return path


@asynccontextmanager
async def fake_kubernetes() -> AsyncIterator[tuple[FakeKubernetes, str]]:
    """The fake API server on a free loopback port; yields it and its URL."""
    async with FakeKubernetes() as handler, kmock.Server(handler) as server:
        yield handler, str(server.url).rstrip("/")


class FakeKubelet:
    """Plays the kubelet for agent Pods created in the fake: runs each one's code as a local process.

    The code comes from the Pod's ConfigMap, the environment from its ``env``: values, and
    ``secretKeyRef`` entries read from the fake's Secrets (a reference to a missing Secret keeps
    the Pod from starting, as the kubelet does). Nothing of this process's environment but
    ``PATH`` reaches the agent. The Pod is then marked Running.
    """

    def __init__(self, fake: FakeKubernetes, namespace: str, workdir: Path) -> None:
        self._fake = fake
        self._namespace = namespace
        self._workdir = workdir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.environments: dict[str, dict[str, str]] = {}
        """Pod name → the environment its container got."""

    def _environment(self, container: dict[str, Any]) -> dict[str, str] | None:
        env: dict[str, str] = {}
        for var in container["env"]:
            if "value" in var:
                env[var["name"]] = var["value"]
                continue
            ref = var["valueFrom"]["secretKeyRef"]
            value = self._fake.secret_value(self._namespace, ref["name"], ref["key"])
            if value is None:
                if ref.get("optional"):
                    continue
                return None  # CreateContainerConfigError: the Secret is missing
            env[var["name"]] = value
        return env

    def _start(self, pod: dict[str, Any], code: str) -> None:
        name = pod["metadata"]["name"]
        env = self._environment(pod["spec"]["containers"][0])
        if env is None:
            return
        env = {**env, "PATH": os.environ.get("PATH", ""), "HOME": str(self._workdir), "PYTHONPATH": str(ROOT)}
        self.environments[name] = env
        script = self._workdir / f"{name}.py"
        script.write_text(code)
        self.processes[name] = subprocess.Popen(
            [sys.executable, str(script)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._fake.set_pod_status(self._namespace, name, running_status())

    async def run(self) -> None:
        while True:
            codes = {
                c["metadata"]["name"]: c["data"]["agent.py"]
                for c in self._fake.live("configmaps", self._namespace)
            }
            for pod in self._fake.live("pods", self._namespace):
                name = pod["metadata"]["name"]
                if name not in self.processes and name in codes:
                    self._start(pod, codes[name])
            await asyncio.sleep(0.05)

    def stop(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait(timeout=10)


@asynccontextmanager
async def fake_kubelet(fake: FakeKubernetes, namespace: str, workdir: Path) -> AsyncIterator[FakeKubelet]:
    kubelet = FakeKubelet(fake, namespace, workdir)
    task = asyncio.create_task(kubelet.run())
    try:
        yield kubelet
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        kubelet.stop()
