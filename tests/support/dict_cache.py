"""The retrieval cache (``agentsearch.pipeline.platform.cache.ResultCache``) as a plain dict: ``get`` and ``set`` by
key, the key the parts joined by ``:`` (no namespace), the time to live ignored. What was stored stays in ``stored``.

Usage::

    cache = DictCache()
    Retriever(embed, store, KeywordAnalyzer(), cache=cache).search("c1", "solar", SearchConfig())
    [key for key in cache.stored if key.startswith("search:")]    # the searches it cached
"""

from __future__ import annotations


class DictCache:
    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    def key(self, *parts: str) -> str:
        return ":".join(parts)

    def get(self, key):
        return self.stored.get(key)

    def set(self, key, value, ttl):
        self.stored[key] = value
