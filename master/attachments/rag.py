"""What one query tells the model about its files, and how its RAG tool calls are sent.

The model sees filenames and refs only, never file content (spec). When the RAG
agents are linked (an agent offering ``search_knowledge`` / ``index_document``, or
``extract_document``), the system prompt lists the session's files and says which
tools read them; every call to a RAG tool gets the :class:`~protocol.rag.RagCallContext`
(session, TTL, blob token, the file list) and the RAG timeouts
(``RAG_TOOL_CALL_TIMEOUT``, ``RAG_TOOL_HTTP_TIMEOUT``) instead of the general ones.

Without them, a query that attaches files is still answered: the answer starts with a
notice naming the files and the agents to start, and the model is told the files
cannot be read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from master.agents.calls import CallOptions, ToolRun
from master.agents.dispatch import Target
from master.agents.toolbox import Toolbox
from master.attachments.files import NewFile
from master.attachments.store import AttachmentStore, StoredAttachment
from master.auth import Scope
from protocol.rag import (
    EXTRACT_TOOL,
    EXTRACTOR_AGENT_ID,
    INDEX_TOOL,
    INDEXER_AGENT_ID,
    RAG_CONTEXT_ARGUMENT,
    RAG_TOOLS,
    SEARCH_TOOL,
    AttachmentInfo,
    RagCallContext,
)

START_COMMAND = "PYTHONPATH=. python -m system_agents.rag_stack_ws"


@dataclass
class RagQuery:
    """The files and RAG agents of one query."""

    session_id: str
    attachments: list[StoredAttachment]
    new_refs: set[str]
    extractor: str | None
    indexer: str | None
    token: str | None
    ttl_seconds: int
    call_timeout: float
    http_timeout: float
    _context: dict[str, Any] = field(default_factory=dict)

    @property
    def linked(self) -> bool:
        return self.extractor is not None or self.indexer is not None

    def system_note(self) -> str:
        """The lines added to the system prompt (empty when the session has no files)."""
        if not self.attachments:
            return ""
        lines = ["Files attached in this conversation (refs only; their content is not in this prompt):"]
        for item in self.attachments:
            new = " [attached with this message]" if item.ref in self.new_refs else ""
            lines.append(f"- {item.filename} (ref {item.ref}, {item.mime_type}, {item.size} bytes){new}")
        if self.indexer is not None:
            lines.append(
                f"To answer from these files call {SEARCH_TOOL} (agent {self.indexer}) with what to look for; "
                f"it indexes files not indexed yet. {INDEX_TOOL}(ref) indexes one file"
                + (
                    f"; {EXTRACT_TOOL}(ref) (agent {self.extractor}) returns a file's text."
                    if self.extractor
                    else "."
                )
                + " Name the file, and the page or section, each fact comes from. If a tool reports a file "
                "that cannot be read, say which file and why."
            )
        elif self.extractor is not None:
            lines.append(
                f"To read a file call {EXTRACT_TOOL}(ref) (agent {self.extractor}). Name the file, and the page "
                "or section, each fact comes from. If a file cannot be read, say which and why."
            )
        else:
            lines.append(
                "These files cannot be read: no RAG agents are linked. Say so, and tell the user to start "
                f"{EXTRACTOR_AGENT_ID} and {INDEXER_AGENT_ID} ({START_COMMAND}) and link them."
            )
        return "\n".join(lines)

    def notice(self) -> str | None:
        """The answer's first paragraph when files were attached but nothing can read them."""
        if self.linked or not self.new_refs:
            return None
        names = ", ".join(item.filename for item in self.attachments if item.ref in self.new_refs)
        return (
            f"The attached file(s) {names} cannot be read: no RAG agents are linked to the orchestrator. "
            f"Start {EXTRACTOR_AGENT_ID} and {INDEXER_AGENT_ID} (`{START_COMMAND}`), link them, and ask again."
        )

    def call_options(self, agent: Target, tool_name: str, arguments: dict[str, Any]) -> CallOptions | None:
        """Context and timeouts for a call to a RAG tool of a linked RAG agent; ``None`` otherwise."""
        if tool_name not in RAG_TOOLS or agent.agent_id not in (self.extractor, self.indexer):
            return None
        if not self._context:
            context = RagCallContext(
                session_id=self.session_id,
                ttl_seconds=self.ttl_seconds,
                blob_token=self.token,
                attachments=[
                    AttachmentInfo(
                        ref=item.ref, filename=item.filename, mime_type=item.mime_type, size=item.size
                    )
                    for item in self.attachments
                ],
            )
            self._context = context.model_dump()
        return CallOptions(
            arguments={**arguments, RAG_CONTEXT_ARGUMENT: self._context},
            wait_seconds=self.call_timeout,
            invoke_seconds=self.http_timeout,
        )

    def index_states(self, runs: list[ToolRun]) -> dict[str, dict[str, Any]]:
        """What the indexer reported per ref during the run, for ``session-rag-context``."""
        states: dict[str, dict[str, Any]] = {}
        known = {item.ref for item in self.attachments}
        now = round(time.time(), 3)
        for run in runs:
            if run.agent_id != self.indexer or run.tool_name not in (INDEX_TOOL, SEARCH_TOOL):
                continue
            result = run.result if isinstance(run.result, dict) else {}
            if run.tool_name == INDEX_TOOL:
                ref = run.arguments.get("ref") if isinstance(run.arguments, dict) else None
                if run.success and result.get("ref") in known:
                    states[str(result["ref"])] = _state(result, now)
                elif not run.success and ref in known:
                    states[str(ref)] = {"status": "failed", "error": run.error, "at": now}
            for item in result.get("indexed_now") or []:
                if isinstance(item, dict) and item.get("ref") in known:
                    states[str(item["ref"])] = _state(item, now)
            for item in result.get("unreadable") or []:
                if isinstance(item, dict) and item.get("ref") in known:
                    states[str(item["ref"])] = {"status": "failed", "error": item.get("error"), "at": now}
        return states


def _state(result: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        "status": "indexed",
        "chunks": result.get("chunks"),
        "embedding_model": result.get("embedding_model"),
        "collection": result.get("collection"),
        "indexed_at": now,
    }


def rag_agents(toolbox: Toolbox) -> tuple[str | None, str | None]:
    """The (extractor, indexer) agent ids among the query's tools, by the tools they offer."""
    extractor = indexer = None
    for agent, tool in toolbox.entries():
        if tool.schema.name == EXTRACT_TOOL and extractor is None:
            extractor = agent.agent_id
        elif tool.schema.name == SEARCH_TOOL and indexer is None:
            indexer = agent.agent_id
    return extractor, indexer


class RagLink:
    """Builds each query's :class:`RagQuery` and records what the indexer reported."""

    def __init__(self, store: AttachmentStore, *, call_timeout: float, http_timeout: float) -> None:
        self.store = store
        self._call_timeout = call_timeout
        self._http_timeout = http_timeout

    async def prepare(
        self,
        session_id: str,
        toolbox: Toolbox,
        new_files: list[NewFile],
        scope: Scope,
        *,
        owner: str,
        seconds: float,
    ) -> RagQuery | None:
        """Store the query's files (``owner``'s: the session's tenant) and describe the session's
        files that ``scope`` (the asker's) sees; ``None`` when it has none."""
        if new_files:
            await self.store.save(session_id, new_files, owner=owner)
        attachments = await self.store.files(session_id, scope)
        if not attachments:
            return None
        if not new_files:
            await self.store.touch(session_id, attachments)
        extractor, indexer = rag_agents(toolbox)
        token = None
        if extractor is not None or indexer is not None:
            token = await self.store.issue_token(session_id, int(seconds + self._call_timeout) + 1)
        return RagQuery(
            session_id=session_id,
            attachments=attachments,
            new_refs={file.ref for file in new_files},
            extractor=extractor,
            indexer=indexer,
            token=token,
            ttl_seconds=self.store.ttl_seconds,
            call_timeout=self._call_timeout,
            http_timeout=self._http_timeout,
        )

    async def finish(self, query: RagQuery, runs: list[ToolRun]) -> None:
        """Revoke the query's token and record the indexing state the run reported."""
        if query.token is not None:
            await self.store.revoke(query.token)
        await self.store.record_index(query.session_id, query.index_states(runs))
