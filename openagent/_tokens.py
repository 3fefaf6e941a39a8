"""tiktoken's ``cl100k_base``, built offline: the one tokenizer of the SDK and the master.

Shared by the RAG chunker (:mod:`openagent.rag.chunking`) and the master's context budget
(``master/orchestration/tokens.py``), so both count the same tokens. It needs only tiktoken
and bpe-openai (in the ``master`` and ``rag`` extras), never the RAG system's own
dependencies, and ``import openagent`` does not import it.

tiktoken downloads its encoding files on first use, which fails without internet.
The ``bpe-openai`` package ships the same ``cl100k_base`` ranks, so the encoding is
built from that file with tiktoken's split pattern and special tokens
(``tests/master/orchestration/test_tokens.py`` checks them against tiktoken's own
``cl100k_base`` constructor).
"""

from __future__ import annotations

import base64
import gzip
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import tiktoken
from tiktoken_ext import openai_public

from openagent.errors import ConfigurationError

__all__ = ["decode", "encode", "encoding"]


def _ranks() -> dict[bytes, int]:
    spec = find_spec("bpe_openai")
    if spec is None or spec.origin is None:
        raise ConfigurationError(
            "counting tokens needs the bpe-openai package: pip install 'openagent[rag]' (or '[master]')"
        )
    raw = gzip.decompress((Path(spec.origin).parent / "data" / "cl100k_base.tiktoken.gz").read_bytes())
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


# tiktoken_ext.openai_public.cl100k_base()'s pattern and special tokens (that function would
# download the ranks); the master's tokenizer uses the same.
_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECIAL_TOKENS = {
    openai_public.ENDOFTEXT: 100257,
    openai_public.FIM_PREFIX: 100258,
    openai_public.FIM_MIDDLE: 100259,
    openai_public.FIM_SUFFIX: 100260,
    openai_public.ENDOFPROMPT: 100276,
}


@cache
def encoding() -> tiktoken.Encoding:
    """The ``cl100k_base`` encoding, built without network access (once per process)."""
    return tiktoken.Encoding(
        name="cl100k_base", pat_str=_PAT_STR, mergeable_ranks=_ranks(), special_tokens=_SPECIAL_TOKENS
    )


def encode(text: str) -> list[int]:
    """The tokens of ``text`` (special-token text is encoded as ordinary text)."""
    return encoding().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    """The text of ``tokens``; a character cut at a window edge becomes U+FFFD."""
    return encoding().decode(tokens)
