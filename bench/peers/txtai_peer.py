"""txtai as its docs recommend: ``Embeddings(hybrid=True, content=True)`` over the given vectors,
filters as SQL, searches serialized by one lock as its own API server does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.peers.units import Queries, load_units, rss_now_mb


def _dist_version(name: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "?"


class Txtai:
    name = "txtai"

    def __init__(self, work: Path) -> None:
        self.work = work
        import txtai

        self.version = getattr(txtai, "__version__", None) or _dist_version("txtai")
        self._lock: threading.Lock | None = None

    def config(self) -> dict[str, Any]:
        cfg = {k: v for k, v in self.emb.config.items() if k != "transform"}
        return {
            "api": "txtai.Embeddings in-process",
            "embeddings_config": json.loads(json.dumps(cfg, default=str)),
            "vectors": "method=external: a transform that looks our precomputed vectors up",
            "ingest": "one Embeddings.index() over all Units (its bulk path), then save()",
            "hybrid": "txtai default: BM25 terms index, normalized, convex fusion weight 0.5",
            "filters": "SQL: select ... from txtai where similar(:q) and scope_t = '...'"
            " (candidates = 10 x limit by default, then the SQL filter)",
            "threads": "searches serialized by one lock, as txtai.app.Application does"
            if self._lock is not None
            else "concurrent calls on one Embeddings (unlocked)",
        }

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        from txtai import Embeddings

        units = load_units(self.work)
        q = Queries(self.work)
        lookup: dict[str, np.ndarray] = {}
        for t, v in zip(units["text"].tolist(), units["vector"], strict=True):
            lookup[t] = v
        for t, v in zip(q.texts, q.vectors, strict=True):
            lookup.setdefault(t, v)

        def transform(texts: Sequence[str]) -> np.ndarray:
            return np.stack([lookup[t] for t in texts])

        rss0 = rss_now_mb()
        self.emb = Embeddings(
            {"method": "external", "transform": transform, "hybrid": True, "content": True}
        )
        docs = (
            (
                uid,
                {
                    "text": text,
                    "doc_id": d,
                    "scope": s,
                    "scope_t": st,
                    "scope_u": su,
                },
                None,
            )
            for uid, d, text, s, st, su in zip(
                units["id"].tolist(),
                units["doc_id"].tolist(),
                units["text"].tolist(),
                units["scope"].tolist(),
                units["scope_t"].tolist(),
                units["scope_u"].tolist(),
                strict=True,
            )
        )
        t0 = time.perf_counter()
        self.emb.index(docs)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.emb.save(str(self.work / "txtai-index"))
        index_s = time.perf_counter() - t0
        # txtai's own API server (txtai.app.Application) runs every search under one lock;
        # concurrent searches on one Embeddings crashed this process (SIGSEGV) in a trial.
        if not msg.get("txtai_unlocked"):
            self._lock = threading.Lock()
        return {
            "docs": len(set(units["doc_id"].tolist())),
            "units": int(self.emb.count()),
            "ingest_s": ingest_s,
            "index_s": index_s,
            "index_note": "index() builds BM25 + ANN + content store in one call (counted as"
            " ingest); this is save() to disk",
            "rss_before_load_mb": rss0,
        }

    def search(
        self, q: Queries, qi: int, mode: str, level: str, top_k: int
    ) -> tuple[list[tuple[str, str]], float]:
        weight = {"hybrid": "", "dense": ", 1.0", "lexical": ", 0.0"}[mode]
        where = f"similar(:q{weight})"
        if level != "100%":
            col = "scope_t" if level == "10%" else "scope_u"
            where += f" and {col} = '{q.scope(qi, level)}'"
        sql = f"select id, doc_id, scope, text, score from txtai where {where} limit {top_k}"
        if self._lock is not None:
            with self._lock:
                rows = self.emb.search(sql, parameters={"q": q.texts[qi]})
        else:
            rows = self.emb.search(sql, parameters={"q": q.texts[qi]})
        return [(r["doc_id"], r["scope"]) for r in rows], 0.0

    def close(self) -> None:
        self.emb.close()
