"""Semantic retrieval with the real local MiniLM model (the ``rag-local`` extra).

The question shares no keyword with the passage that answers it, and two distractor
documents are indexed next to it. Skipped when the extra is not installed.
"""

from __future__ import annotations

import pytest

from openagent.rag.embeddings import MiniLMEmbedder

pytestmark = [
    pytest.mark.skipif(not MiniLMEmbedder.available(), reason="needs pip install 'openagent[rag-local]'"),
    pytest.mark.timeout(300),
]

DOCUMENTS = {
    "vet.txt": "Cats should see an animal doctor once a year for shots and a checkup.",
    "garden.txt": "Tomatoes need full sun, regular watering and support stakes as they grow.",
    "finance.txt": "Quarterly revenue rose because subscription renewals beat the forecast.",
}
QUESTION = "How often must my kitten visit the veterinarian?"


async def test_minilm_finds_the_passage_without_shared_keywords() -> None:
    import httpx
    import redis.asyncio as aioredis

    from openagent.rag.config import RagConfig
    from openagent.rag.extractor import DocumentExtractor
    from openagent.rag.indexer import DocumentIndexer
    from openagent.rag.store import BruteForceStore
    from tests.factories import TEST_REDIS_URL
    from tests.openagent.rag.test_indexer import FakeMaster

    question_words = {word.strip("?").lower() for word in QUESTION.split()}
    answer_words = {word.strip(".,").lower() for word in DOCUMENTS["vet.txt"].split()}
    assert not (question_words & answer_words) - {"a"}  # no keyword in common
    master = FakeMaster()
    for name, text in DOCUMENTS.items():
        master.attach("minilm", name, "text/plain", text.encode())
    client = aioredis.Redis.from_url(TEST_REDIS_URL)
    config = RagConfig(redis_url=TEST_REDIS_URL, master_base_url="http://master.test")
    try:
        async with httpx.AsyncClient(transport=httpx.MockTransport(master.handler)) as http:
            extractor = DocumentExtractor(config, redis=client, http=http)
            indexer = DocumentIndexer(
                store=BruteForceStore(client), embedder=MiniLMEmbedder(), extractor=extractor
            )
            result = await indexer.search(master.context("minilm"), QUESTION, top_k=3)
    finally:
        await client.aclose()
    assert len(result["indexed_now"]) == 3
    assert result["indexed_now"][0]["embedding_model"] == "local/all-MiniLM-L6-v2"
    ranked = [(hit["filename"], hit["score"]) for hit in result["results"]]
    assert ranked[0][0] == "vet.txt", ranked
    assert ranked[0][1] > ranked[1][1] + 0.1, ranked  # clearly ahead of the distractors
