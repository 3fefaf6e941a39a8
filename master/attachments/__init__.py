"""Files attached to queries, and the RAG system agents that read them.

- :mod:`~master.attachments.files`: decoding and checking what a query attaches (limits,
  base64, declared type against content) and display-safe filenames;
- :mod:`~master.attachments.store`: content-addressed blobs in Redis under the session,
  per-query tokens for the RAG agents to fetch them, and the indexing state per file;
- :mod:`~master.attachments.rag`: what one query tells the model about its files, and how
  RAG tool calls are sent (call context, RAG timeouts).
"""

from master.attachments.files import NewFile, decode_attachments, sanitize_filename
from master.attachments.rag import RagLink, RagQuery
from master.attachments.store import AttachmentStore, StoredAttachment

__all__ = [
    "AttachmentStore",
    "NewFile",
    "RagLink",
    "RagQuery",
    "StoredAttachment",
    "decode_attachments",
    "sanitize_filename",
]
