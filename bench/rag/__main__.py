"""RAG benchmarks: retrieval quality, ingestion speed, search latency, indexer memory.

    python -m bench.rag [--redis-url redis://127.0.0.1:6379/12] [--only quality,ingest,search,memory]

- quality: recall@3 and MRR on the evaluation set (bench/rag/corpus.py) with the local MiniLM
  model and with the hashing baseline; overall and on the paraphrased questions alone.
- ingest: pages per second for a 50-page PDF and for the same text as plain text (extract +
  chunk + embed with MiniLM on CPU + store).
- search: p50 and p99 of ``search_knowledge``'s store search over 10,000 and 100,000 chunks of
  one session (brute force, 384 dimensions), and the first (cold) search that loads the vectors.
- memory: peak RSS of a process that loads MiniLM and indexes the 50-page PDF.

Needs the rag-local extra (MiniLM). Uses and empties only keys under ``openagent:rag:`` of
sessions it creates, in its own Redis database (default 12). Writes bench/rag/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from bench.rag.corpus import DOCUMENTS, MIME, QUESTIONS, render
from openagent.rag.config import RagConfig
from openagent.rag.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder
from openagent.rag.extractor import Blob, DocumentExtractor
from openagent.rag.indexer import DocumentIndexer
from openagent.rag.store import BruteForceStore, DocumentRecord, SearchFilters, now
from protocol.rag import Chunk, RagCallContext

RESULTS = Path(__file__).with_name("results.json")
WORDS = (
    "river pump valve turbine harbour ferry library museum bakery honey volcano sensor ledger invoice "
    "schedule tenant garden reactor engine circuit"
).split()


def fifty_page_text(pages: int = 50) -> list[str]:
    rng = random.Random(7)
    return [
        "\n".join(" ".join(rng.choice(WORDS) for _ in range(70)) + "." for _ in range(6))
        for _ in range(pages)
    ]


async def indexer_for(client: aioredis.Redis, embedder: Embedder) -> DocumentIndexer:
    config = RagConfig(redis_url="unused", master_base_url="http://unused")
    import httpx

    extractor = DocumentExtractor(config, redis=None, http=httpx.AsyncClient())
    return DocumentIndexer(store=BruteForceStore(client), embedder=embedder, extractor=extractor)


async def ingest_documents(indexer: DocumentIndexer, context: RagCallContext) -> None:
    for document in DOCUMENTS:
        ref = "att_" + hashlib.sha256(document.name.encode()).hexdigest()[:24]
        blob = Blob(ref, document.name, MIME[document.kind], render(document))
        extracted = await indexer.extractor.extract_blob(blob)
        await indexer.index_chunks(context, extracted.chunks, doc_id=blob.ref)


async def quality(client: aioredis.Redis, embedder: Embedder) -> dict[str, Any]:
    indexer = await indexer_for(client, embedder)
    context = RagCallContext(session_id=f"bench-quality-{embedder.model.replace('/', '-')}", ttl_seconds=3600)
    await ingest_documents(indexer, context)
    ranks: list[int | None] = []
    for question in QUESTIONS:
        result = await indexer.search(context, question.text, top_k=10)
        rank = None
        for position, hit in enumerate(result["results"], start=1):
            if hit["filename"] == question.filename and question.phrase.lower() in hit["text"].lower():
                rank = position
                break
        ranks.append(rank)
    await indexer.extractor._http.aclose()

    def score(selected: list[int | None]) -> dict[str, float]:
        recall = sum(1 for r in selected if r is not None and r <= 3) / len(selected)
        mrr = sum(1 / r for r in selected if r is not None) / len(selected)
        return {"recall@3": round(recall, 3), "mrr": round(mrr, 3), "questions": len(selected)}

    paraphrased = [r for r, q in zip(ranks, QUESTIONS, strict=True) if q.paraphrase]
    missed = [q.text for r, q in zip(ranks, QUESTIONS, strict=True) if r is None or r > 3]
    return {"all": score(ranks), "paraphrases": score(paraphrased), "missed@3": missed}


async def ingest(client: aioredis.Redis, embedder: MiniLMEmbedder) -> dict[str, Any]:
    from tests.factories import make_pdf

    pages = fifty_page_text()
    pdf = make_pdf(pages)
    text = "\n\n".join(pages).encode()
    indexer = await indexer_for(client, embedder)
    await embedder.embed(["warm up"])  # model load is not ingestion
    figures: dict[str, Any] = {}
    for label, data, mime in (
        ("pdf_50_pages", pdf, "application/pdf"),
        ("text_50_pages", text, "text/plain"),
    ):
        context = RagCallContext(session_id=f"bench-ingest-{label}", ttl_seconds=3600)
        started = time.perf_counter()
        extracted = await indexer.extractor.extract_blob(Blob(None, f"{label}", mime, data))  # type: ignore[arg-type]
        extract_seconds = time.perf_counter() - started
        await indexer.index_chunks(context, extracted.chunks)
        total = time.perf_counter() - started
        figures[label] = {
            "pages_per_second": round(50 / total, 2),
            "seconds": round(total, 2),
            "extract_and_chunk_seconds": round(extract_seconds, 3),
            "chunks": len(extracted.chunks),
        }
    await indexer.extractor._http.aclose()
    return figures


async def search(client: aioredis.Redis, sizes: tuple[int, ...] = (10_000, 100_000)) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    dims, per_doc, queries = 384, 1000, 300
    figures: dict[str, Any] = {}
    for size in sizes:
        store = BruteForceStore(client)
        session = f"bench-search-{size}"
        for doc in range(size // per_doc):
            vectors = rng.standard_normal((per_doc, dims)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            chunks = [
                Chunk(
                    filename=f"doc{doc}.txt",
                    position=f"lines {i}-{i}",
                    index=i,
                    text=f"chunk {i} of doc {doc}",
                )
                for i in range(per_doc)
            ]
            record = DocumentRecord(
                f"d{doc}", "default", f"doc{doc}.txt", None, per_doc, "bench", dims, str(doc), now()
            )
            await store.put(session, record, chunks, vectors, 3600)
        query_vectors = rng.standard_normal((queries, dims)).astype(np.float32)
        timings: list[float] = []
        cold = 0.0
        for index, query in enumerate(query_vectors):
            started = time.perf_counter()
            await store.search(
                session,
                query / np.linalg.norm(query),
                model="bench",
                top_k=5,
                filters=SearchFilters(),
                ttl=3600,
            )
            elapsed = time.perf_counter() - started
            if index == 0:
                cold = elapsed
            else:
                timings.append(elapsed)
        figures[f"{size}_chunks"] = {
            "p50_ms": round(float(np.percentile(timings, 50)) * 1000, 2),
            "p99_ms": round(float(np.percentile(timings, 99)) * 1000, 2),
            "cold_first_search_ms": round(cold * 1000, 1),
        }
        await _drop_session(client, session)
    return figures


async def _drop_session(client: aioredis.Redis, session: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"openagent:rag:{session}:*")]
    if keys:
        await client.delete(*keys)


def memory(redis_url: str) -> dict[str, Any]:
    """Peak RSS of a fresh process that loads MiniLM, then indexes the 50-page PDF."""
    code = (
        "import asyncio, resource, json, redis.asyncio as r\n"
        "from bench.rag.__main__ import ingest\n"
        "from openagent.rag.embeddings import MiniLMEmbedder\n"
        "async def main():\n"
        f"    c = r.Redis.from_url({redis_url!r})\n"
        "    e = MiniLMEmbedder(); e.load()\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    await ingest(c, e)\n"
        "    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    await c.aclose()\n"
        "    print(json.dumps({'peak_rss_mb_after_model_load': round(before/1024), 'peak_rss_mb_after_indexing': round(after/1024)}))\n"
        "asyncio.run(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rag")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--only", default="quality,ingest,search,memory")
    args = parser.parse_args()
    wanted = set(args.only.split(","))
    client = aioredis.Redis.from_url(args.redis_url)
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    try:
        if "quality" in wanted:
            results["quality"] = {
                "minilm": await quality(client, MiniLMEmbedder()),
                "hashing_baseline": await quality(client, HashingEmbedder()),
            }
            print(json.dumps(results["quality"], indent=1))
        if "ingest" in wanted:
            results["ingest"] = await ingest(client, MiniLMEmbedder())
            print(json.dumps(results["ingest"], indent=1))
        if "search" in wanted:
            results["search"] = await search(client)
            print(json.dumps(results["search"], indent=1))
    finally:
        await client.aclose()
    if "memory" in wanted:
        results["memory"] = memory(args.redis_url)
        print(json.dumps(results["memory"], indent=1))
    results["cpu"] = {
        "cores": __import__("os").cpu_count(),
        "max_rss_of_runner_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
