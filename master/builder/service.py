"""The builder's long-lived objects, built once in the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from master.access.keys import KeyStore
from master.agents.catalog import ToolCatalog
from master.agents.directory import AgentDirectory
from master.builder.credentials import AgentKeys
from master.builder.discovery import AgentDiscovery
from master.builder.files import AgentFiles
from master.builder.generator import AgentGenerator
from master.builder.workspaces import Workspaces
from master.builder.yaml_records import YamlAgentRecords
from master.llm.model import ChatModel
from master.settings import Settings


def _records(settings: Settings, agents: AgentDirectory) -> YamlAgentRecords | None:
    """Where this master keeps the YAML agents it started, for its restart: under its
    ``OPENAGENT_MASTER_ID``, or ``local`` for a master alone; nowhere for a master of a cluster
    without a fixed id (it could not tell its own agents from another master's), nor with
    ``OPENAGENT_YAML_AGENTS_RESTART=0``."""
    if not settings.openagent_yaml_agents_restart:
        return None
    if settings.openagent_master_id:
        return YamlAgentRecords(agents.invocation.redis, settings.openagent_master_id)
    if settings.openagent_cluster:
        return None
    return YamlAgentRecords(agents.invocation.redis, "local")


@dataclass
class AgentBuilder:
    """Files, discovery, the generator (``None`` without an LLM) and workspaces."""

    files: AgentFiles
    discovery: AgentDiscovery
    generator: AgentGenerator | None
    workspaces: Workspaces
    unavailable_reason: str = ""
    """Why there is no generator."""

    @classmethod
    def build(
        cls,
        settings: Settings,
        agents: AgentDirectory,
        llm: ChatModel | None,
        unavailable_reason: str,
        catalog: ToolCatalog | None = None,
        keys: KeyStore | None = None,
    ) -> AgentBuilder:
        root = settings.openagent_agents_root
        return cls(
            files=AgentFiles(root),
            discovery=AgentDiscovery(root),
            generator=AgentGenerator(llm) if llm is not None else None,
            workspaces=Workspaces(
                settings,
                agents,
                root,
                catalog,
                AgentKeys(keys) if keys is not None else None,
                _records(settings, agents),
            ),
            unavailable_reason=unavailable_reason,
        )

    async def aclose(self) -> None:
        await self.workspaces.aclose()
