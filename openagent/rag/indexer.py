"""The indexer: embed chunks into the session's store, and search them.

``index_document`` takes an attachment ref (extracted here with the same code and
cache as the extractor agent) or chunks (what ``extract_document`` returned). A
document's id is its ref, or a hash of its chunks; indexing it again with the same
chunks and embedding model changes nothing, with different chunks replaces them.

``search_knowledge`` first indexes the session's attachments that are not indexed yet
(the master lists them in the call context), so a follow-up question can search files
attached earlier even if the model never indexed them; a file that cannot be read is
named in the result's ``unreadable`` list and the others are searched.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from openagent.errors import DocumentError, ToolError
from openagent.rag.embeddings import Embedder
from openagent.rag.extractor import DocumentExtractor
from openagent.rag.store import DocumentRecord, Hit, SearchFilters, VectorStore, now
from protocol.rag import Chunk, RagCallContext

__all__ = ["DEFAULT_COLLECTION", "DocumentIndexer"]

logger = logging.getLogger("openagent.rag")

DEFAULT_COLLECTION = "default"


class DocumentIndexer:
    """Indexes and searches one session's documents at a time (the session comes from the context)."""

    def __init__(self, *, store: VectorStore, embedder: Embedder, extractor: DocumentExtractor) -> None:
        self.store = store
        self.embedder = embedder
        self.extractor = extractor
        self.embedded_chunks = 0
        self._unreadable: dict[tuple[str, str], dict[str, str]] = {}
        """Chunks embedded since start (re-indexing an unchanged document adds none)."""

    async def index_ref(
        self, context: RagCallContext, ref: str, *, collection: str = DEFAULT_COLLECTION, progress: Any = None
    ) -> dict[str, Any]:
        document = await self.extractor.extract(context, ref, progress=progress)
        result = await self.index_chunks(
            context, document.chunks, doc_id=ref, collection=collection, progress=progress
        )
        return {
            **result,
            "format": document.format,
            "pages": document.pages,
            "warnings": document.warnings,
            "extract_cached": document.cached,
        }

    async def index_chunks(
        self,
        context: RagCallContext,
        chunks: Sequence[Chunk],
        *,
        doc_id: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        progress: Any = None,
    ) -> dict[str, Any]:
        if not chunks:
            raise ToolError("index_document got no chunks to index")
        chunks = [chunk.model_copy(update={"index": index}) for index, chunk in enumerate(chunks)]
        filename = chunks[0].filename
        fingerprint = _fingerprint(chunks)
        doc_id = doc_id or chunks[0].ref or f"doc_{fingerprint[:24]}"
        model = self.embedder.model
        existing = await self.store.document(context.session_id, collection, doc_id)
        summary = {"filename": filename, "ref": chunks[0].ref, "doc_id": doc_id, "collection": collection}
        if existing is not None and existing.fingerprint == fingerprint and existing.model == model:
            return {
                **summary,
                "status": "already_indexed",
                "chunks": existing.chunks,
                "embedding_model": model,
            }
        if progress is not None:
            await progress(f"embedding {len(chunks)} chunks of {filename}", 0.5)
        vectors = await self.embedder.embed([chunk.text for chunk in chunks])
        self.embedded_chunks += len(chunks)
        record = DocumentRecord(
            doc_id=doc_id,
            collection=collection,
            filename=filename,
            ref=chunks[0].ref,
            chunks=len(chunks),
            model=model,
            dimensions=int(vectors.shape[1]),
            fingerprint=fingerprint,
            indexed_at=now(),
        )
        await self.store.put(context.session_id, record, list(chunks), vectors, context.ttl_seconds)
        status = "reindexed" if existing is not None else "indexed"
        return {**summary, "status": status, "chunks": len(chunks), "embedding_model": model}

    async def search(
        self,
        context: RagCallContext,
        query: str,
        *,
        top_k: int = 5,
        filters: SearchFilters | None = None,
        progress: Any = None,
    ) -> dict[str, Any]:
        if not query.strip():
            raise ToolError("search_knowledge needs a non-empty query")
        filters = filters or SearchFilters()
        newly, unreadable = await self._index_pending(context, progress)
        query_vector = (await self.embedder.embed([query]))[0]
        hits = await self.store.search(
            context.session_id,
            query_vector,
            model=self.embedder.model,
            top_k=top_k,
            filters=filters,
            ttl=context.ttl_seconds,
        )
        result: dict[str, Any] = {"query": query, "results": [_hit(hit) for hit in hits]}
        if newly:
            result["indexed_now"] = newly
        if unreadable:
            result["unreadable"] = unreadable
        if not hits:
            documents = await self.store.documents(context.session_id)
            result["note"] = (
                "no passage matched" if documents else "no document is indexed in this session yet"
            )
        return result

    async def _index_pending(
        self, context: RagCallContext, progress: Any
    ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        """Index the session's attachments that are not in the default collection yet."""
        if not context.attachments:
            return [], []
        indexed = {
            record.doc_id
            for record in await self.store.documents(context.session_id)
            if record.model == self.embedder.model
        }
        newly: list[dict[str, Any]] = []
        unreadable: list[dict[str, str]] = []
        for attachment in context.attachments:
            if attachment.ref in indexed:
                continue
            known = self._unreadable.get((context.session_id, attachment.ref))
            if known is not None:  # a file that cannot be read is not fetched again and again
                unreadable.append(known)
                continue
            try:
                done = await self.index_ref(context, attachment.ref, progress=progress)
            except DocumentError as exc:
                failure = {"filename": exc.filename, "ref": attachment.ref, "error": str(exc)}
                if len(self._unreadable) > 10000:
                    self._unreadable.clear()
                self._unreadable[(context.session_id, attachment.ref)] = failure
                unreadable.append(failure)
                continue
            except ToolError as exc:
                unreadable.append({"filename": attachment.filename, "ref": attachment.ref, "error": str(exc)})
                continue
            keys = ("filename", "ref", "chunks", "embedding_model", "collection", "extract_cached")
            newly.append({key: done[key] for key in keys})
        return newly, unreadable


def _fingerprint(chunks: Sequence[Chunk]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(
            chunk.filename.encode() + b"\0" + chunk.position.encode() + b"\0" + chunk.text.encode() + b"\1"
        )
    return digest.hexdigest()


def _hit(hit: Hit) -> dict[str, Any]:
    return {
        "filename": hit.filename,
        "ref": hit.ref,
        "position": hit.position,
        "score": hit.score,
        "text": hit.text,
        "collection": hit.collection,
    }
