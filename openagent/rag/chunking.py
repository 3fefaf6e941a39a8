"""Split extracted sections into chunks measured in tokens, with overlap.

Small neighbouring sections (Markdown sections, text lines, CSV rows) are packed together up
to ``chunk_tokens``; a section longer than that is cut into windows of
``chunk_tokens`` that overlap by ``overlap_tokens``, cutting at a line or sentence end
near the window's edge when there is one. A chunk's position names the first and last
section it covers (``pages 3-4``).

Tokens are ``cl100k_base`` (:mod:`openagent._tokens`), the master's tokenizer. The
default of 200 tokens fits the 256-wordpiece window of the local MiniLM model; an
OpenAI embedding model takes far more, so raise ``RAG_CHUNK_TOKENS`` with it if passages
should be longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openagent._tokens import decode, encode
from openagent.rag.extract import Section
from protocol.rag import Chunk

__all__ = ["ChunkPolicy", "chunk_sections"]

_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ")


@dataclass(frozen=True, slots=True)
class ChunkPolicy:
    chunk_tokens: int = 200
    overlap_tokens: int = 30

    def __post_init__(self) -> None:
        if self.chunk_tokens < 16:
            raise ValueError(f"chunk_tokens must be at least 16, got {self.chunk_tokens}")
        if not 0 <= self.overlap_tokens < self.chunk_tokens // 2:
            raise ValueError(
                f"overlap_tokens must be from 0 to half of chunk_tokens ({self.chunk_tokens}), "
                f"got {self.overlap_tokens}"
            )


def chunk_sections(
    sections: Sequence[Section], *, filename: str, ref: str | None, policy: ChunkPolicy, pack: bool = True
) -> list[Chunk]:
    """The chunks of a document's sections, in order; ``pack=False`` keeps every section
    in chunks of its own (PDF pages, so that a passage cites one page)."""
    pieces: list[tuple[str, str, int]] = []  # (position, text, tokens)
    for section in sections:
        tokens = encode(section.text)
        if len(tokens) <= policy.chunk_tokens:
            pieces.append((section.position, section.text.strip(), len(tokens)))
        else:
            pieces.extend((section.position, text, count) for text, count in _windows(tokens, policy))
    chunks: list[Chunk] = []
    group: list[tuple[str, str, int]] = []
    used = 0

    def flush() -> None:
        if not group:
            return
        first, last = group[0][0], group[-1][0]
        position = first if first == last else _span(first, last)
        text = "\n\n".join(text for _, text, _ in group)
        chunks.append(Chunk(filename=filename, ref=ref, position=position, index=len(chunks), text=text))
        group.clear()

    for piece in pieces:
        if group and (not pack or used + piece[2] > policy.chunk_tokens):
            flush()
            used = 0
        group.append(piece)
        used += piece[2]
    flush()
    return chunks


def _windows(tokens: list[int], policy: ChunkPolicy) -> list[tuple[str, int]]:
    size, overlap = policy.chunk_tokens, policy.overlap_tokens
    windows: list[tuple[str, int]] = []
    start = 0
    while start < len(tokens):
        end = min(start + size, len(tokens))
        text = decode(tokens[start:end])
        if end < len(tokens):
            cut = _break_at(text)
            if cut is not None:
                kept = encode(text[:cut])
                if len(kept) > size // 2:  # only cut when most of the window stays
                    text, end = text[:cut], start + len(kept)
        windows.append((text.strip(), end - start))
        if end >= len(tokens):
            break
        start = max(end - overlap, start + 1)
    return windows


def _break_at(text: str) -> int | None:
    """Index just after the last line or sentence end in the last third of ``text``."""
    floor = len(text) * 2 // 3
    for mark in _BREAKS:
        at = text.rfind(mark, floor)
        if at != -1:
            return at + len(mark)
    return None


def _span(first: str, last: str) -> str:
    """``page 3`` + ``page 5`` → ``pages 3-5``; ``lines 1-40`` + ``lines 41-80`` → ``lines 1-80``."""
    kind_a, _, value_a = first.partition(" ")
    kind_b, _, value_b = last.partition(" ")
    if kind_a == kind_b and kind_a in ("page", "pages", "lines", "rows"):
        start = value_a.split("-")[0]
        end = value_b.split("-")[-1]
        plural = {"page": "pages"}.get(kind_a, kind_a)
        return f"{plural} {start}-{end}"
    return f"{first} to {last}"
