"""master/sandbox/specs.py and code.py: the generated objects are valid, restricted and tied to their agent."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from master.errors import SandboxRejected
from master.sandbox import specs
from master.sandbox.code import AgentCode, resolve_code
from master.settings import Settings
from tests.factories import ROOT

VERSIONS = ["1.28.0", kubernetes_validate.latest_version()]
CODE = AgentCode("print('hi')\n")


def _pod(settings: Settings, agent_id: str = "weather-agent", code: AgentCode = CODE) -> dict:  # type: ignore[type-arg]
    return specs.pod(
        settings, name=specs.pod_name(agent_id), agent_id=agent_id, code=code, master_ws="ws://m/ws", env={}
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("agent_id", ["weather-agent", specs.INDEXER_AGENT_ID])
def test_pod_and_config_map_are_valid_kubernetes(version: str, agent_id: str) -> None:
    pod = _pod(Settings(openagent_k8s_runtime_class="gvisor"), agent_id)
    kubernetes_validate.validate(pod, version, strict=True)
    config_map = specs.config_map(pod["metadata"]["name"], agent_id, CODE, "agents")
    kubernetes_validate.validate(config_map, version, strict=True)


@pytest.mark.parametrize("agent_id", ["weather-agent", specs.INDEXER_AGENT_ID])
def test_every_container_meets_the_restricted_pod_security_profile(agent_id: str) -> None:
    pod = _pod(Settings(), agent_id)["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert "runtimeClassName" not in pod  # only when the setting asks for one
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] > 0
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
        assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert all("hostPath" not in volume for volume in pod["volumes"])


def test_agent_pods_are_selected_by_the_network_policy() -> None:
    labels = specs.labels("any agent")
    policy = next(
        doc
        for doc in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "network-policy.yaml").read_text())
        if doc["metadata"]["name"] == "agent-egress"
    )
    (expression,) = policy["spec"]["podSelector"]["matchExpressions"]
    assert labels[expression["key"]] in expression["values"]


def test_agent_keys_are_label_safe_distinct_and_stable() -> None:
    keys = {
        specs.agent_key(agent_id)
        for agent_id in ("Weather Agent!", "weather-agent", "weather_agent", "é" * 200)
    }
    assert len(keys) == 4
    for key in keys:
        assert len(key) <= 49 and key[0].isalnum() and key[-1].isalnum()
        assert all(c.isalnum() or c == "-" for c in key) and key == key.lower()
    assert specs.agent_key("weather-agent") == specs.agent_key("weather-agent")
    name = specs.pod_name("weather-agent")
    assert (
        name.startswith("oa-weather-agent-") and len(name) <= 63 and name != specs.pod_name("weather-agent")
    )


def test_module_code_comes_from_agents_or_system_agents_only(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "bot.py").write_text("print('bot')\n")
    code = resolve_code(tmp_path, module="agents.bot", source=None)
    assert (code.source, code.module, code.origin) == ("print('bot')\n", "agents.bot", "module:agents.bot")
    assert resolve_code(tmp_path, module=None, source="x = 1").origin == "source"
    for module, reason in [
        ("agents.missing", "unknown_module"),
        ("os.path", "invalid_request"),
        ("agents", "invalid_request"),
        ("agents..bot", "invalid_request"),
        ("agents.bot-x", "invalid_request"),
    ]:
        with pytest.raises(SandboxRejected) as raised:
            resolve_code(tmp_path, module=module, source=None)
        assert raised.value.code == reason, module
    with pytest.raises(SandboxRejected, match="larger than"):
        resolve_code(tmp_path, module=None, source="#" * (600 * 1024))


def test_the_indexer_never_gets_the_masters_redis_url() -> None:
    """Without the sidecar and OPENAGENT_K8S_INDEXER_REDIS_URL, no REDIS_URL: the master's own
    holds the password of its Redis, which agent code must not have."""
    settings = Settings(
        redis_url="redis://:master-redis-password@redis:6379", openagent_k8s_indexer_redis_sidecar=False
    )
    pod = _pod(settings, specs.INDEXER_AGENT_ID)
    env = {var["name"] for var in pod["spec"]["containers"][0]["env"]}
    assert "REDIS_URL" not in env
    assert "master-redis-password" not in yaml.safe_dump(pod)


def test_the_pod_reads_its_key_from_its_own_secret() -> None:
    """The agent's key is the Secret of its own name (made with the Pod), never the master's
    Secret, and the Secret object carries the agent's labels (torn down with it)."""
    pod = _pod(Settings())
    name = pod["metadata"]["name"]
    (key,) = [var for var in pod["spec"]["containers"][0]["env"] if var["name"] == "OPENAGENT_API_KEY"]
    assert key == {
        "name": "OPENAGENT_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": name, "key": "OPENAGENT_API_KEY"}},
    }
    secret = specs.secret(name, "weather-agent", "oa_agent_secret", "agents")
    assert secret["stringData"] == {"OPENAGENT_API_KEY": "oa_agent_secret"}
    assert secret["metadata"]["labels"] == pod["metadata"]["labels"]
    for version in VERSIONS:
        kubernetes_validate.validate(secret, version, strict=True)
