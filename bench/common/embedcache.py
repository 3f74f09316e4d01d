"""Embeddings computed once per text with the default model, cached as ``<dir>/<name>.npz``.

The vectors are the model's, so a benchmark fed from the cache scores the same as with live
embedding; what is not cached yet is embedded live (and the time spent in it is counted).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.paths import CACHE_DIR


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbedCache:
    """text -> float32 vector of one model, persisted as ``<dir>/<name>.npz`` (atomic writes)."""

    def __init__(self, path: Path, model_id: str | None = None, dim: int | None = None) -> None:
        self.path = path
        self.model_id = model_id
        self.dim = dim
        self._index: dict[str, int] = {}
        self._rows: list[np.ndarray] = []
        self._dirty = False
        self._lock = threading.Lock()
        if path.exists():
            with np.load(path, allow_pickle=False) as z:
                mid = str(z["model_id"])
                if model_id is None or mid == model_id:
                    self.model_id = mid
                    vecs = np.asarray(z["vectors"], dtype=np.float32)
                    self.dim = int(vecs.shape[1])
                    self._rows = list(vecs)
                    self._index = {str(k): i for i, k in enumerate(z["keys"])}

    def __len__(self) -> int:
        return len(self._index)

    def get(self, text: str) -> np.ndarray | None:
        i = self._index.get(text_key(text))
        return None if i is None else self._rows[i]

    def put(self, text: str, vec: np.ndarray) -> None:
        k = text_key(text)
        with self._lock:
            if k in self._index:
                return
            self._index[k] = len(self._rows)
            self._rows.append(np.asarray(vec, dtype=np.float32))
            self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = np.array(list(self._index), dtype="U40")
            vecs = np.stack(self._rows).astype(np.float32)
            tmp = self.path.with_name(self.path.name + ".tmp.npz")
            np.savez(tmp, keys=keys, vectors=vecs, model_id=np.array(self.model_id))
            os.replace(tmp, self.path)
            self._dirty = False


def live_embedder() -> Any:
    """The default model exactly as the Service builds it (256 tokens, 1 thread, batch 32)."""
    from superchargedb.models.embedder import make_embedder
    from superchargedb.settings import Settings

    s = Settings()
    return make_embedder(
        s.embedder,
        max_tokens=s.embed_max_tokens,
        threads=s.embed_threads,
        batch_size=s.embed_batch_size,
        cache_size=0,
    )


def open_cache(name: str, cache_dir: Path = CACHE_DIR) -> EmbedCache:
    cache = EmbedCache(cache_dir / f"{name}.npz")
    if cache.model_id is None:  # no cache yet: the live model tells its id and dimension
        emb = live_embedder()
        cache.model_id, cache.dim = emb.model_id, emb.dim
    return cache


def make_caching_embedder(cache: EmbedCache, allow_live: bool = True) -> Any:
    """An Embedder that serves vectors from ``cache`` and embeds (then caches) only misses.

    Tokenization (chunking, counting) uses the same bundled tokenizer as the live model. The live
    model is loaded on the first miss only, and the seconds spent in it are counted in
    ``live_s`` so that callers can report ingest with and without embedding.
    """
    from superchargedb.models.embedder import BUNDLED_TOKENIZER, _Base

    class CachingEmbedder(_Base):
        def __init__(self) -> None:
            super().__init__(BUNDLED_TOKENIZER, 0)
            assert cache.model_id is not None and cache.dim is not None
            self.model_id = cache.model_id
            self.dim = cache.dim
            self.max_tokens = int(cache.model_id.rsplit("@", 1)[-1])
            self.hits = 0
            self.misses = 0
            self.live_s = 0.0
            self._live: Any = None
            self._live_lock = threading.Lock()

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            texts = list(texts)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            missing: list[int] = []
            for i, t in enumerate(texts):
                v = cache.get(t)
                if v is None:
                    missing.append(i)
                else:
                    out[i] = v
            self.hits += len(texts) - len(missing)
            if missing:
                if not allow_live:
                    raise KeyError(f"{len(missing)} texts are not in the embedding cache")
                with self._live_lock:
                    t0 = time.perf_counter()
                    if self._live is None:
                        self._live = live_embedder()
                    vecs = self._live.embed([texts[i] for i in missing])
                    self.live_s += time.perf_counter() - t0
                    self.misses += len(missing)
                for i, v in zip(missing, vecs, strict=True):
                    out[i] = v
                    cache.put(texts[i], v)
            return out

    return CachingEmbedder()


def embed_queries(cache: EmbedCache, texts: Sequence[str]) -> tuple[np.ndarray, list[float]]:
    """Query vectors (one call per query, as a search embeds it), and the live ms of each miss."""
    emb = None
    out = np.empty((len(texts), cache.dim or 0), dtype=np.float32)
    live_ms: list[float] = []
    for i, t in enumerate(texts):
        v = cache.get(t)
        if v is None:
            if emb is None:
                emb = live_embedder()
                emb.embed(["warm-up"])
            t0 = time.perf_counter()
            v = emb.embed([t])[0]
            live_ms.append((time.perf_counter() - t0) * 1000)
            cache.put(t, v)
        out[i] = v
    return out, live_ms
