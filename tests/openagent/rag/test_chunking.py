"""openagent.rag.chunking: token-sized chunks with overlap and honest positions."""

from __future__ import annotations

import pytest

from openagent._tokens import encode
from openagent.rag.chunking import ChunkPolicy, chunk_sections
from openagent.rag.extract import Section


def test_small_sections_are_packed_with_a_span_position() -> None:
    sections = [Section(f"page {n}", f"Short page {n}.") for n in range(1, 4)]  # packed unless pack=False
    chunks = chunk_sections(sections, filename="a.pdf", ref="att_" + "0" * 24, policy=ChunkPolicy(64, 8))
    assert len(chunks) == 1
    assert chunks[0].position == "pages 1-3"
    assert chunks[0].filename == "a.pdf"
    assert chunks[0].ref == "att_" + "0" * 24


def test_long_section_is_cut_into_overlapping_windows_of_at_most_the_size() -> None:
    text = " ".join(f"word{n}." for n in range(600))
    policy = ChunkPolicy(chunk_tokens=100, overlap_tokens=20)
    chunks = chunk_sections([Section("section: Long", text)], filename="l.md", ref=None, policy=policy)
    assert len(chunks) > 5
    assert all(len(encode(chunk.text)) <= 100 for chunk in chunks)
    assert [chunk.index for chunk in chunks] == list(range(len(chunks)))
    assert all(chunk.position == "section: Long" for chunk in chunks)
    # Overlap: the end of each window opens the next one.
    for first, second in zip(chunks, chunks[1:], strict=False):
        assert first.text.split()[-1] in second.text


def test_every_word_is_kept() -> None:
    words = [f"w{n}" for n in range(1000)]
    chunks = chunk_sections(
        [Section("lines 1-9", " ".join(words))], filename="t.txt", ref=None, policy=ChunkPolicy(50, 0)
    )
    seen = " ".join(chunk.text for chunk in chunks).split()
    assert set(words) <= set(seen)


def test_policy_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="overlap_tokens"):
        ChunkPolicy(chunk_tokens=100, overlap_tokens=60)
    with pytest.raises(ValueError, match="chunk_tokens"):
        ChunkPolicy(chunk_tokens=4, overlap_tokens=0)


def test_pages_stay_apart_without_packing() -> None:
    sections = [Section(f"page {n}", f"Short page {n}.") for n in range(1, 4)]
    chunks = chunk_sections(sections, filename="a.pdf", ref=None, policy=ChunkPolicy(64, 8), pack=False)
    assert [chunk.position for chunk in chunks] == ["page 1", "page 2", "page 3"]
