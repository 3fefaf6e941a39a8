"""Size-bounded caches (defect 14: caches capped by entry count retained 42 MB after 600 large queries)."""

from __future__ import annotations

from master.llm import tokens
from master.storage.caches import SizedLRU


def test_size_bound_evicts_least_recently_used() -> None:
    cache: SizedLRU[str, int] = SizedLRU(10, lambda key, _: len(key))
    cache.put("aaaa", 1)
    cache.put("bbbb", 2)
    assert cache.get("aaaa") == 1  # now the most recent
    cache.put("cccc", 3)  # 12 > 10: "bbbb" goes
    assert (cache.get("bbbb"), cache.get("aaaa"), cache.get("cccc")) == (None, 1, 3)
    assert cache.size == 8 and len(cache) == 2
    cache.put("x" * 11, 4)  # larger than the whole budget: not kept, nothing evicted
    assert len(cache) == 2 and cache.size == 8
    assert cache.pop("aaaa") == 1 and cache.size == 4


def test_token_counts_of_many_large_distinct_queries_stay_bounded() -> None:
    """600 distinct 100 KB texts: the token-count cache keeps at most TEXT_CACHE_CHARS of them."""
    for n in range(600):
        tokens.count_text(f"{n} " + "lorem ipsum " * 8_500)
    assert tokens.text_cache_size() <= tokens.TEXT_CACHE_CHARS
    assert tokens.count_text("hello world") == 2
