"""The contract between the master and the RAG system agents (extractor and indexer).

The RAG agents are ordinary action agents. Two things make them special, and both
sides agree on them here:

- **The call context.** When the master dispatches a call to a RAG tool it adds the
  argument :data:`RAG_CONTEXT_ARGUMENT`, a :class:`RagCallContext`, after the model's
  arguments were validated. It tells the agent which session the call is for (the
  model cannot choose it, so one session never reads another's files), the session's
  TTL, and a short-lived token for fetching the session's attachment blobs.
- **The blob endpoint.** ``GET {master}/attachments/{ref}`` with the header
  :data:`CALL_TOKEN_HEADER` returns the raw bytes of one attachment of the token's
  session; ``Content-Type`` is the declared MIME type and :data:`FILENAME_HEADER`
  the sanitized filename, percent-encoded (UTF-8).

Tool names and agent ids are fixed so that the master recognises the agents.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

EXTRACTOR_AGENT_ID = "document-extractor-agent"
"""Default agent id of the extractor (``python -m system_agents.document_extractor_agent``)."""
INDEXER_AGENT_ID = "document-indexer-agent"
"""Default agent id of the indexer (``python -m system_agents.document_indexer_agent``)."""

EXTRACT_TOOL = "extract_document"
"""Extractor tool: ``extract_document(ref)`` → chunks with filename, position and text."""
INDEX_TOOL = "index_document"
"""Indexer tool: ``index_document(ref | chunks, collection?)`` → how many chunks were stored."""
SEARCH_TOOL = "search_knowledge"
"""Indexer tool: ``search_knowledge(query, top_k?, filters?)`` → the best passages."""
RAG_TOOLS = frozenset({EXTRACT_TOOL, INDEX_TOOL, SEARCH_TOOL})

RAG_CONTEXT_ARGUMENT = "_openagent_rag"
"""Name of the argument the master adds to every RAG tool call (a :class:`RagCallContext`)."""
CALL_TOKEN_HEADER = "X-OpenAgent-Call-Token"
"""Header carrying :attr:`RagCallContext.blob_token` on ``GET /attachments/{ref}``."""
FILENAME_HEADER = "X-OpenAgent-Filename"
"""Response header of ``GET /attachments/{ref}``: the sanitized filename, percent-encoded."""

REF_PATTERN = r"^att_[0-9a-f]{24}$"
"""An attachment ref: ``att_`` and the first 24 hex digits of the content's SHA-256."""
REF_RE = re.compile(REF_PATTERN)
COLLECTION_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
"""A collection name (letters, digits, ``_ . -``)."""

AttachmentRef = Annotated[str, StringConstraints(pattern=REF_PATTERN)]
CollectionName = Annotated[str, StringConstraints(pattern=COLLECTION_PATTERN)]


def ref_for_digest(sha256_hex: str) -> str:
    """The attachment ref of content whose SHA-256 is ``sha256_hex``."""
    return f"att_{sha256_hex[:24]}"


class AttachmentInfo(BaseModel):
    """One file attached in the session, as the master lists it for the RAG agents."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    ref: str
    filename: str
    mime_type: str = "application/octet-stream"
    size: int = 0


class RagCallContext(BaseModel):
    """What the master tells a RAG agent about the call it dispatches."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    session_id: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    """The query's session: the scope of the indexed chunks and of the blobs."""
    ttl_seconds: int = Field(gt=0)
    """The session's TTL; indexed chunks expire with it."""
    blob_token: str | None = None
    """Token for ``GET /attachments/{ref}`` (header :data:`CALL_TOKEN_HEADER`), valid while
    the call runs; ``None`` when the session has no attachments."""
    attachments: list[AttachmentInfo] = Field(default_factory=list)
    """The session's attachments, oldest first: ``search_knowledge`` indexes any of them
    not indexed yet before searching, so a follow-up can search files attached earlier."""


class Chunk(BaseModel):
    """A piece of a document, as ``extract_document`` returns it and ``index_document`` takes it."""

    model_config = ConfigDict(extra="ignore")

    filename: str
    """The file's (sanitized) name."""
    ref: str | None = None
    """The attachment ref, when the chunk comes from one."""
    position: str
    """Where in the file: ``page 3``, ``pages 3-4``, ``section: Intro``, ``rows 2-41``..."""
    index: int = Field(ge=0)
    """Order of the chunk in its document."""
    text: str
