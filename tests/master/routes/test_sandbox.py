"""The sandbox endpoints of a real master process against a fake Kubernetes API server.

The master runs the official ``kubernetes`` client against kmock (tests/master/sandbox/
fake_kubernetes.py: a real HTTP server on loopback) through a kubeconfig. Tests play the kubelet
by setting Pod statuses and logs in the fake. Pool placement uses real pool runner processes
(on 127.0.0.1 and 127.0.0.2, the "Pod IPs" of two fake pool Pods) whose agents register with
the master.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from master.app import create_app
from master.settings import Settings
from master.storage.redis_keys import sandbox_placement_key
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import (
    CRASHING_AGENT_SOURCE,
    ECHO_AGENT_SOURCE,
    ROOT,
    MasterProcess,
    PoolRunnerProcess,
    free_port,
)
from tests.master.sandbox.fake_kubernetes import (
    FakeKubernetes,
    crash_loop_status,
    fake_kubernetes,
    running_status,
    write_kubeconfig,
)

API_KEY = "sandbox-master-key"
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
NS = "agents"
SANDBOX_ROUTES = sorted(
    path
    for path in create_app(Settings()).openapi()["paths"]
    if path.startswith(("/internal/sandbox-agent", "/internal/k8s"))
)


@asynccontextmanager
async def sandbox_master(
    llm: ScriptedOpenAIServer, kubeconfig: Path | str, *, port: int | None = None, **env: str
) -> AsyncIterator[httpx.AsyncClient]:
    settings = {
        "OPENAGENT_K8S_SANDBOX": "1",
        "KUBECONFIG": str(kubeconfig),
        "OPENAGENT_API_KEY": API_KEY,
        "OPENAGENT_K8S_API_TIMEOUT": "10",
        **env,
    }
    master = MasterProcess(master_env(llm, **settings), port=port)
    await asyncio.to_thread(master.start, 60)  # the loaded test machine: the client import is heavy
    try:
        async with httpx.AsyncClient(base_url=master.base_url, headers=HEADERS, timeout=30) as http:
            http.master = master  # type: ignore[attr-defined]
            yield http
    finally:
        await asyncio.to_thread(master.stop)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeKubernetes, Path]]:
    async with fake_kubernetes() as (fake, url):
        yield fake, write_kubeconfig(tmp_path / "kubeconfig", url)


async def whoami(http: httpx.AsyncClient, key: str) -> httpx.Response:
    return await http.get("/whoami", headers={"Authorization": f"Bearer {key}"})


async def assert_own_agent_key(http: httpx.AsyncClient, key: str | None, agent_id: str) -> None:
    """``key`` is a key of role ``agent`` for ``agent_id`` alone, in the deployer's tenant: not the
    master's key, and without the right to make keys."""
    assert key and key != API_KEY
    me = await whoami(http, key)
    assert me.status_code == 200, me.text
    assert (me.json()["role"], me.json()["agent_ids"], me.json()["tenant"]) == (
        "agent",
        [agent_id],
        "default",
    )
    made = await http.post(
        "/keys", json={"name": "x", "role": "admin"}, headers={"Authorization": f"Bearer {key}"}
    )
    assert made.status_code == 403, made.text


async def rows(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await http.get("/agents")
    response.raise_for_status()
    return {row["agent_id"]: row for row in response.json()["agents"]}


async def start(http: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await http.post("/internal/sandbox-agent/start", json=body)


# ---------------------------------------------------------------------------------------- off


async def test_sandbox_off_answers_403_naming_the_setting_and_adds_no_field(master: MasterProcess) -> None:
    assert SANDBOX_ROUTES == [
        "/internal/k8s/pools",
        "/internal/k8s/workloads",
        "/internal/sandbox-agent/logs",
        "/internal/sandbox-agent/start",
        "/internal/sandbox-agent/stop",
    ]
    async with httpx.AsyncClient(base_url=master.base_url, timeout=10) as http:
        for path in SANDBOX_ROUTES:
            if path.endswith(("/start", "/stop")):
                response = await http.post(path, json={"agent_id": "a", "source": "x"})
            else:
                response = await http.get(path, params={"agent_id": "a"})
            assert response.status_code == 403, path
            assert "OPENAGENT_K8S_SANDBOX=1" in response.json()["detail"], path
        status = (await http.get("/internal/sandbox/status")).json()
        assert status["enabled"] is False and status["cluster"]["reason"] == "OPENAGENT_K8S_SANDBOX=0"
        listed = (await http.get("/agents")).json()["agents"]
        assert all("sandbox" not in row for row in listed)


# ------------------------------------------------------------------------------ no cluster


@pytest.mark.parametrize("kind", ["unreachable", "no_kubeconfig"])
async def test_no_cluster_master_starts_status_says_why_endpoints_503(
    llm: ScriptedOpenAIServer, tmp_path: Path, kind: str
) -> None:
    if kind == "unreachable":
        kubeconfig: Path | str = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}")
    else:
        kubeconfig = tmp_path / "missing-kubeconfig"
    async with sandbox_master(llm, kubeconfig) as http:
        assert (await http.get("/health")).status_code == 200
        status = (await http.get("/internal/sandbox/status")).json()
        assert status["enabled"] is True and status["namespace"] == NS
        assert status["cluster"]["reachable"] is False
        expected = "did not answer" if kind == "unreachable" else "no Kubernetes configuration"
        assert expected in status["cluster"]["reason"]
        assert (
            status["master_ws"] == "ws://host.minikube.internal:8000/ws"
            and "resolves" in status["master_ws_hint"]
        )
        assert status["images"]["agent"] == "openagent/agent-runtime:latest"
        assert status["images"]["pool_runner"] == "openagent/agent-pool-runner:latest"
        for path in SANDBOX_ROUTES:
            if path.endswith("/start"):
                response = await start(http, agent_id="a", source="print(1)")
            elif path.endswith("/stop"):
                response = await http.post(path, json={"agent_id": "a"})
            else:
                response = await http.get(path, params={"agent_id": "a"})
            # logs answers 404 first: nothing is deployed, which Redis knows without the cluster.
            assert response.status_code in ((404,) if path.endswith("/logs") else (503,)), (
                path,
                response.text,
            )
        assert (await http.get("/agents")).status_code == 200


# ---------------------------------------------------------------------------------- new_pod


async def test_start_new_pod_creates_a_secure_pod_a_code_config_map_and_a_secret_reference(
    cluster: tuple[FakeKubernetes, Path], llm: ScriptedOpenAIServer, redis_client: Any
) -> None:
    fake, kubeconfig = cluster
    async with sandbox_master(llm, kubeconfig, OPENAGENT_K8S_RUNTIME_CLASS="gvisor") as http:
        status = (await http.get("/internal/sandbox/status")).json()
        assert status["cluster"] == {
            "reachable": True,
            "server": status["cluster"]["server"],
            "version": "v1.26.4+k3s1",
        }

        response = await start(
            http,
            agent_id="echo-agent",
            source=ECHO_AGENT_SOURCE,
            env={"GREETING": "hi"},
            master_ws="ws://m:8000/ws",
        )
        assert response.status_code == 201, response.text
        answer = response.json()
        assert answer["placement"] == "new_pod" and answer["code"] == "source"
        assert answer["replaced"] == {"pods": [], "config_maps": [], "secrets": [], "pool_pod": None}

        (pod,) = fake.live("pods", NS)
        (config_map,) = fake.live("configmaps", NS)
        (secret,) = fake.live("secrets", NS)
        # The agent's own key, in a Secret of its own that the Pod refers to.
        key = fake.secret_value(NS, secret["metadata"]["name"], "OPENAGENT_API_KEY")
        await assert_own_agent_key(http, key, "echo-agent")
        assert secret["metadata"]["labels"] == pod["metadata"]["labels"] and secret["immutable"] is True

        assert 0 < await redis_client.ttl(sandbox_placement_key("echo-agent")) <= 604800
        stopped = await http.post("/internal/sandbox-agent/stop", json={"agent_id": "echo-agent"})
        assert stopped.status_code == 200
        assert stopped.json()["removed"]["secrets"] == [secret["metadata"]["name"]]
        assert (await whoami(http, key or "")).status_code == 401  # revoked at stop
        assert fake.live("secrets", NS) == []
    assert pod["metadata"]["name"] == answer["pod_name"] == config_map["metadata"]["name"]
    assert config_map["data"] == {"agent.py": ECHO_AGENT_SOURCE} and config_map["immutable"] is True
    labels = pod["metadata"]["labels"]
    assert labels["openagent.io/role"] == "agent"  # selected by deploy/k8s/network-policy.yaml
    assert labels["openagent.io/agent"].startswith("echo-agent-")
    assert config_map["metadata"]["labels"] == labels
    assert pod["metadata"]["annotations"]["openagent.io/agent-id"] == "echo-agent"

    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["runtimeClassName"] == "gvisor"
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == "openagent/agent-runtime:latest" and container["imagePullPolicy"] == "Never"
    assert container["command"] == ["python", "/opt/openagent/agent/agent.py"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]} and context["runAsNonRoot"] is True
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "512Mi"},
    }
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/opt/openagent/agent"]["readOnly"] is True and set(mounts) == {
        "/opt/openagent/agent",
        "/tmp",
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["code"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert "emptyDir" in volumes["tmp"]
    env = {e["name"]: e for e in container["env"]}
    assert env["OPENAGENT_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"],
        "key": "OPENAGENT_API_KEY",
    }
    # Neither the master's key nor the agent's own goes into the Pod spec.
    assert API_KEY not in yaml.safe_dump(pod) and str(key) not in yaml.safe_dump(pod)
    assert "openagent-secrets" not in yaml.safe_dump(pod)
    assert env["MASTER_WS"]["value"] == "ws://m:8000/ws" and env["GREETING"]["value"] == "hi"
    assert env["OPENAGENT_AGENT_ID"]["value"] == "echo-agent"
    for obj in (pod, config_map, secret):
        kubernetes_validate.validate(obj, "1.28.0", strict=True)
    assert await redis_client.get(sandbox_placement_key("echo-agent")) is None  # stopped


@pytest.mark.parametrize("sidecar", ["1", "0"])
async def test_document_indexer_gets_a_redis_sidecar_unless_turned_off(
    cluster: tuple[FakeKubernetes, Path], llm: ScriptedOpenAIServer, sidecar: str
) -> None:
    fake, kubeconfig = cluster
    env = {
        "OPENAGENT_K8S_INDEXER_REDIS_SIDECAR": sidecar,
        "OPENAGENT_K8S_INDEXER_REDIS_URL": "redis://shared:6379/3",
    }
    async with sandbox_master(llm, kubeconfig, **env) as http:
        response = await start(http, agent_id="document-indexer-agent", source=ECHO_AGENT_SOURCE)
        assert response.status_code == 201, response.text
        (pod,) = fake.live("pods", NS)
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    agent_env = {e["name"]: e.get("value") for e in containers["agent"]["env"]}
    if sidecar == "1":
        assert set(containers) == {"agent", "redis"}
        assert agent_env["REDIS_URL"] == "redis://127.0.0.1:6379"
        redis = containers["redis"]
        assert redis["securityContext"]["readOnlyRootFilesystem"] is True
        assert redis["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert "127.0.0.1" in redis["args"]
    else:
        assert set(containers) == {"agent"}
        assert agent_env["REDIS_URL"] == "redis://shared:6379/3"
    kubernetes_validate.validate(pod, "1.28.0", strict=True)


async def test_replace_leaves_no_orphans_and_stop_tears_everything_down(
    cluster: tuple[FakeKubernetes, Path], llm: ScriptedOpenAIServer, redis_client: Any
) -> None:
    fake, kubeconfig = cluster
    async with sandbox_master(llm, kubeconfig) as http:
        first = (await start(http, agent_id="echo-agent", source=ECHO_AGENT_SOURCE)).json()
        # An orphan of an interrupted earlier deploy: a labelled ConfigMap without its Pod.
        orphan = {**fake.live("configmaps", NS)[0]}
        orphan["metadata"] = {**orphan["metadata"], "name": "oa-orphan"}
        fake.objects["v1/configmaps", NS, "oa-orphan"] = orphan
        other = (await start(http, agent_id="other-agent", source=ECHO_AGENT_SOURCE)).json()

        second = await start(http, agent_id="echo-agent", module="agents.does_not_exist")
        assert second.status_code == 404 and second.json()["detail"]["code"] == "unknown_module"
        second = (await start(http, agent_id="echo-agent", source=ECHO_AGENT_SOURCE + "\n# v2\n")).json()
        assert second["pod_name"] != first["pod_name"]
        assert second["replaced"] == {
            "pods": [first["pod_name"]],
            "config_maps": sorted([first["config_map"], "oa-orphan"]),
            "secrets": [first["pod_name"]],
            "pool_pod": None,
        }
        pods = sorted(p["metadata"]["name"] for p in fake.live("pods", NS))
        config_maps = sorted(c["metadata"]["name"] for c in fake.live("configmaps", NS))
        assert pods == config_maps == sorted([second["pod_name"], other["pod_name"]])
        codes = {c["metadata"]["name"]: c["data"]["agent.py"] for c in fake.live("configmaps", NS)}
        assert codes[second["config_map"]].endswith("# v2\n")

        stopped = await http.post("/internal/sandbox-agent/stop", json={"agent_id": "echo-agent"})
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["removed"]["pods"] == [second["pod_name"]]
        assert [p["metadata"]["name"] for p in fake.live("pods", NS)] == [other["pod_name"]]
        assert [c["metadata"]["name"] for c in fake.live("configmaps", NS)] == [other["pod_name"]]
        assert [s["metadata"]["name"] for s in fake.live("secrets", NS)] == [other["pod_name"]]
        assert await redis_client.get(sandbox_placement_key("echo-agent")) is None
        again = await http.post("/internal/sandbox-agent/stop", json={"agent_id": "echo-agent"})
        assert again.status_code == 404 and again.json()["detail"]["code"] == "not_deployed"
        await http.post("/internal/sandbox-agent/stop", json={"agent_id": "other-agent"})


async def test_logs_and_the_sandbox_field_of_a_crash_looping_pod(
    cluster: tuple[FakeKubernetes, Path], llm: ScriptedOpenAIServer
) -> None:
    fake, kubeconfig = cluster
    async with sandbox_master(llm, kubeconfig, OPENAGENT_K8S_LOG_TAIL_LINES="2") as http:
        healthy = (await start(http, agent_id="healthy-agent", source=ECHO_AGENT_SOURCE)).json()
        broken = (await start(http, agent_id="broken-agent", source=CRASHING_AGENT_SOURCE)).json()
        fake.set_pod_status(NS, healthy["pod_name"], running_status())
        fake.logs[(NS, healthy["pod_name"], False)] = "starting\nregistered as healthy-agent\n"
        fake.set_pod_status(NS, broken["pod_name"], crash_loop_status(restarts=4))
        # The container is waiting: its current log is empty, the previous run tells why.
        fake.logs[(NS, broken["pod_name"], True)] = "import ok\nconnecting\nboom: DATABASE_URL is not set\n"

        logs = await http.get(
            "/internal/sandbox-agent/logs", params={"agent_id": "healthy-agent", "tail_lines": 1}
        )
        assert logs.status_code == 200
        assert logs.json()["lines"] == ["registered as healthy-agent"]
        logs = await http.get("/internal/sandbox-agent/logs", params={"agent_id": "broken-agent"})
        assert logs.json()["lines"][-1] == "boom: DATABASE_URL is not set"
        missing = await http.get("/internal/sandbox-agent/logs", params={"agent_id": "nobody"})
        assert missing.status_code == 404

        listed = await rows(http)
        crash = listed["broken-agent"]["sandbox"]
        assert crash["placement"] == "new_pod" and crash["pod"] == broken["pod_name"]
        assert (crash["phase"], crash["ready"], crash["restarts"]) == ("Running", False, 4)
        assert crash["reason"] == "CrashLoopBackOff" and crash["unhealthy"] is True
        assert crash["log_tail"] == [
            "connecting",
            "boom: DATABASE_URL is not set",
        ]  # OPENAGENT_K8S_LOG_TAIL_LINES=2
        assert listed["broken-agent"]["status"] == "unhealthy"
        fine = listed["healthy-agent"]["sandbox"]
        assert (fine["phase"], fine["ready"], fine["restarts"], fine["unhealthy"]) == (
            "Running",
            True,
            0,
            False,
        )
        assert "log_tail" not in fine

        workloads = (await http.get("/internal/k8s/workloads")).json()
        by_agent = {w["agent_id"]: w for w in workloads["agent_pods"]}
        assert by_agent["broken-agent"]["reason"] == "CrashLoopBackOff" and by_agent["healthy-agent"]["ready"]
        assert workloads["pools"] == []


# ------------------------------------------------------------------------------------- pool


@pytest.fixture
async def pool_runners(tmp_path: Path) -> AsyncIterator[list[PoolRunnerProcess]]:
    """Two real pool runners on one port at two loopback addresses, as two Pods would be."""
    port = free_port()
    # The runners hold the master's key as their token only: no OPENAGENT_API_KEY to hand out.
    env = {"POOL_RUNNER_TOKEN": API_KEY}
    runners = [
        PoolRunnerProcess(tmp_path / f"pool-{n}", env, token=API_KEY, host=f"127.0.0.{n}", port=port)
        for n in (1, 2)
    ]
    async with runners[0], runners[1]:
        yield runners


async def wait_for_row(
    http: httpx.AsyncClient, agent_id: str, check: Any, timeout: float = 30
) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            row = (await rows(http)).get(agent_id)
            if row is not None and check(row):
                return row
            await asyncio.sleep(0.1)


async def test_pool_placement_least_loaded_named_logs_listing_stop(
    cluster: tuple[FakeKubernetes, Path], llm: ScriptedOpenAIServer, pool_runners: list[PoolRunnerProcess]
) -> None:
    fake, kubeconfig = cluster
    pool_labels = {"openagent.io/role": "agent-pool", "app.kubernetes.io/name": "agent-pool"}
    for n in (1, 2):
        status = running_status(f"127.0.0.{n}")
        status["containerStatuses"][0]["name"] = "pool-runner"
        fake.add_pod(NS, f"agent-pool-{n}", pool_labels, status)
    fake.add_pod(NS, "agent-pool-pending", pool_labels, {"phase": "Pending"})  # not ready: never chosen
    port = str(pool_runners[0].port)
    async with sandbox_master(llm, kubeconfig, OPENAGENT_K8S_POOL_RUNNER_PORT=port) as http:
        master: MasterProcess = http.master  # type: ignore[attr-defined]
        env = {"source": ECHO_AGENT_SOURCE, "placement": "pool", "master_ws": master.ws_url}
        first = (await start(http, agent_id="pool-a", **env)).json()
        second = (await start(http, agent_id="pool-b", **env)).json()
        assert {first["pool_pod_name"], second["pool_pod_name"]} == {
            "agent-pool-1",
            "agent-pool-2",
        }  # least loaded
        named = (await start(http, agent_id="pool-c", pool_pod_name="agent-pool-2", **env)).json()
        assert named["pool_pod_name"] == "agent-pool-2"
        unknown = await start(http, agent_id="pool-d", pool_pod_name="agent-pool-pending", **env)
        assert unknown.status_code == 404 and unknown.json()["detail"]["code"] == "unknown_pool_pod"
        assert fake.live("configmaps", NS) == fake.live("secrets", NS) == []  # pool agents need neither

        # The agents really run: they register with this master over WebSocket, each with the
        # key the master made for it and sent with its start (the runners have none to give).
        for agent_id in ("pool-a", "pool-b", "pool-c"):
            row = await wait_for_row(http, agent_id, lambda r: r["connection_type"] == "websocket")
        keys = {k["name"]: k for k in (await http.get("/keys")).json()["keys"]}
        for agent_id in ("pool-a", "pool-b", "pool-c"):
            key = keys[f"agent {agent_id} (started by the master)"]
            assert (key["role"], key["agent_ids"], key["tenant"]) == ("agent", [agent_id], "default")
        assert row["sandbox"]["placement"] == "pool" and row["sandbox"]["pod"] == "agent-pool-2"
        assert row["sandbox"]["ready"] is True and row["sandbox"]["restarts"] == 0

        pools = {p["pod"]: p for p in (await http.get("/internal/k8s/pools")).json()["pools"]}
        assert second["pool_pod_name"] == "agent-pool-2"  # ties go to the first name, then the emptier Pod
        assert sorted(a["agent_id"] for a in pools["agent-pool-2"]["agents"]) == ["pool-b", "pool-c"]
        assert [a["agent_id"] for a in pools["agent-pool-1"]["agents"]] == ["pool-a"]
        assert pools["agent-pool-pending"]["error"] == "no Pod IP yet"

        # Moving an agent to a new Pod stops it in its pool.
        moved = (await start(http, agent_id="pool-c", source=ECHO_AGENT_SOURCE)).json()
        assert moved["placement"] == "new_pod" and moved["replaced"]["pool_pod"] == "agent-pool-2"
        pools = {p["pod"]: p for p in (await http.get("/internal/k8s/pools")).json()["pools"]}
        assert [a["agent_id"] for a in pools["agent-pool-2"]["agents"]] == ["pool-b"]

        # A crash-looping pool agent: the sandbox field reports it with the runner's log tail.
        await start(
            http,
            agent_id="pool-crash",
            pool_pod_name="agent-pool-1",
            **{**env, "source": CRASHING_AGENT_SOURCE},
        )
        crash = await wait_for_row(http, "pool-crash", lambda r: r["sandbox"].get("reason") == "CrashLoop")
        assert crash["sandbox"]["unhealthy"] is True and crash["sandbox"]["restarts"] >= 2
        assert "boom: DATABASE_URL is not set" in crash["sandbox"]["log_tail"]
        logs = (await http.get("/internal/sandbox-agent/logs", params={"agent_id": "pool-crash"})).json()
        assert logs["placement"] == "pool" and "boom: DATABASE_URL is not set" in logs["lines"]

        stopped = (await http.post("/internal/sandbox-agent/stop", json={"agent_id": "pool-a"})).json()
        assert stopped["removed"]["pool_pod"] == first["pool_pod_name"]
        names = {k["name"] for k in (await http.get("/keys")).json()["keys"]}
        assert "agent pool-a (started by the master)" not in names  # revoked at stop
        assert "agent pool-b (started by the master)" in names
        await wait_for_row(http, "pool-b", lambda r: True)
        async with asyncio.timeout(30):
            while "pool-a" in await rows(http):
                await asyncio.sleep(0.1)


async def test_start_rejects_bad_requests_naming_the_value(
    cluster: tuple[FakeKubernetes, Path], llm: ScriptedOpenAIServer
) -> None:
    _, kubeconfig = cluster
    async with sandbox_master(llm, kubeconfig) as http:
        cases = [
            ({"agent_id": "a"}, "exactly one of 'module' and 'source'"),
            (
                {"agent_id": "a", "module": "os.path"},
                "'os.path' is not a module of agents/ or system_agents/",
            ),
            (
                {"agent_id": "a", "source": "x", "env": {"MASTER_WS": "ws://x"}},
                "'MASTER_WS' is set by the sandbox",
            ),
            ({"agent_id": "a", "source": "x", "master_ws": "http://x"}, "master_ws must be a ws://"),
            ({"agent_id": "a", "source": "x", "placement": "pool"}, "no ready pool runner Pod"),
        ]
        for body, message in cases:
            response = await start(http, **body)
            assert response.status_code in (400, 409), (body, response.text)
            assert message in response.json()["detail"]["message"], (body, response.text)
    assert (ROOT / "agents").is_dir()
