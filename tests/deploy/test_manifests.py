"""deploy/k8s: every object is valid Kubernetes and the manifests agree with each other.

Each object is checked against the Kubernetes OpenAPI schemas bundled with
``kubernetes-validate`` (offline, strict: unknown fields are errors), for the oldest
supported version (1.28) and the newest the package knows. The cross-references the
schemas cannot see are checked by hand: selectors and labels, Services and ports, Secrets
and ConfigMaps, the service account, the images and the settings names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from master.gateway.drain import ANSWER_GRACE_SECONDS
from master.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S_DIR = ROOT / "deploy" / "k8s"
START_SH = ROOT / "start.sh"
NAMESPACE = "agents"

MIN_KUBERNETES = "1.28.0"
KUBERNETES_VERSIONS = [MIN_KUBERNETES, kubernetes_validate.latest_version()]

EXTERNAL_IMAGES = {"redis:7-alpine"}
"""Images pulled from a registry; every other image is built by ./start.sh."""

CLUSTER_SCOPED = {"Namespace"}


def _load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


MANIFESTS = sorted(K8S_DIR.glob("*.yaml"))
OBJECTS = [(path, obj) for path in MANIFESTS for obj in _load(path)]


def _objects(kind: str) -> list[dict[str, Any]]:
    return [obj for _, obj in OBJECTS if obj["kind"] == kind]


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [obj for obj in _objects(kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name!r} in deploy/k8s, found {len(found)}"
    return found[0]


def _containers() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(Deployment, container) for every container of every Deployment."""
    for deployment in _objects("Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            yield deployment, container


def _object_id(item: tuple[Path, dict[str, Any]]) -> str:
    path, obj = item
    return f"{path.name}:{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def _built_images() -> dict[str, str]:
    """Image tag -> Dockerfile, as built by ./start.sh."""
    return dict(
        re.findall(r'"([^"=\s]+:[^"=\s]+)=(deploy/docker/[^"\s]+\.Dockerfile)"', START_SH.read_text())
    )


def _secret_keys() -> set[str]:
    """The keys ./start.sh puts into the Secret openagent-secrets."""
    return set(re.findall(r"--from-file=([A-Z_][A-Z0-9_]*)=", START_SH.read_text()))


def test_the_expected_manifests_exist() -> None:
    names = {path.name for path in MANIFESTS}
    assert {
        "namespace.yaml",
        "redis.yaml",
        "master.yaml",
        "weather-agent.yaml",
        "rbac.yaml",
        "agent-pool.yaml",
        "network-policy.yaml",
    } <= names


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("item", OBJECTS, ids=[_object_id(item) for item in OBJECTS])
def test_object_is_valid_kubernetes(item: tuple[Path, dict[str, Any]], version: str) -> None:
    _, obj = item
    kubernetes_validate.validate(obj, version, strict=True)


def test_strict_validation_rejects_a_misspelt_field() -> None:
    """The schema check is not vacuous: a typo in a container fails it."""
    deployment = _one("Deployment", "weather-agent")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError, match="imagePulPolicy"):
        kubernetes_validate.validate(broken, MIN_KUBERNETES, strict=True)


@pytest.mark.parametrize("item", OBJECTS, ids=[_object_id(item) for item in OBJECTS])
def test_object_lives_in_the_agents_namespace(item: tuple[Path, dict[str, Any]]) -> None:
    _, obj = item
    assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
    if obj["kind"] in CLUSTER_SCOPED:
        assert "namespace" not in obj["metadata"]
    else:
        assert obj["metadata"].get("namespace") == NAMESPACE


def test_namespace_is_agents() -> None:
    _one("Namespace", NAMESPACE)


def test_object_names_are_unique_per_kind() -> None:
    seen = [(obj["kind"], obj["metadata"]["name"]) for _, obj in OBJECTS]
    assert len(seen) == len(set(seen)), sorted(seen)


@pytest.mark.parametrize("deployment", _objects("Deployment"), ids=lambda d: d["metadata"]["name"])
def test_deployment_selector_matches_its_pod_labels(deployment: dict[str, Any]) -> None:
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector and selector.items() <= labels.items()


@pytest.mark.parametrize("deployment", _objects("Deployment"), ids=lambda d: d["metadata"]["name"])
def test_pods_run_as_non_root_with_the_restricted_profile(deployment: dict[str, Any]) -> None:
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert context.get("runAsUser", 1) != 0


@pytest.mark.parametrize(
    ("deployment", "container"),
    list(_containers()),
    ids=[f"{d['metadata']['name']}/{c['name']}" for d, c in _containers()],
)
def test_container_has_resources_and_probes(deployment: dict[str, Any], container: dict[str, Any]) -> None:
    resources = container["resources"]
    assert {"cpu", "memory"} <= resources["requests"].keys()
    assert {"cpu", "memory"} <= resources["limits"].keys()
    if container.get("ports"):
        # A container that serves a port says when it is ready and when it is stuck.
        assert "readinessProbe" in container and "livenessProbe" in container
        port_names = {port["name"] for port in container["ports"]}
        for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
            probe = container.get(probe_name, {})
            for handler in ("httpGet", "tcpSocket"):
                if handler in probe and isinstance(probe[handler]["port"], str):
                    assert probe[handler]["port"] in port_names


@pytest.mark.parametrize(
    ("deployment", "container"),
    list(_containers()),
    ids=[f"{d['metadata']['name']}/{c['name']}" for d, c in _containers()],
)
def test_images_are_built_by_start_sh_or_pinned_upstream(
    deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    image = container["image"]
    if image in EXTERNAL_IMAGES:
        assert container["imagePullPolicy"] == "IfNotPresent"
        return
    built = _built_images()
    assert image in built, f"{image!r} is not built by start.sh (it builds {sorted(built)})"
    assert (ROOT / built[image]).is_file()
    # Built inside Minikube's Docker daemon: never pulled (OPENAGENT_K8S_AGENT_IMAGE_PULL_POLICY).
    assert (
        container["imagePullPolicy"] == Settings.model_fields["openagent_k8s_agent_image_pull_policy"].default
    )


def test_start_sh_builds_the_sandbox_images() -> None:
    built = _built_images()
    agent_image = Settings.model_fields["openagent_k8s_agent_image"].default
    pool_image = Settings.model_fields["openagent_k8s_pool_runner_image"].default
    assert agent_image == "openagent/agent-runtime:latest"
    assert pool_image == "openagent/agent-pool-runner:latest"
    assert built[agent_image] == "deploy/docker/agent-runtime.Dockerfile"
    assert built[pool_image] == "deploy/docker/agent-pool-runner.Dockerfile"


@pytest.mark.parametrize("service", _objects("Service"), ids=lambda s: s["metadata"]["name"])
def test_service_selects_a_deployment_port(service: dict[str, Any]) -> None:
    selector = service["spec"]["selector"]
    targets = [
        d
        for d in _objects("Deployment")
        if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert len(targets) == 1, f"Service {service['metadata']['name']} selects {len(targets)} Deployments"
    container_ports = {
        key: port["containerPort"]
        for container in targets[0]["spec"]["template"]["spec"]["containers"]
        for port in container.get("ports", [])
        for key in (port["name"], port["containerPort"])
    }
    for port in service["spec"]["ports"]:
        assert port.get("targetPort", port["port"]) in container_ports


def _service_address(name: str) -> tuple[str, int]:
    service = _one("Service", name)
    return name, service["spec"]["ports"][0]["port"]


def test_references_to_secrets_and_configmaps_resolve() -> None:
    secret_keys = _secret_keys()
    assert secret_keys == {"OPENAI_API_KEY", "OPENAGENT_API_KEY", "REDIS_PASSWORD"}
    secret_name = re.search(r"create secret generic (\S+)", START_SH.read_text())
    assert secret_name is not None
    config_maps = {cm["metadata"]["name"]: cm["data"] for cm in _objects("ConfigMap")}
    for deployment, container in _containers():
        where = f"{deployment['metadata']['name']}/{container['name']}"
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                assert source["configMapRef"]["name"] in config_maps, where
            if "secretRef" in source:
                assert source["secretRef"]["name"] == secret_name.group(1), where
        for var in container.get("env", []):
            ref = var.get("valueFrom", {})
            if "secretKeyRef" in ref:
                assert ref["secretKeyRef"]["name"] == secret_name.group(1), where
                assert ref["secretKeyRef"]["key"] in secret_keys, where
            if "configMapKeyRef" in ref:
                assert ref["configMapKeyRef"]["key"] in config_maps[ref["configMapKeyRef"]["name"]], where


def test_config_map_names_only_master_settings() -> None:
    """A misspelt variable would be ignored silently by the master (extra="ignore")."""
    data = _one("ConfigMap", "openagent-config")["data"]
    unknown = {key for key in data if key.lower() not in Settings.model_fields}
    assert not unknown
    Settings.model_validate({key.lower(): value for key, value in data.items()})


def test_urls_point_at_the_services() -> None:
    config = _one("ConfigMap", "openagent-config")["data"]
    master_env = _env(_one("Deployment", "openagent-master")["spec"]["template"]["spec"]["containers"][0])
    redis = urlsplit(master_env["REDIS_URL"]["value"])
    assert (redis.scheme, redis.hostname, redis.port) == ("redis", *_service_address("redis"))
    master_host, master_port = _service_address("openagent-master")
    for url in (config["MASTER_BASE_URL"], config["OPENAGENT_K8S_MASTER_WS"]):
        parts = urlsplit(url)
        assert (parts.hostname, parts.port) == (master_host, master_port), url
    assert config["OPENAGENT_K8S_MASTER_WS"].endswith("/ws")
    assert config["OPENAGENT_K8S_NAMESPACE"] == NAMESPACE
    assert config["OPENAGENT_K8S_SANDBOX"] == "1"  # on in the cluster, off by default elsewhere

    agent = _one("Deployment", "weather-agent")["spec"]["template"]["spec"]["containers"][0]
    env = {var["name"]: var for var in agent["env"]}
    assert env["MASTER_WS"]["value"] == f"ws://{master_host}:{master_port}/ws"
    assert env["OPENAGENT_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "OPENAGENT_API_KEY"


def test_master_probes_liveness_and_readiness_and_gets_both_secrets() -> None:
    """Liveness is /health (the process serves); readiness is /ready (Redis answers too)."""
    container = _one("Deployment", "openagent-master")["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    secret_env = {var["name"] for var in container["env"] if "secretKeyRef" in var.get("valueFrom", {})}
    assert secret_env == {"OPENAI_API_KEY", "OPENAGENT_API_KEY", "REDIS_PASSWORD"}


def test_master_runs_two_replicas_in_cluster_mode() -> None:
    """Two masters on one Redis share their agents (OPENAGENT_CLUSTER=1, docs/scale-out.md), and a
    rollout starts a new master before it stops an old one."""
    deployment = _one("Deployment", "openagent-master")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    values = {var["name"]: var["value"] for var in container["env"] if "value" in var}
    assert values["OPENAGENT_CLUSTER"] == "1"
    unknown = {name for name in values if name.lower() not in Settings.model_fields}
    assert not unknown
    assert Settings.model_validate({name.lower(): value for name, value in values.items()}).openagent_cluster


def test_master_pods_get_the_time_to_drain() -> None:
    """SIGTERM drains (master/gateway/drain.py): the grace period covers the preStop pause, the drain
    deadline, the answer grace and uvicorn's HTTP grace, so Kubernetes never kills a drain."""
    pod = _one("Deployment", "openagent-master")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    values = {var["name"]: var["value"] for var in container["env"] if "value" in var}
    drain = float(
        values.get("OPENAGENT_DRAIN_SECONDS", Settings.model_fields["openagent_drain_seconds"].default)
    )
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = float(pre_stop[1]) + drain + 2 * ANSWER_GRACE_SECONDS
    assert pod["terminationGracePeriodSeconds"] > needed
    # /health answers while the master drains: liveness must not kill it meanwhile.
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"


def test_a_disruption_budget_keeps_one_master_up() -> None:
    deployment = _one("Deployment", "openagent-master")
    budgets = [
        b
        for b in _objects("PodDisruptionBudget")
        if _selector_matches(b["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    ]
    assert len(budgets) == 1
    spec = budgets[0]["spec"]
    assert spec["minAvailable"] == 1 and "maxUnavailable" not in spec
    assert spec["minAvailable"] < deployment["spec"]["replicas"]  # a node drain can still proceed
    # The budget covers no other workload.
    for other in _objects("Deployment"):
        if other is not deployment:
            assert not _selector_matches(spec["selector"], other["spec"]["template"]["metadata"]["labels"])


def test_weather_agent_runs_the_sample_module() -> None:
    container = _one("Deployment", "weather-agent")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "openagent/agent-runtime:latest"
    assert container["args"] == ["sample_agents.action_weather"]
    assert "command" not in container  # the image's entrypoint is `python -m`
    assert (ROOT / "sample_agents" / "action_weather.py").is_file()


def test_master_service_account_may_manage_agent_workloads() -> None:
    pod = _one("Deployment", "openagent-master")["spec"]["template"]["spec"]
    account = _one("ServiceAccount", pod["serviceAccountName"])
    bindings = [
        b
        for b in _objects("RoleBinding")
        if {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
        in b["subjects"]
    ]
    assert len(bindings) == 1
    role_ref = bindings[0]["roleRef"]
    assert role_ref["kind"] == "Role"
    rules = _one("Role", role_ref["name"])["rules"]
    granted = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for group, resource, verbs in [
        ("", "pods", ("get", "list", "watch", "create", "delete")),
        ("", "pods/log", ("get",)),
        ("", "configmaps", ("get", "list", "create", "delete")),
        ("", "secrets", ("list", "create", "delete")),  # each agent Pod's own key
        ("apps", "deployments", ("get", "list", "watch", "create", "delete")),
    ]:
        for verb in verbs:
            assert (group, resource, verb) in granted, (group, resource, verb)
    # Secrets: only making, listing (to tear down by label) and removing agents' own.
    assert not {verb for group, resource, verb in granted if resource == "secrets"} & {"get", "watch"}
    # Nothing outside the namespace, and no wildcards.
    assert not _objects("ClusterRole") and not _objects("ClusterRoleBinding")
    assert all("*" not in values for rule in rules for values in rule.values())


def test_other_pods_get_no_api_token() -> None:
    for deployment in _objects("Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        if "serviceAccountName" not in pod:
            assert pod["automountServiceAccountToken"] is False, deployment["metadata"]["name"]


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions with In / NotIn / Exists) against labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
    return True


def test_pool_pods_carry_the_pool_label_selector_and_serve_the_runner_port() -> None:
    pool = _one("Deployment", "agent-pool")
    labels = pool["spec"]["template"]["metadata"]["labels"]
    key, _, value = Settings.model_fields["openagent_k8s_pool_label_selector"].default.partition("=")
    assert labels[key] == value
    pod = pool["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == Settings.model_fields["openagent_k8s_pool_runner_image"].default
    port = Settings.model_fields["openagent_k8s_pool_runner_port"].default
    assert [p["containerPort"] for p in container["ports"]] == [port]
    env = {var["name"]: var for var in container["env"]}
    assert env["MASTER_WS"]["value"] == "ws://openagent-master:8000/ws"
    # The runner's token is the master's key: the master authenticates with it. It is not
    # OPENAGENT_API_KEY, which a runner would hand to its agents: each gets its own from the master.
    assert env["POOL_RUNNER_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "OPENAGENT_API_KEY"
    assert "OPENAGENT_API_KEY" not in env
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    # Only the master's Pods carry the pool label: the sandbox must not pick another workload.
    others = [
        d["metadata"]["name"]
        for d in _objects("Deployment")
        if d is not pool and d["spec"]["template"]["metadata"]["labels"].get(key) == value
    ]
    assert not others


def test_network_policy_lets_agents_reach_only_the_master_and_dns() -> None:
    egress_policies = [p for p in _objects("NetworkPolicy") if "Egress" in p["spec"]["policyTypes"]]
    assert len(egress_policies) == 1
    policy = egress_policies[0]["spec"]
    pool_labels = _one("Deployment", "agent-pool")["spec"]["template"]["metadata"]["labels"]
    sandbox_pod_labels = {"openagent.io/role": "agent"}  # master/sandbox/specs.py (tested there too)
    for labels in (pool_labels, sandbox_pod_labels):
        assert _selector_matches(policy["podSelector"], labels), labels
    for deployment in ("openagent-master", "redis", "weather-agent"):
        labels = _one("Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
        assert not _selector_matches(policy["podSelector"], labels), deployment

    assert policy["ingress"] == []
    master_labels = _one("Deployment", "openagent-master")["spec"]["template"]["metadata"]["labels"]
    master_port = _one("Service", "openagent-master")["spec"]["ports"][0]["port"]
    to_master, to_dns = policy["egress"]
    assert [peer.keys() for peer in to_master["to"]] == [{"podSelector": None}.keys()]
    assert _selector_matches(to_master["to"][0]["podSelector"], master_labels)
    assert to_master["ports"] == [{"protocol": "TCP", "port": master_port}]
    assert to_dns["to"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "kube-system"
    }
    assert {(p["protocol"], p["port"]) for p in to_dns["ports"]} == {("UDP", 53), ("TCP", 53)}


def test_only_the_master_may_call_the_pool_runners() -> None:
    ingress = [p for p in _objects("NetworkPolicy") if p["spec"].get("ingress")]
    assert len(ingress) == 1
    spec = ingress[0]["spec"]
    pool_labels = _one("Deployment", "agent-pool")["spec"]["template"]["metadata"]["labels"]
    assert _selector_matches(spec["podSelector"], pool_labels)
    assert not _selector_matches(spec["podSelector"], {"openagent.io/role": "agent"})
    master_labels = _one("Deployment", "openagent-master")["spec"]["template"]["metadata"]["labels"]
    (rule,) = spec["ingress"]
    assert [peer.keys() for peer in rule["from"]] == [{"podSelector": None}.keys()]
    assert _selector_matches(rule["from"][0]["podSelector"], master_labels)
    assert rule["ports"] == [
        {"protocol": "TCP", "port": Settings.model_fields["openagent_k8s_pool_runner_port"].default}
    ]


def test_redis_keeps_its_data_on_a_persistent_volume_with_aof() -> None:
    """Nothing is lost when Redis restarts: append-only persistence into a PersistentVolumeClaim."""
    deployment = _one("Deployment", "redis")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    command = [*container.get("command", []), *container.get("args", [])]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--dir") + 1] == "/data"
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/data")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    claim = _one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert (
        claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        and claim["spec"]["resources"]["requests"]["storage"]
    )
    assert deployment["spec"]["strategy"]["type"] == "Recreate"  # one Pod at a time on a RWO volume


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {var["name"]: var for var in container.get("env", [])}


def _from_secret(var: dict[str, Any], key: str) -> bool:
    ref = var.get("valueFrom", {}).get("secretKeyRef", {})
    return bool(ref.get("key") == key and ref.get("name") == "openagent-secrets" and not ref.get("optional"))


def _redis_containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(d, c) for d, c in _containers() if c["image"].split(":")[0] == "redis"]


def test_every_redis_requires_a_password_from_the_secret() -> None:
    """Agent code that reaches a Redis port cannot use it: every Redis runs with
    ``--requirepass $(VAR)`` where VAR comes from the Secret, and its probes authenticate."""
    redis_containers = _redis_containers()
    assert redis_containers, "no Redis container in deploy/k8s"
    for deployment, container in redis_containers:
        where = f"{deployment['metadata']['name']}/{container['name']}"
        command = [*container.get("command", []), *container.get("args", [])]
        assert "--requirepass" in command, where
        reference = command[command.index("--requirepass") + 1]
        match = re.fullmatch(r"\$\(([A-Z_][A-Z0-9_]*)\)", reference)
        assert match, f"{where}: --requirepass {reference!r} is not a variable reference"
        env = _env(container)
        assert _from_secret(env[match.group(1)], "REDIS_PASSWORD"), where
        # redis-cli in the probes reads the password from REDISCLI_AUTH.
        assert _from_secret(env["REDISCLI_AUTH"], "REDIS_PASSWORD"), where


def test_the_master_reaches_redis_with_the_password_of_the_secret() -> None:
    container = _one("Deployment", "openagent-master")["spec"]["template"]["spec"]["containers"][0]
    names = [var["name"] for var in container["env"]]
    env = _env(container)
    url = urlsplit(env["REDIS_URL"]["value"])
    match = re.fullmatch(r"\$\(([A-Z_][A-Z0-9_]*)\)", url.password or "")
    assert match, f"REDIS_URL {env['REDIS_URL']['value']!r} takes no password from a variable"
    assert _from_secret(env[match.group(1)], "REDIS_PASSWORD")
    # Kubernetes expands $(VAR) only from variables listed before.
    assert names.index(match.group(1)) < names.index("REDIS_URL")
    # envFrom (the ConfigMap) must not bring a REDIS_URL without the password.
    assert "REDIS_URL" not in _one("ConfigMap", "openagent-config")["data"]


def test_start_sh_puts_a_generated_redis_password_into_the_secret() -> None:
    text = START_SH.read_text()
    assert re.search(r"--from-file=REDIS_PASSWORD=<\(printf '%s' \"\$\{K8S_REDIS_PASSWORD", text)
    assert "K8S_REDIS_PASSWORD=$(head -c 32 /dev/urandom" in text


_SECRET_VALUE = re.compile(
    r"(requirepass|password|passwd|secret|token|api[_-]?key)\b[\"']?\s*[:=]?\s*[\"']?([^\s\"'$(),]{8,})",
    re.IGNORECASE,
)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_no_manifest_holds_a_literal_password(path: Path) -> None:
    """Secrets come from the Secret (valueFrom, $(VAR)); no value in a manifest looks like one."""
    for obj in _load(path):
        assert obj["kind"] != "Secret", f"{path.name} defines a Secret: ./start.sh makes it from .env"
        for _, container in _containers_of(obj):
            for var in container.get("env", []):
                if re.search(r"PASSWORD|SECRET|TOKEN|_KEY$|AUTH", var["name"]):
                    assert "value" not in var, f"{path.name}: {var['name']} has a literal value"
                url = urlsplit(var.get("value", "")) if "://" in var.get("value", "") else None
                if url is not None and url.password:
                    assert re.fullmatch(r"\$\([A-Z_][A-Z0-9_]*\)", url.password), var["name"]
            command = [*container.get("command", []), *container.get("args", [])]
            for flag, value in zip(command, command[1:], strict=False):
                if flag in ("--requirepass", "--masterauth", "-a"):
                    assert re.fullmatch(r"\$\([A-Z_][A-Z0-9_]*\)", value), f"{path.name}: {flag} {value!r}"
    for line in path.read_text().splitlines():
        code = line.split("#", 1)[0]
        found = _SECRET_VALUE.search(code)
        assert found is None or found.group(2).startswith(("secretKeyRef", "openagent-secrets")), (
            f"{path.name}: {line.strip()!r} looks like a literal secret"
        )


def _containers_of(obj: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    if obj["kind"] != "Deployment":
        return []
    return [(obj, c) for c in obj["spec"]["template"]["spec"]["containers"]]


def test_the_literal_password_check_is_not_vacuous(tmp_path: Path) -> None:
    """A Redis with ``--requirepass hunter2hunter2`` or a REDIS_URL with a password fails it."""
    redis = (K8S_DIR / "redis.yaml").read_text().replace("$(REDIS_PASSWORD)", "hunter2hunter2")
    broken = tmp_path / "redis.yaml"
    broken.write_text(redis)
    with pytest.raises(AssertionError, match="hunter2hunter2"):
        test_no_manifest_holds_a_literal_password(broken)
