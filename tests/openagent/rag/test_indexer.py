"""openagent.rag.extractor, .indexer and .store against a real Redis (brute force) and a
stand-in for the master's blob endpoint (httpx.MockTransport)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import redis.asyncio as aioredis

from openagent.errors import DocumentError, ToolError
from openagent.rag.config import RagConfig
from openagent.rag.embeddings import HashingEmbedder
from openagent.rag.extractor import DocumentExtractor
from openagent.rag.indexer import DocumentIndexer
from openagent.rag.store import (
    BruteForceStore,
    SearchFilters,
    docs_key,
    parse_search_reply,
    query_engine_available,
)
from protocol.rag import CALL_TOKEN_HEADER, FILENAME_HEADER, AttachmentInfo, RagCallContext, ref_for_digest
from tests.factories import TEST_REDIS_URL, make_docx, make_pdf

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


class FakeMaster:
    """Serves ``GET /attachments/{ref}`` for the tokens it issued, like the master does."""

    def __init__(self) -> None:
        self.blobs: dict[str, dict[str, tuple[str, str, bytes]]] = {}
        self.tokens: dict[str, str] = {}
        self.fetches = 0

    def attach(self, session_id: str, filename: str, mime: str, data: bytes) -> AttachmentInfo:
        ref = ref_for_digest(hashlib.sha256(data).hexdigest())
        self.blobs.setdefault(session_id, {})[ref] = (filename, mime, data)
        return AttachmentInfo(ref=ref, filename=filename, mime_type=mime, size=len(data))

    def context(self, session_id: str, ttl: int = 600) -> RagCallContext:
        token = f"tok-{session_id}"
        self.tokens[token] = session_id
        attachments = [
            AttachmentInfo(ref=ref, filename=name, mime_type=mime)
            for ref, (name, mime, _) in self.blobs.get(session_id, {}).items()
        ]
        return RagCallContext(
            session_id=session_id, ttl_seconds=ttl, blob_token=token, attachments=attachments
        )

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.fetches += 1
        session = self.tokens.get(request.headers.get(CALL_TOKEN_HEADER, ""))
        if session is None:
            return httpx.Response(401, text="invalid call token")
        ref = request.url.path.rsplit("/", 1)[-1]
        found = self.blobs.get(session, {}).get(ref)
        if found is None:
            return httpx.Response(404, text="unknown ref")
        filename, mime, data = found
        return httpx.Response(
            200, content=data, headers={"content-type": mime, FILENAME_HEADER: quote(filename)}
        )


@pytest.fixture
async def redis_db() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(TEST_REDIS_URL)
    yield client
    await client.aclose()


@pytest.fixture
def master() -> FakeMaster:
    return FakeMaster()


@pytest.fixture
async def indexer(redis_db: aioredis.Redis, master: FakeMaster) -> AsyncIterator[DocumentIndexer]:
    config = RagConfig(redis_url=TEST_REDIS_URL, master_base_url="http://master.test")
    async with httpx.AsyncClient(transport=httpx.MockTransport(master.handler)) as http:
        extractor = DocumentExtractor(config, redis=redis_db, http=http)
        yield DocumentIndexer(
            store=BruteForceStore(redis_db), embedder=HashingEmbedder(), extractor=extractor
        )


def session(name: str) -> str:
    return f"{name}-{np.random.randint(1 << 30)}"


async def test_index_and_search_names_file_and_page(indexer: DocumentIndexer, master: FakeMaster) -> None:
    sid = session("s")
    pdf = master.attach(
        sid,
        "plant.pdf",
        PDF,
        make_pdf(["Cooling water enters at pump seven.", "The turbine hall has four generators."]),
    )
    master.attach(sid, "staff.docx", DOCX, make_docx([("Rota", "Nurses rotate every twelve hours.")]))
    ctx = master.context(sid)
    indexed = await indexer.index_ref(ctx, pdf.ref)
    assert indexed["status"] == "indexed"
    assert indexed["filename"] == "plant.pdf"
    result = await indexer.search(ctx, "how many generators in the turbine hall", top_k=1)
    assert [item["filename"] for item in result["indexed_now"]] == [
        "staff.docx"
    ]  # the other attachment was indexed before searching
    best = result["results"][0]
    assert (best["filename"], best["position"]) == ("plant.pdf", "page 2")
    assert "four generators" in best["text"]
    nurses = await indexer.search(ctx, "nurses rotate", top_k=1)
    assert nurses["results"][0]["filename"] == "staff.docx"
    assert nurses["results"][0]["position"] == "section: Rota"


async def test_reindex_does_not_duplicate(
    indexer: DocumentIndexer, master: FakeMaster, redis_db: aioredis.Redis
) -> None:
    sid = session("dup")
    info = master.attach(sid, "a.md", "text/markdown", b"# One\nalpha beta\n# Two\ngamma delta")
    ctx = master.context(sid)
    first = await indexer.index_ref(ctx, info.ref)
    embedded = indexer.embedded_chunks
    second = await indexer.index_ref(ctx, info.ref)
    assert second["status"] == "already_indexed"
    assert indexer.embedded_chunks == embedded
    assert await redis_db.hlen(docs_key(sid)) == 1
    result = await indexer.search(ctx, "gamma", top_k=10)
    assert len(result["results"]) == first["chunks"]


async def test_extract_cache_hits_by_content(indexer: DocumentIndexer, master: FakeMaster) -> None:
    data = make_pdf([f"unique cache text {np.random.randint(1 << 30)}"])
    one, two = session("c1"), session("c2")
    ref = master.attach(one, "first.pdf", PDF, data).ref
    master.attach(two, "renamed.pdf", PDF, data)
    extractor = indexer.extractor
    hits = extractor.cache_hits
    first = await extractor.extract(master.context(one), ref)
    second = await extractor.extract(master.context(two), ref)
    assert (first.cached, second.cached) == (False, True)
    assert extractor.cache_hits == hits + 1
    assert second.chunks[0].filename == "renamed.pdf"  # the cache keeps content, not names


async def test_session_b_cannot_search_session_a(indexer: DocumentIndexer, master: FakeMaster) -> None:
    a, b = session("a"), session("b")
    ref = master.attach(a, "secret.txt", "text/plain", b"The vault code is 4711.").ref
    await indexer.index_ref(master.context(a), ref)
    result = await indexer.search(master.context(b), "vault code", top_k=5)
    assert result["results"] == []
    with pytest.raises(ToolError, match="no attachment"):
        await indexer.index_ref(master.context(b), ref)  # B's token does not open A's blob


async def test_chunks_expire_with_the_session(
    indexer: DocumentIndexer, master: FakeMaster, redis_db: aioredis.Redis
) -> None:
    sid = session("ttl")
    ref = master.attach(sid, "t.txt", "text/plain", b"short lived").ref
    await indexer.index_ref(master.context(sid, ttl=321), ref)
    keys = [key async for key in redis_db.scan_iter(match=f"openagent:rag:{sid}:*")]
    assert len(keys) == 4  # docs, chunks, vec, version
    for key in keys:
        assert 0 < await redis_db.ttl(key) <= 321


async def test_unreadable_attachment_is_named_and_others_searched(
    indexer: DocumentIndexer, master: FakeMaster
) -> None:
    sid = session("bad")
    master.attach(sid, "empty.pdf", PDF, b"")
    master.attach(sid, "good.txt", "text/plain", b"Bananas are yellow.")
    result = await indexer.search(master.context(sid), "bananas", top_k=1)
    assert result["results"][0]["filename"] == "good.txt"
    assert result["unreadable"][0]["filename"] == "empty.pdf"
    assert "0 bytes" in result["unreadable"][0]["error"]
    fetches = master.fetches
    again = await indexer.search(master.context(sid), "bananas", top_k=1)
    assert again["unreadable"][0]["filename"] == "empty.pdf"
    assert master.fetches == fetches  # the bad file is not fetched again


async def test_bad_file_fails_index_call_naming_it(indexer: DocumentIndexer, master: FakeMaster) -> None:
    sid = session("lie")
    ref = master.attach(sid, "report.pdf", PDF, b"not a pdf at all").ref
    with pytest.raises(DocumentError, match=r"^report\.pdf: declared as application/pdf"):
        await indexer.index_ref(master.context(sid), ref)


async def test_search_cache_reloads_only_after_a_write(indexer: DocumentIndexer, master: FakeMaster) -> None:
    store = indexer.store
    assert isinstance(store, BruteForceStore)
    sid = session("cache")
    ref = master.attach(sid, "x.txt", "text/plain", b"first document").ref
    ctx = master.context(sid)
    await indexer.index_ref(ctx, ref)
    await indexer.search(ctx, "first", top_k=1)
    loads = store.loads
    await indexer.search(ctx, "document", top_k=1)
    assert store.loads == loads
    ref2 = master.attach(sid, "y.txt", "text/plain", b"second document").ref
    await indexer.index_ref(master.context(sid), ref2)
    result = await indexer.search(
        master.context(sid), "second", top_k=2, filters=SearchFilters(filenames=("y.txt",))
    )
    assert store.loads == loads + 1
    assert [hit["filename"] for hit in result["results"]] == ["y.txt"]


async def test_collections_scope_search(indexer: DocumentIndexer, master: FakeMaster) -> None:
    from protocol.rag import Chunk

    sid = session("coll")
    ctx = RagCallContext(session_id=sid, ttl_seconds=60)
    chunk = Chunk(filename="n.txt", position="lines 1-1", index=0, text="apples and pears")
    await indexer.index_chunks(ctx, [chunk], collection="fruit")
    await indexer.index_chunks(
        ctx, [chunk.model_copy(update={"text": "apples computers"})], collection="tech"
    )
    fruit = await indexer.search(ctx, "apples", top_k=5, filters=SearchFilters(collection="fruit"))
    assert [hit["collection"] for hit in fruit["results"]] == ["fruit"]


async def test_hits_come_best_first(indexer: DocumentIndexer) -> None:
    """With several hits, the closest chunk leads and scores only go down."""
    from protocol.rag import Chunk

    ctx = RagCallContext(session_id=session("rank"), ttl_seconds=60)
    texts = ["cats sleep all day long", "owls hunt mice", "owls hunt mice at night in the barn"]
    chunks = [
        Chunk(filename="animals.txt", position=f"lines {n}-{n}", index=n, text=text)
        for n, text in enumerate(texts)
    ]
    await indexer.index_chunks(ctx, chunks)
    result = await indexer.search(ctx, "owls hunt mice at night in the barn", top_k=3)
    scores = [hit["score"] for hit in result["results"]]
    assert len(scores) == 3
    assert scores == sorted(scores, reverse=True)
    assert [hit["text"] for hit in result["results"]] == [texts[2], texts[1], texts[0]]


async def test_redis_7_has_no_query_engine(redis_db: aioredis.Redis) -> None:
    """This suite's Redis has no modules: auto-detection must pick brute force."""
    info = await redis_db.info("server")
    if int(str(info["redis_version"]).split(".")[0]) >= 8:
        pytest.skip("Redis 8 ships the query engine")
    assert await query_engine_available(redis_db) is False


def test_query_engine_reply_parsing() -> None:
    reply = [
        1,
        b"k1",
        [
            b"filename",
            b"a.pdf",
            b"ref",
            b"",
            b"collection",
            b"default",
            b"position",
            b"page 2",
            b"index",
            b"3",
            b"text",
            b"hi",
            b"dist",
            b"0.25",
        ],
    ]
    (hit,) = parse_search_reply(reply)
    assert (hit.filename, hit.ref, hit.position, hit.index, hit.score) == ("a.pdf", None, "page 2", 3, 0.75)
