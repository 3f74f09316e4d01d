"""Every in-process cache stays under its bound after many distinct entries (bench/load.py's
10-minute overload found RSS growing while dead cache entries piled up)."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

import numpy as np

import superchargedb  # noqa: F401  (imports onnxruntime before usearch)
from superchargedb.answer.localize import Localizer
from superchargedb.answer.verify import LexicalDenseChecker
from superchargedb.models.embedder import Embedder
from superchargedb.models.executor import EmbedExecutor
from superchargedb.search.cache import ResultCache
from superchargedb.storage.sqlite.candidates import CandidateCache, Candidates
from superchargedb.storage.sqlite.catalog import Catalog


def candidates(n: int) -> Candidates:
    return Candidates(np.arange(1, n + 1, dtype=np.uint64))


def test_result_cache_stays_under_its_byte_limit() -> None:
    cache = ResultCache(64 * 1024)
    for i in range(5_000):
        cache.put(f"q{i}", {"hits": [{"id": i, "text": "x" * (i % 900)}]})
        assert cache.nbytes <= cache.max_bytes
    assert 0 < len(cache) < 5_000
    assert cache.get("q4999") is not None  # the newest entry survives
    assert cache.get("q0") is None


def test_candidate_cache_stays_under_its_byte_limit() -> None:
    cache = CandidateCache(1 * 2**20)
    for i in range(2_000):
        cache.put(("text", f"pred{i}", (), ()), candidates(500 + i % 300), epoch=7)
        assert cache.nbytes <= cache.max_bytes
    assert sum(c.nbytes for c in cache._data.values()) == cache.nbytes
    assert 0 < len(cache) < 2_000


def test_candidate_cache_drops_entries_of_older_watermarks() -> None:
    """Keys hold the applied watermark: after a write, older entries are unreachable and must
    not sit in the cache until the byte bound pushes them out."""
    cache = CandidateCache(256 * 2**20)
    for seq in range(1, 200):
        for principal in range(8):
            cache.put(("text", f"p{principal}", (seq,), ()), candidates(1_000), epoch=seq)
        assert len(cache) == 8  # only the current watermark's sets
    assert cache.nbytes == 8 * candidates(1_000).nbytes
    # A query that read an older watermark finishing late does not bring its set back.
    cache.put(("text", "late", (3,), ()), candidates(1_000), epoch=3)
    assert cache.get(("text", "late", (3,), ())) is None
    assert len(cache) == 8


def test_query_embedding_cache_stays_under_its_entry_limit(embedder: Embedder) -> None:
    ex = EmbedExecutor(embedder, cache_size=100)
    try:
        for i in range(300):
            ex.embed_query(f"query number {i}")
            assert ex.cache_len() <= 100
        assert ex.cache_len() == 100
    finally:
        ex.close()


def test_sqlite_page_cache_per_reader_is_the_setting(tmp_path: Path) -> None:
    """One reader per worker thread: its page cache size is what bounds the catalog's memory."""
    cat = Catalog(tmp_path / "catalog.db", writer_cache_mb=16, reader_cache_mb=3)
    try:
        seen: list[int] = []

        def read() -> None:
            seen.append(int(cat.reader().execute("PRAGMA cache_size").fetchone()[0]))

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [-3 * 1024] * 4
        with cat.locked() as w:
            assert int(w.execute("PRAGMA cache_size").fetchone()[0]) == -16 * 1024
    finally:
        cat.close()


def test_result_cache_holds_what_it_counts() -> None:
    """orjson keeps the buffer it grew while writing (several times the output): the cache must
    store exact-size bytes, or 64 MB of counted bytes hold several hundred MB."""
    cache = ResultCache(8 * 2**20)
    value = {"hits": [{"id": i, "text": "word " * 4_000} for i in range(5)]}  # ~100 KB of JSON
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):
            cache.put(f"q{i}", value)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.nbytes <= cache.max_bytes
    assert held < 1.25 * cache.nbytes + 2**20, (held, cache.nbytes)


def test_sentence_vector_caches_do_not_pin_their_batches(embedder: Embedder) -> None:
    """An entry that is a row view keeps the whole batch array alive: the entry bound would
    not bound memory."""
    texts = [f"sentence number {i} about proteins" for i in range(40)]
    loc = Localizer(embedder, cache_size=100)
    loc._vectors(texts)
    chk = LexicalDenseChecker(embedder, cache_size=100)
    chk._vectors(texts)
    for cache in (loc._cache, chk._cache):
        assert len(cache) == 40
        assert all(v.base is None and v.nbytes == 4 * embedder.dim for v in cache.values())
