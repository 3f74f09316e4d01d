"""Side by side, same run: our Service vs LanceDB (native hybrid) vs txtai (hybrid), in-process.

Every system runs in its own subprocess (``peers.py --child SYSTEM``), so each peak RSS
(``ru_maxrss``) is its own, and is driven by the parent over a pipe (one JSON line per command).

* **Same Units, same vectors.** Our Service ingests the documents (``title + "\\n" + text``, 64
  per call) through its real ingest path; the Units it stores (chunks, with the title line for
  later chunks) and their vectors are exported and given to the peers, so every system indexes the
  same texts with the same MiniLM-L6 int8 vectors. Vectors come from the cache of
  bench/quality.py (computed once per text, default model); no system embeds anything while being
  measured, queries included (our Service's query embedder is served from the same cache, so its
  ``embed`` stage is a lookup). Live query embedding cost is printed on its own line.
* **Each peer configured as its docs recommend** (the configuration is printed in the report):
  LanceDB: native FTS index on the text, BITMAP scalar indexes on the scope columns, filters as
  ``where(..., prefilter=True)``, hybrid = vector + FTS fused by ``RRFReranker(K=60)``, cosine;
  no ANN index under ``--lancedb-ann-min-rows`` rows (exact scan, as its docs advise for small
  tables). txtai: ``Embeddings(hybrid=True, content=True)`` with external vectors; filters as
  SQL ``where similar(:q) and scope_t = ...``.
* **Alternating rounds.** The queries are split into rounds; in each round every cell
  (mode x filter x concurrency) runs the round's queries on every system in turn (the order
  rotates), so load noise from this shared machine hits all systems alike.
* **Filters.** Every document gets a scope ``acme/alpha/bench/t<b//10>/u<b>`` from a stable
  0..99 bucket of its id; a query filtered to ``.../t3`` sees ~10 %, to ``.../t3/u35`` ~1 %.
  Peers get ``scope_t`` / ``scope_u`` columns. Every filtered hit is checked against its filter.
* **HTTP overhead** (ours only): the same hybrid queries through ``POST /v1/search`` on a local
  uvicorn, paired per query with the in-process call; reported on its own line.

    python bench/peers.py --dataset /work/shared/eval/classic-adi
    python bench/peers.py --dataset /work/shared/eval/scifact --limit-docs 1000 --limit-queries 100

Writes ``<out>/peers.json``, ``peers.md``, ``peers_latency.png`` and
``peers_quality_latency.png``. Needs the ``bench`` extra (scripts/install_bench.sh) for the peers;
without it they are reported as not run.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.baselines import BASELINES
from bench.common.data import BASE_SCOPE, bucket, filter_scope, load_dataset, select, unit_text
from bench.common.embedcache import (
    EmbedCache,
    embed_queries,
    live_embedder,
    make_caching_embedder,
    open_cache,
)
from bench.common.env import environment
from bench.common.paths import CACHE_DIR, REPO
from bench.common.service import BATCH, PRINCIPAL_KEY, ingest_docs, make_service, stage_ms
from bench.common.stats import pct, score

SYSTEMS = ("ours", "lancedb", "txtai")
PEERS = ("lancedb", "txtai")
TOP_K = 100
LANCEDB_ANN_MIN_ROWS = 100_000
# (mode, filter, concurrency): the hybrid/100% cells carry the headline numbers.
CELLS: list[tuple[str, str, int]] = [
    ("hybrid", "100%", 1),
    ("hybrid", "100%", 8),
    ("hybrid", "10%", 1),
    ("hybrid", "1%", 1),
    ("dense", "100%", 1),
    ("lexical", "100%", 1),
]
HEADLINE = "hybrid/100%/c1"
# --scale: latency only (synthetic Units have no relevance judgments), the filtered cells first.
SCALE_CELLS: list[tuple[str, str, int]] = [
    ("hybrid", "1%", 1),
    ("hybrid", "10%", 1),
    ("hybrid", "100%", 1),
    ("hybrid", "100%", 8),
]
SCALE_IMPORT_BATCH = 20_000


def cell_key(mode: str, filt: str, c: int) -> str:
    return f"{mode}/{filt}/c{c}"


def rss_now_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# =============================================================================== children ====


class Queries:
    """What every child knows about the queries: text, vector, filter bucket."""

    def __init__(self, work: Path) -> None:
        meta = json.loads((work / "queries.json").read_text())
        self.texts: list[str] = meta["texts"]
        self.buckets: list[int] = meta["buckets"]
        self.vectors = np.load(work / "queries.npy")

    def scope(self, qi: int, level: str) -> str:
        return filter_scope(level, self.buckets[qi])


def load_units(work: Path) -> dict[str, Any]:
    with np.load(work / "units.npz", allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    if "text_utf8" in out:  # scale mode: one UTF-8 blob, not a fixed-width unicode array
        blob, off = out.pop("text_utf8").tobytes(), out.pop("text_off")
        out["text"] = np.array(
            [blob[off[i] : off[i + 1]].decode("utf-8") for i in range(len(off) - 1)], dtype=object
        )
    return out


def unit_batches(units: dict[str, Any], docs_per_batch: int) -> list[np.ndarray]:
    """Row indices of the Units of each consecutive group of ``docs_per_batch`` documents."""
    doc_ids = units["doc_id"]
    batches: list[list[int]] = []
    seen: dict[str, int] = {}
    for i, d in enumerate(doc_ids):
        if d not in seen:
            seen[d] = len(seen)
            if seen[d] % docs_per_batch == 0:
                batches.append([])
        batches[-1].append(i)
    return [np.asarray(b) for b in batches]


class Ours:
    name = "ours"

    def __init__(self, work: Path) -> None:
        self.work = work
        import superchargedb

        self.version = getattr(superchargedb, "__version__", "?")

    def config(self) -> dict[str, Any]:
        s = self.svc.settings
        return {
            "api": "superchargedb.service.Service (in-process), principal alice",
            "ingest": (
                "bulk import (superchargedb import): Units with their vectors, one each"
                if getattr(self, "scale", False)
                else f"Service.ingest, {BATCH} documents per call, chunked by the Service"
            ),
            "lexical_backend": getattr(s, "lexical_backend", "fts5"),
            "lexical": "SQLite FTS5 BM25, scope/ACL tokens pushed into the MATCH",
            "dense": "USearch f16 (HNSW; exact scan under the planner threshold)",
            "hybrid": f"RRF k={s.rrf_k}, leg depth {s.leg_depth}",
            "filters": "query scope (?scope=): subtree of acme/alpha/bench",
            "sqlite_synchronous": s.sqlite_synchronous,
            "result_cache": "off (cache_max_bytes=0)",
            "query_embedding": "served from the embedding cache (lookup); see embedding line",
            "hits": "snippets: false, as the peers return text without highlighting (the"
            " default, with snippets, is measured on its own line)",
        }

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.scale = bool(msg.get("scale"))
        if self.scale:
            return self._load_scale(msg)
        ds = Path(msg["dataset"])
        corpus, _, _ = load_dataset(ds, msg["split"])
        docs: list[str] = msg["docs"]
        cache = open_cache(ds.resolve().name, Path(msg["cache_dir"]))
        self.emb = make_caching_embedder(cache)
        self.svc, self.alice = make_service(self.work / "ours-data", self.emb)
        rss0 = rss_now_mb()
        ing = ingest_docs(self.svc, self.alice, corpus, docs)
        t0 = time.perf_counter()
        self.svc.sync.checkpoint()  # the index is built as Units are applied; this persists it
        index_s = time.perf_counter() - t0
        cache.save()
        exported = self._export(cache)
        # The peers get ready-made chunks; ours chunks inside ingest. Time the chunker alone on
        # the same texts (outside the measured ingest) to show that share.
        from superchargedb.ingest.chunking import chunk_text

        s = self.svc.settings
        t0 = time.perf_counter()
        for d in docs:
            chunk_text(unit_text(corpus[d]), self.emb, s.chunk_tokens, s.chunk_overlap_tokens)
        chunk_s = time.perf_counter() - t0
        return {
            "chunking_s_estimate": chunk_s,
            "docs": ing["docs"],
            "units": ing["units"],
            "ingest_s": ing["seconds"],
            "live_embedding_s": self.emb.live_s,
            "index_s": index_s,
            "index_note": "built incrementally during ingest; this is the index checkpoint",
            "exported_units": exported,
            "rss_before_load_mb": rss0,
        }

    def _load_scale(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The scale Units and their given vectors through the bulk import (one Unit each)."""
        from superchargedb.ingest.bulk_import import import_batches

        qv = np.load(self.work / "queries.npy")
        texts = json.loads((self.work / "queries.json").read_text())["texts"]
        cache = EmbedCache(self.work / "query-cache.npz", msg["model_id"], int(qv.shape[1]))
        for t, v in zip(texts, qv, strict=True):
            cache.put(t, v)
        self.emb = make_caching_embedder(cache, allow_live=False)  # queries: a lookup
        self.svc, self.alice = make_service(self.work / "ours-data", self.emb)
        vecs = np.load(self.work / "scale_vectors.npy", mmap_mode="r")
        n = int(vecs.shape[0])
        rss0 = rss_now_mb()
        out = import_batches(self.svc, scale_batches(self.work / "scale_units.jsonl", vecs))
        if out["created"] != n:
            raise RuntimeError(f"bulk import stored {out['created']} of {n} Units")
        return {
            "docs": n,
            "units": out["created"],
            "ingest_s": out["seconds"] - out["checkpoint_s"],
            "live_embedding_s": 0.0,
            "index_s": out["checkpoint_s"],
            "index_note": "bulk import (batches of 20,000 in one transaction each, index applied"
            " per batch); this is the final index checkpoint",
            "rss_before_load_mb": rss0,
        }

    def _export(self, cache: Any) -> int:
        conn = self.svc.catalog.reader()
        try:
            rows = conn.execute(
                "SELECT id, unit_id, doc_id, scope, plane, text, context FROM units ORDER BY id"
            ).fetchall()
        except Exception:  # an older schema without the context column
            rows = [
                (*r, "")
                for r in conn.execute(
                    "SELECT id, unit_id, doc_id, scope, plane, text FROM units ORDER BY id"
                ).fetchall()
            ]
        texts, vecs, from_index = [], [], 0
        for r in rows:
            text = f"{r[6]}\n{r[5]}" if r[6] else r[5]
            v = cache.get(text)
            if v is None:  # fall back to the vector our index holds (f16)
                v = self.svc.store.get(r[4], [r[0]])[0]
                from_index += 1
            texts.append(text)
            vecs.append(v)
        scopes = [r[3] for r in rows]
        np.savez(
            self.work / "units.npz",
            id=np.array([r[1] for r in rows]),
            doc_id=np.array([r[2] for r in rows]),
            text=np.array(texts),
            scope=np.array(scopes),
            scope_t=np.array([s.rsplit("/", 1)[0] for s in scopes]),
            scope_u=np.array(scopes),
            vector=np.stack(vecs).astype(np.float32),
        )
        self.exported_from_index = from_index
        return len(rows)

    def search(
        self, q: Queries, qi: int, mode: str, level: str, top_k: int, snippets: bool = False
    ) -> tuple[list[tuple[str, str]], float]:
        # The peers return the hit text without highlighting: so does ours here, like for like.
        body = {"q": q.texts[qi], "top_k": top_k, "mode": mode, "snippets": snippets}
        out = self.svc.search(self.alice, body, query_scope=q.scope(qi, level))
        if out["trace"]["cache"] != "miss":
            raise RuntimeError("result cache hit: the benchmark would measure the cache")
        return [(h["doc_id"], h["scope"]) for h in out["hits"]], stage_ms(out["trace"], "embed")

    def snippets(self, q: Queries, qidx: Sequence[int], top_k: int) -> dict[str, Any]:
        """Per query at the 1 % filter: our default (hits with snippets) then the benchmark's
        call (without), paired, order alternating; the first three warm up."""
        on, off = [], []
        for n, qi in enumerate([*qidx[:3], *qidx]):
            t = {}
            for snip in (True, False) if n % 2 else (False, True):
                t0 = time.perf_counter()
                self.search(q, qi, "hybrid", "1%", top_k, snippets=snip)
                t[snip] = (time.perf_counter() - t0) * 1000
            on.append(t[True])
            off.append(t[False])
        on, off = on[3:], off[3:]
        return {"with_ms": pct(on), "without_ms": pct(off), "n": len(on)}

    def http(self, q: Queries, qidx: Sequence[int], top_k: int) -> dict[str, Any]:
        """Per query: the in-process call, then the same call over HTTP (paired)."""
        import httpx
        import uvicorn

        from superchargedb.api.app import create_app

        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(self.svc), host="127.0.0.1", port=port, log_level="warning")
        )
        th = threading.Thread(target=server.run, daemon=True)
        th.start()
        url = f"http://127.0.0.1:{port}"
        inproc, over_http = [], []
        try:
            with httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {PRINCIPAL_KEY}"}, timeout=60
            ) as c:
                deadline = time.time() + 30
                while True:
                    try:
                        c.get("/healthz")
                        break
                    except httpx.TransportError:
                        if time.time() > deadline:
                            raise
                        time.sleep(0.05)
                for qi in [*qidx[:3], *qidx]:  # the first three warm the connection up
                    t0 = time.perf_counter()
                    self.search(q, qi, "hybrid", "100%", top_k, snippets=True)
                    t1 = time.perf_counter()
                    r = c.post(
                        "/v1/search",
                        params={"scope": BASE_SCOPE},
                        json={"q": q.texts[qi], "top_k": top_k, "mode": "hybrid"},
                    )
                    t2 = time.perf_counter()
                    r.raise_for_status()
                    inproc.append((t1 - t0) * 1000)
                    over_http.append((t2 - t1) * 1000)
        finally:
            server.should_exit = True
            th.join(timeout=10)
        inproc, over_http = inproc[3:], over_http[3:]
        return {
            "in_process_ms": pct(inproc),
            "http_ms": pct(over_http),
            "overhead_ms": pct([h - i for h, i in zip(over_http, inproc, strict=True)]),
            "response": f"JSON of top_k={top_k} hits with text and snippets",
        }

    def close(self) -> None:
        self.svc.close()


def scale_batches(path: Path, vecs: np.ndarray) -> Any:
    """(records, vectors) of ``SCALE_IMPORT_BATCH`` Units, read as they are imported (the
    process never holds every record: its peak RSS stays the system's own)."""
    batch: list[dict[str, Any]] = []
    i = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            batch.append(json.loads(line))
            if len(batch) == SCALE_IMPORT_BATCH:
                yield batch, vecs[i : i + len(batch)]
                i += len(batch)
                batch = []
    if batch:
        yield batch, vecs[i : i + len(batch)]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lance:
    name = "lancedb"

    def __init__(self, work: Path) -> None:
        self.work = work
        import lancedb

        self.lancedb = lancedb
        self.version = lancedb.__version__
        self.ann = "none"

    def config(self) -> dict[str, Any]:
        return {
            "api": "lancedb.connect(<dir>) embedded, one Table, in-process",
            "schema": "id, doc_id, text, scope, scope_t, scope_u (string), vector float32[dim]",
            "ingest": f"table.add() per {BATCH} documents' Units, then table.optimize()",
            "fts": "create_fts_index('text'): native, simple tokenizer, lower case, English "
            "stemming, stop words removed (defaults)",
            "scalar_indexes": "BITMAP on scope_t and scope_u (low cardinality, as its docs advise)",
            "vector_index": self.ann,
            "hybrid": "search(query_type='hybrid').vector(v).text(q).rerank(RRFReranker(K=60))",
            "metric": "cosine",
            "filters": "where(\"scope_t = '...'\", prefilter=True)",
        }

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        import pyarrow as pa

        units = load_units(self.work)
        vec = units["vector"]
        dim = int(vec.shape[1])
        schema = pa.schema(
            [
                ("id", pa.string()),
                ("doc_id", pa.string()),
                ("text", pa.string()),
                ("scope", pa.string()),
                ("scope_t", pa.string()),
                ("scope_u", pa.string()),
                ("vector", pa.list_(pa.float32(), dim)),
            ]
        )
        batches = unit_batches(units, BATCH)
        rss0 = rss_now_mb()
        db = self.lancedb.connect(str(self.work / "lancedb"))
        t0 = time.perf_counter()
        tbl = db.create_table("units", schema=schema)
        for b in batches:
            cols = {k: units[k][b].tolist() for k in ("id", "doc_id", "text", "scope")}
            cols["scope_t"] = units["scope_t"][b].tolist()
            cols["scope_u"] = units["scope_u"][b].tolist()
            flat = pa.array(vec[b].reshape(-1), type=pa.float32())
            cols["vector"] = pa.FixedSizeListArray.from_arrays(flat, dim)
            tbl.add(pa.table(cols, schema=schema))
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        tbl.optimize()
        optimize_s = time.perf_counter() - t0
        tbl.create_fts_index("text", replace=True)
        tbl.create_scalar_index("scope_t", index_type="BITMAP")
        tbl.create_scalar_index("scope_u", index_type="BITMAP")
        n = tbl.count_rows()
        if n >= int(msg.get("lancedb_ann_min_rows", LANCEDB_ANN_MIN_ROWS)):
            tbl.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ")
            self.ann = "IVF_HNSW_SQ (cosine)"
        else:
            self.ann = (
                f"none: {n} rows < {msg.get('lancedb_ann_min_rows', LANCEDB_ANN_MIN_ROWS)}"
                " (exact scan, as the docs advise for small tables)"
            )
        index_s = time.perf_counter() - t0
        self.tbl = db.open_table("units")
        return {
            "docs": len(set(units["doc_id"].tolist())),
            "units": n,
            "ingest_s": ingest_s,
            "index_s": index_s,
            "index_note": f"optimize {optimize_s:.2f} s + FTS + 2 BITMAP"
            + (" + ANN" if "IVF" in self.ann else ""),
            "rss_before_load_mb": rss0,
        }

    def search(
        self, q: Queries, qi: int, mode: str, level: str, top_k: int
    ) -> tuple[list[tuple[str, str]], float]:
        from lancedb.rerankers import RRFReranker

        text, v = q.texts[qi], q.vectors[qi]
        if mode == "hybrid":
            b = (
                self.tbl.search(query_type="hybrid", vector_column_name="vector")
                .vector(v)
                .text(text)
                .distance_type("cosine")
                .rerank(RRFReranker(K=60))
            )
        elif mode == "dense":
            b = self.tbl.search(v, vector_column_name="vector").distance_type("cosine")
        else:
            b = self.tbl.search(text, query_type="fts")
        if level != "100%":
            col = "scope_t" if level == "10%" else "scope_u"
            b = b.where(f"{col} = '{q.scope(qi, level)}'", prefilter=True)
        rows = b.select(["doc_id", "scope", "text"]).limit(top_k).to_arrow()
        return list(
            zip(rows.column("doc_id").to_pylist(), rows.column("scope").to_pylist(), strict=True)
        ), 0.0

    def close(self) -> None:
        pass


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


def _dist_version(name: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "?"


CHILD_CLASSES: dict[str, Callable[[Path], Any]] = {"ours": Ours, "lancedb": Lance, "txtai": Txtai}


def child_main(system: str, work: Path) -> int:
    # The protocol owns the real stdout; anything a library prints goes to stderr (the log).
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    t0 = time.perf_counter()
    try:
        sysobj = CHILD_CLASSES[system](work)
    except Exception as e:  # the extra is not installed, or the import fails
        reply({"ok": False, "error": f"{type(e).__name__}: {e}", "fatal": True})
        return 1
    reply(
        {
            "ok": True,
            "version": sysobj.version,
            "import_s": time.perf_counter() - t0,
            "rss_mb": rss_now_mb(),
        }
    )
    q: Queries | None = None
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        try:
            if cmd == "load":
                out = sysobj.load(msg)
                q = Queries(work)
                # As `superchargedb serve` does once open, for every system alike: what the
                # load left alive is kept out of the cyclic collector's full walks (a 74-90 ms
                # pause each at 100k Units for ours, unfrozen).
                out["gc_frozen_objects"] = freeze_heap()
                out["rss_after_load_mb"] = rss_now_mb()
                out["peak_rss_mb"] = peak_rss_mb()
                out["config"] = sysobj.config()
                reply({"ok": True, **out})
            elif cmd == "search":
                assert q is not None
                reply({"ok": True, **run_cell(sysobj, q, msg)})
            elif cmd == "http":
                assert q is not None
                reply({"ok": True, **sysobj.http(q, msg["qidx"], msg["top_k"])})
            elif cmd == "snippets":
                assert q is not None
                reply({"ok": True, **sysobj.snippets(q, msg["qidx"], msg["top_k"])})
            elif cmd == "stats":
                reply({"ok": True, "peak_rss_mb": peak_rss_mb(), "rss_mb": rss_now_mb()})
            elif cmd == "quit":
                sysobj.close()
                reply({"ok": True})
                return 0
            else:
                reply({"ok": False, "error": f"unknown command {cmd}"})
        except Exception as e:
            traceback.print_exc()
            reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
    return 0


def freeze_heap() -> int:
    """``superchargedb.memstats.freeze_heap`` (not imported: a peer's child need not load ours)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(c: int) -> ThreadPoolExecutor:
    """One long-lived pool per concurrency, as a server keeps its worker threads (per-thread
    state such as our SQLite reader connections stays warm across batches)."""
    if c not in _POOLS:
        _POOLS[c] = ThreadPoolExecutor(max_workers=c, thread_name_prefix=f"bench-c{c}")
    return _POOLS[c]


def run_cell(sysobj: Any, q: Queries, msg: dict[str, Any]) -> dict[str, Any]:
    """One cell on one batch of queries: per-request latency, rankings, filter checks."""
    mode, level, c, top_k = msg["mode"], msg["filter"], int(msg["c"]), int(msg["top_k"])
    qidx: list[int] = msg["qidx"]
    # At concurrency c the batch is cycled to at least 4 * c requests.
    reqs = list(qidx)
    while c > 1 and len(reqs) < 4 * c:
        reqs += qidx
    results: dict[int, Any] = {}

    def one(i: int) -> tuple[float, float]:
        qi = reqs[i]
        t0 = time.perf_counter()
        hits, embed_ms = sysobj.search(q, qi, mode, level, top_k)
        ms = (time.perf_counter() - t0) * 1000
        results[i] = hits
        return ms, embed_ms

    t0 = time.perf_counter()
    if c == 1:
        timed = [one(i) for i in range(len(reqs))]
    else:
        timed = list(_pool(c).map(one, range(len(reqs))))
    wall = time.perf_counter() - t0
    violations = 0
    n_hits = []
    for i, hits in results.items():
        scope = q.scope(reqs[i], level)
        violations += sum(1 for _, s in hits if not (s == scope or s.startswith(scope + "/")))
        n_hits.append(len(hits))
    out: dict[str, Any] = {
        "ms": [t[0] for t in timed],
        "embed_ms": [t[1] for t in timed],
        "wall_s": wall,
        "requests": len(reqs),
        "violations": violations,
        "n_hits": n_hits,
        "rss_mb": rss_now_mb(),
    }
    if msg.get("want_docs"):
        from_first: dict[int, list[str]] = {}
        for i, qi in enumerate(reqs[: len(qidx)]):
            from_first[qi] = list(dict.fromkeys(d for d, _ in results[i]))
        out["docs"] = {str(k): v for k, v in from_first.items()}
    return out


# ================================================================================= parent ====


class ChildError(RuntimeError):
    pass


class Child:
    def __init__(self, system: str, work: Path, log_dir: Path) -> None:
        self.system = system
        self.log_path = log_dir / f"{system}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in close())
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", system, "--work", str(work)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise ChildError(f"{self.system} exited ({self.proc.returncode}):\n{self.log_tail()}")
        out: dict[str, Any] = json.loads(line)
        if not out.get("ok"):
            raise ChildError(f"{self.system}: {out.get('error')}\n{self.log_tail(15)}")
        return out

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ChildError, OSError, ValueError):
                self.call(cmd="quit")
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()


def prepare_queries(
    work: Path, name: str, cache_dir: Path, texts: list[str], docs: list[str]
) -> dict[str, Any]:
    """Query vectors (cached) and each query's filter bucket, among the buckets that have docs."""
    cache = open_cache(name, cache_dir)
    vecs, live_ms = embed_queries(cache, texts)
    cache.save()
    nonempty = sorted({bucket(d) for d in docs})
    buckets = [nonempty[(i * 37) % len(nonempty)] for i in range(len(texts))]
    np.save(work / "queries.npy", vecs)
    (work / "queries.json").write_text(json.dumps({"texts": texts, "buckets": buckets}))
    return {"live_ms": live_ms, "model_id": cache.model_id}


def prepare_scale(
    work: Path, n: int, n_queries: int, cache_dir: Path, max_docs: int | None = None
) -> tuple[list[str], list[str], dict[str, Any]]:
    """The first ``n`` Units of bench/scale_data.py with their vectors, for every system (peers:
    ``units.npz``; ours: ``scale_units.jsonl`` + ``scale_vectors.npy`` for the bulk import), and
    the SciFact test claims (real embeddings) as queries, each with its filter bucket.
    ``max_docs`` (smoke runs) draws the text and vector pool from fewer source documents, so a
    cold embedding cache costs seconds, not the whole pool's minutes."""
    from bench import scale_data as SD

    data = SD.ScaleData.load(cache_dir=cache_dir, max_docs=max_docs)
    recs: list[dict[str, Any]] = []
    vecs = []
    with open(work / "scale_units.jsonl", "w", encoding="utf-8") as fh:
        for r, v in data.batches(n):
            for rec in r:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            recs += [{"doc_id": x["doc_id"], "text": x["text"], "scope": x["scope"]} for x in r]
            vecs.append(v)
    v16 = np.concatenate(vecs)
    np.save(work / "scale_vectors.npy", v16)
    blob = [x["text"].encode("utf-8") for x in recs]
    off = np.zeros(len(blob) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(b) for b in blob])
    scopes = [x["scope"] for x in recs]
    np.savez(
        work / "units.npz",
        id=np.array([x["doc_id"] for x in recs]),
        doc_id=np.array([x["doc_id"] for x in recs]),
        text_utf8=np.frombuffer(b"".join(blob), dtype=np.uint8),
        text_off=off,
        scope=np.array(scopes),
        scope_t=np.array([sc.rsplit("/", 1)[0] for sc in scopes]),
        scope_u=np.array(scopes),
        vector=v16.astype(np.float32),
    )
    qs = data.queries(("scifact",))[:n_queries]
    np.save(work / "queries.npy", np.stack([q.vector for q in qs]).astype(np.float32))
    (work / "queries.json").write_text(
        json.dumps({"texts": [q.text for q in qs], "buckets": [q.bucket for q in qs]})
    )
    return (
        [q.qid for q in qs],
        [x["doc_id"] for x in recs],
        {"live_ms": [], "model_id": data.model_id},
    )


def qmeta_texts(work: Path) -> list[str]:
    texts: list[str] = json.loads((work / "queries.json").read_text())["texts"]
    return texts


def live_embedding_sample(queries: list[str], unit_texts: list[str]) -> dict[str, Any]:
    """What embedding costs, measured here (in the parent, between phases) on a small sample:
    per query as a search embeds it, and Units in batches as ingest does."""
    emb = live_embedder()
    emb.embed(["warm-up"])
    q_ms = []
    for t in queries:
        t0 = time.perf_counter()
        emb.embed([t])
        q_ms.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    emb.embed(unit_texts)
    secs = time.perf_counter() - t0
    return {
        "query_ms": pct(q_ms),
        "units": len(unit_texts),
        "units_per_s": round(len(unit_texts) / secs, 2) if unit_texts else None,
    }


def rounds_of(n: int, rounds: int) -> list[list[int]]:
    rounds = max(1, min(rounds, n))
    return [list(range(n))[r::rounds] for r in range(rounds)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    cells = SCALE_CELLS if args.scale else CELLS
    if args.scale:
        name = f"scale-{args.scale}"
        qrels: dict[str, dict[str, int]] = {}
    else:
        name = args.dataset.resolve().name
        corpus, queries, qrels = load_dataset(args.dataset, args.split)
        docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
        if not qids:
            raise SystemExit("no query has all its relevant documents ingested; raise --limit-docs")
    systems = [s for s in args.systems.split(",") if s]
    systems.sort(key=lambda s: s != "ours")  # ours loads first: it exports the Units
    env_start = environment()
    print(f"{name}: systems {systems}; load average {env_start['loadavg']}", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="scdb-bench-peers-", dir=args.work_dir))
    log_dir = work / "logs"  # kept (copied to <out>/peers-logs) only if a system failed
    log_dir.mkdir()
    if args.scale:
        qids, docs, qprep = prepare_scale(
            work, args.scale, args.limit_queries or 100, args.cache_dir, args.max_docs
        )
        print(f"{name}: {len(docs)} Units, {len(qids)} queries", file=sys.stderr)
    else:
        qprep = prepare_queries(work, name, args.cache_dir, [queries[q] for q in qids], docs)
    warm_info: dict[str, Any] = {"skipped": "scale mode: vectors given"}
    if not args.scale:
        # Fill the embedding cache in a separate process first, so that our measured child never
        # loads the model or embeds (a cold cache would inflate its ingest time and peak RSS).
        print("embedding cache: warming (embeds only texts not cached yet) ...", file=sys.stderr)
        t0 = time.perf_counter()
        warm = subprocess.run(
            [
                sys.executable,
                str(Path(Q.__file__).resolve()),
                "--warm-cache-only",
                "--dataset",
                str(args.dataset),
                "--split",
                args.split,
                "--cache-dir",
                str(args.cache_dir),
                *(["--limit-docs", str(args.limit_docs)] if args.limit_docs is not None else []),
                *(["--limit-queries", str(args.limit_queries)] if args.limit_queries else []),
            ],
            capture_output=True,
            text=True,
        )
        if warm.returncode != 0:
            raise SystemExit(f"warming the embedding cache failed:\n{warm.stderr[-3000:]}")
        warm_info = json.loads(warm.stdout.strip().splitlines()[-1])
        warm_info["seconds"] = round(time.perf_counter() - t0, 2)
    report: dict[str, Any] = {
        "benchmark": "peers",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "bench/peers.py " + " ".join(args.argv),
        "dataset": {
            "name": name,
            "path": "bench/scale_data.py" if args.scale else str(args.dataset),
            "split": args.split,
            "docs": len(docs),
            "queries_scored": len(qids),
            "limited": args.limit_docs is not None or args.limit_queries is not None,
            "scale": args.scale,
        },
        "config": {
            "top_k": TOP_K,
            "batch_docs": BATCH,
            "rounds": args.rounds,
            "cells": [cell_key(*c) for c in cells],
            "embedder": qprep["model_id"],
            "filters": {
                "100%": BASE_SCOPE,
                "10%": f"{BASE_SCOPE}/t<b//10>",
                "1%": f"{BASE_SCOPE}/t<b//10>/u<b>",
            },
            "recall_note": f"Recall@100 over the documents in the top {TOP_K} Units",
        },
        "environment": env_start,
        "systems": {},
        "hybrid+rerank": {"ran": False, "reason": "no reranker configured (offline)"},
        "embedding": {
            "model": qprep["model_id"],
            "query_live_ms": pct(qprep["live_ms"]),
            "note": "excluded from every system's search latency (vectors precomputed)",
            "cache_warm": warm_info,
        },
    }
    children: dict[str, Child] = {}
    sysrep: dict[str, dict[str, Any]] = report["systems"]
    try:
        for s in systems:
            try:
                ch = Child(s, work, log_dir)
                children[s] = ch
                sysrep[s] = {
                    "ran": False,
                    "version": ch.hello["version"],
                    "import_s": round(ch.hello["import_s"], 3),
                    "rss_after_import_mb": round(ch.hello["rss_mb"], 1),
                }
            except ChildError as e:
                sysrep[s] = {"ran": False, "error": str(e).splitlines()[0]}
                print(f"{s}: not run: {e}", file=sys.stderr)
        if "ours" not in children:
            raise SystemExit(f"our system did not start: {sysrep.get('ours')}")
        # -- load: ours first (it exports the Units and vectors the peers index) --
        load_msg = {
            "cmd": "load",
            "dataset": str(args.dataset),
            "split": args.split,
            "docs": docs,
            "cache_dir": str(args.cache_dir),
            "lancedb_ann_min_rows": args.lancedb_ann_min_rows,
            "txtai_unlocked": args.txtai_unlocked,
            "scale": args.scale,
            "model_id": qprep["model_id"],
        }
        for s in list(children):
            print(f"{s}: ingest + index ...", file=sys.stderr)
            try:
                out = children[s].call(**load_msg)
            except ChildError as e:
                if s == "ours":
                    raise
                sysrep[s]["error"] = str(e).splitlines()[0]
                children.pop(s).close()
                continue
            ing_s = out["ingest_s"] - out.get("live_embedding_s", 0.0)
            sysrep[s].update(
                {
                    "config": out["config"],
                    "docs": out["docs"],
                    "units": out["units"],
                    "ingest": {
                        "seconds": round(out["ingest_s"], 3),
                        "live_embedding_s": round(out.get("live_embedding_s", 0.0), 3),
                        "chunking_s_estimate": (
                            round(out["chunking_s_estimate"], 3)
                            if "chunking_s_estimate" in out
                            else None
                        ),
                        "docs_per_s": round(out["docs"] / ing_s, 2),
                        "units_per_s": round(out["units"] / ing_s, 2),
                    },
                    "index_build_s": round(out["index_s"], 4),
                    "index_note": out["index_note"],
                    "rss_after_load_mb": round(out["rss_after_load_mb"], 1),
                    "gc_frozen_objects": out.get("gc_frozen_objects"),
                }
            )
        if "ours" in sysrep and sysrep["ours"].get("units"):
            report["dataset"]["units"] = sysrep["ours"]["units"]
        units = load_units(work)
        report["embedding"]["live_sample"] = live_embedding_sample(
            list(qmeta_texts(work))[:20], units["text"].tolist()[:64]
        )
        # -- rounds --
        batches = rounds_of(len(qids), args.rounds)
        names = list(children)
        lat: dict[str, dict[str, list[float]]] = {s: {} for s in names}
        emb_ms: dict[str, dict[str, list[float]]] = {s: {} for s in names}
        wall: dict[str, dict[str, list[tuple[int, float]]]] = {s: {} for s in names}
        ranks: dict[str, dict[str, dict[str, list[str]]]] = {s: {} for s in names}
        viol: dict[str, dict[str, int]] = {s: {} for s in names}
        fill: dict[str, dict[str, list[float]]] = {s: {} for s in names}
        rss_warm: dict[str, dict[str, float]] = {s: {} for s in names}
        failed: dict[str, str] = {}
        # Warm-up (not timed, not scored): lazy initialisation is not query latency. The
        # concurrency-1 cells first, then concurrency 8, with the RSS after each: per-thread state
        # (connections, caches) shows up as the difference.
        for s in names:
            for conc in (1, 8):
                for mode, level, c in cells:
                    if c == conc:
                        out = children[s].call(
                            cmd="search",
                            mode=mode,
                            filter=level,
                            c=c,
                            qidx=batches[0][:3],
                            top_k=TOP_K,
                        )
                        rss_warm[s][f"c{conc}"] = out["rss_mb"]
        per_bucket_units: dict[str, int] = {}
        for sc in units["scope"].tolist():
            per_bucket_units[sc] = per_bucket_units.get(sc, 0) + 1
        qmeta = json.loads((work / "queries.json").read_text())
        total = len(batches) * len(cells) * len(names)
        with tqdm(total=total, desc="rounds", unit="batch", file=sys.stderr) as bar:
            for r, batch in enumerate(batches):
                for ci, (mode, level, c) in enumerate(cells):
                    key = cell_key(mode, level, c)
                    k = (r * len(cells) + ci) % len(names)
                    order = names[k:] + names[:k]
                    for s in order:
                        bar.update(1)
                        if s in failed:
                            continue
                        try:
                            out = children[s].call(
                                cmd="search",
                                mode=mode,
                                filter=level,
                                c=c,
                                qidx=batch,
                                top_k=TOP_K,
                                want_docs=(c == 1 and level == "100%" and not args.scale),
                            )
                        except ChildError as e:
                            failed[s] = f"{key}: {str(e).splitlines()[0]}"
                            continue
                        lat[s].setdefault(key, []).extend(out["ms"])
                        emb_ms[s].setdefault(key, []).extend(out["embed_ms"])
                        wall[s].setdefault(key, []).append((out["requests"], out["wall_s"]))
                        viol[s][key] = viol[s].get(key, 0) + out["violations"]
                        if "docs" in out:
                            ranks[s].setdefault(mode, {}).update(out["docs"])
                        if level != "100%" and mode == "hybrid":
                            for qi, n in zip(batch, out["n_hits"], strict=False):
                                sc = filter_scope(level, qmeta["buckets"][qi])
                                avail = sum(
                                    v
                                    for p, v in per_bucket_units.items()
                                    if p == sc or p.startswith(sc + "/")
                                )
                                fill[s].setdefault(key, []).append(n / max(1, min(TOP_K, avail)))
        # -- HTTP overhead (ours), after its peak RSS is read --
        stats = {s: children[s].call(cmd="stats") for s in names if s not in failed}
        http = None
        if "ours" in children and "ours" not in failed:
            print("ours: HTTP overhead ...", file=sys.stderr)
            http = children["ours"].call(cmd="http", qidx=list(range(len(qids))), top_k=TOP_K)
            http.pop("ok", None)
            print("ours: snippets on / off ...", file=sys.stderr)
            snip = children["ours"].call(cmd="snippets", qidx=list(range(len(qids))), top_k=TOP_K)
            snip.pop("ok", None)
            report["snippets"] = snip
        report["http_overhead"] = http
        # -- assemble --
        for s in names:
            rep = sysrep[s]
            if s in failed:
                rep["error"] = failed[s]
                continue
            rep["ran"] = True
            rep["peak_rss_mb"] = round(stats[s]["peak_rss_mb"], 1)
            rep["latency_ms"] = {k: pct(v) for k, v in lat[s].items()}
            if s == "ours":
                rep["latency_excluding_embed_ms"] = {
                    k: pct([a - b for a, b in zip(v, emb_ms[s][k], strict=True)])
                    for k, v in lat[s].items()
                }
            rep["qps"] = {
                k: round(sum(n for n, _ in v) / sum(w for _, w in v), 2) for k, v in wall[s].items()
            }
            rep["filter_violations"] = viol[s]
            rep["rss_after_warmup_mb"] = {k: round(v, 1) for k, v in rss_warm[s].items()}
            rep["filtered_fill"] = {k: round(float(np.mean(v)), 4) for k, v in fill[s].items() if v}
            qualities: dict[str, Any] = {}
            for mode, rk in ranks[s].items():
                rk_q = {qids[int(qi)]: docs_ for qi, docs_ in rk.items()}
                qualities[mode] = score(rk_q, qrels)
            rep["quality"] = qualities
            rep["_latency_raw"] = {k: [round(x, 3) for x in v] for k, v in lat[s].items()}
        report["ratios"] = ratios(sysrep)
        report["vs_faster_peer"] = vs_faster_peer(report)
        report["environment"]["loadavg_end"] = environment()["loadavg"]
        report["baselines"] = BASELINES.get(name, [])
    finally:
        for ch in children.values():
            ch.close()
        import shutil

        if any(not rep.get("ran") for rep in sysrep.values()):
            shutil.copytree(log_dir, args.out / "peers-logs", dirs_exist_ok=True)
            print(f"child logs: {args.out / 'peers-logs'}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    return report


def ratios(sysrep: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """ours / peer for each headline number (see the report for which way is better)."""
    ours = sysrep.get("ours", {})
    out: dict[str, dict[str, float | None]] = {}
    if not ours.get("ran"):
        return out

    def get(rep: dict[str, Any], path: Sequence[str]) -> float | None:
        cur: Any = rep
        for p in path:
            if not isinstance(cur, dict) or p not in cur or cur[p] is None:
                return None
            cur = cur[p]
        return float(cur)

    metrics: dict[str, Sequence[str]] = {
        "ingest_docs_per_s": ("ingest", "docs_per_s"),
        "index_build_s": ("index_build_s",),
        "p50_c1_ms": ("latency_ms", "hybrid/100%/c1", "p50"),
        "p95_c1_ms": ("latency_ms", "hybrid/100%/c1", "p95"),
        "p99_c1_ms": ("latency_ms", "hybrid/100%/c1", "p99"),
        "p50_c8_ms": ("latency_ms", "hybrid/100%/c8", "p50"),
        "p95_c8_ms": ("latency_ms", "hybrid/100%/c8", "p95"),
        "p99_c8_ms": ("latency_ms", "hybrid/100%/c8", "p99"),
        "qps_c8": ("qps", "hybrid/100%/c8"),
        "p50_filter1pct_ms": ("latency_ms", "hybrid/1%/c1", "p50"),
        "p95_filter1pct_ms": ("latency_ms", "hybrid/1%/c1", "p95"),
        "peak_rss_mb": ("peak_rss_mb",),
        "ndcg@10_hybrid": ("quality", "hybrid", "ndcg@10"),
    }
    for peer, rep in sysrep.items():
        if peer == "ours" or not rep.get("ran"):
            continue
        row: dict[str, float | None] = {}
        for name, path in metrics.items():
            a, b = get(ours, path), get(rep, path)
            row[name] = round(a / b, 3) if a is not None and b else None
        out[peer] = row
    return out


# -- report ----------------------------------------------------------------------------------


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def markdown(r: dict[str, Any]) -> str:
    ds, env = r["dataset"], r["environment"]
    sysrep = r["systems"]
    ran = [s for s in SYSTEMS if sysrep.get(s, {}).get("ran")]
    peers = [s for s in ran if s != "ours"]
    lines = [
        f"# Side by side: ours vs {', '.join(PEERS)} on {ds['name']}",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs, Python {env['python']}). Load average at start"
        f" {env['loadavg']}, at end {env.get('loadavg_end')}: **a shared, loaded machine; the"
        " absolute latencies are pessimistic, the ratios (measured alternately) are what to"
        " read.**",
        "",
        f"- {ds['docs']} documents, {ds.get('units', '?')} Units, {ds['queries_scored']}"
        f" queries (split `{ds['split']}`)"
        + (" — **limited run, not comparable with published numbers**" if ds["limited"] else "")
        + ".",
        f"- Every system indexes the same Units with the same vectors (`{r['config']['embedder']}`,"
        " precomputed); no system embeds while measured. top_k"
        f" = {r['config']['top_k']}; {r['config']['recall_note']}.",
        f"- {r['config']['rounds']} alternating rounds; each system in its own subprocess.",
        "",
        "## Headline (hybrid)",
        "",
        "| | " + " | ".join(ran) + "".join(f" | ours/{p}" for p in peers) + " |",
        "|---|" + "---|" * (len(ran) + len(peers)),
    ]

    def row(label: str, path: Sequence[str], nd: int, ratio_key: str | None) -> None:
        cells = []
        for s in ran:
            cur: Any = sysrep[s]
            for p in path:
                cur = cur.get(p) if isinstance(cur, dict) else None
            cells.append(fmt(cur, nd))
        rat = [fmt(r["ratios"].get(p, {}).get(ratio_key), 2) if ratio_key else "" for p in peers]
        lines.append(f"| {label} | " + " | ".join(cells + rat) + " |")

    row("nDCG@10", ("quality", "hybrid", "ndcg@10"), 3, "ndcg@10_hybrid")
    row("Recall@100", ("quality", "hybrid", "recall@100"), 3, None)
    row("MRR@10", ("quality", "hybrid", "mrr@10"), 3, None)
    row("ingest docs/s (vectors given)", ("ingest", "docs_per_s"), 1, "ingest_docs_per_s")
    row("index build s", ("index_build_s",), 2, "index_build_s")
    for c in (1, 8):
        for p in ("p50", "p95", "p99"):
            row(
                f"search {p} ms, concurrency {c}",
                ("latency_ms", f"hybrid/100%/c{c}", p),
                1,
                f"{p}_c{c}_ms",
            )
    row("throughput q/s, concurrency 8", ("qps", "hybrid/100%/c8"), 1, "qps_c8")
    row("search p50 ms, 1 % filter", ("latency_ms", "hybrid/1%/c1", "p50"), 1, "p50_filter1pct_ms")
    row("search p95 ms, 1 % filter", ("latency_ms", "hybrid/1%/c1", "p95"), 1, "p95_filter1pct_ms")
    row("peak RSS MB", ("peak_rss_mb",), 0, "peak_rss_mb")
    lines += [
        "",
        "Ratios are ours / peer: above 1 means ours is larger (better for nDCG, docs/s and q/s;"
        " worse for seconds, ms and MB).",
        "",
    ]
    vs = r.get("vs_faster_peer") or {}
    a, b = vs.get("hybrid/1%/c1:p50"), vs.get("hybrid/1%/c1:p95")
    if a and b:
        lines += [
            f"**Against the faster peer, hybrid with the 1 % filter:** p50 {fmt(a['ours_ms'])} ms"
            f" vs {fmt(a['peer_ms'])} ms ({a['peer']}), ours/peer **{a['ratio']:.2f}**; p95"
            f" {fmt(b['ours_ms'])} vs {fmt(b['peer_ms'])} ms ({b['peer']}), **{b['ratio']:.2f}**"
            " (the goal, ours at least 2x faster, is a ratio of 0.5 or less).",
            "",
        ]
    snip = r.get("snippets")
    if snip and a:
        w, wo = snip["with_ms"], snip["without_ms"]
        est = a["ours_ms"] + w["p50"] - wo["p50"]
        lines += [
            f"**Our default hits, with snippets** (highlighted windows, which the peers do not"
            f" build; the cells above leave them out), 1 % filter, paired per query after the"
            f" rounds (n={snip['n']}): p50 {fmt(w['p50'])} / p95 {fmt(w['p95'])} ms against"
            f" {fmt(wo['p50'])} / {fmt(wo['p95'])} without. This line runs alone (no peer in"
            f" between, warmer caches than the rounds), so its difference is what to read: the"
            f" rounds' p50 plus it, {fmt(est)} ms, would make ours/{a['peer']}"
            f" **{est / a['peer_ms']:.2f}** with snippets.",
            "",
        ]
    http = r.get("http_overhead")
    if http:
        lines.append(
            f"**Our HTTP overhead** (same hybrid queries, `POST /v1/search` on local uvicorn,"
            f" paired per query): p50 {fmt(http['overhead_ms']['p50'])} ms,"
            f" p95 {fmt(http['overhead_ms']['p95'])} ms over the in-process call"
            f" (in-process p50 {fmt(http['in_process_ms']['p50'])} ms, HTTP p50"
            f" {fmt(http['http_ms']['p50'])} ms; {http['response']})."
        )
    e = r["embedding"]
    live = e.get("live_sample")
    if live and live.get("query_ms"):
        lines.append(
            f"\n**Embedding** (`{e['model']}`, live, 1 thread, measured between phases on a sample;"
            " not in any number above): a query takes p50"
            f" {fmt(live['query_ms']['p50'])} / p95 {fmt(live['query_ms']['p95'])} ms; Units embed"
            f" at {fmt(live['units_per_s'])} /s ({live['units']} Units in batches of 32) — the"
            " cost every system would add to ingest and search with this model."
        )
    elif e.get("query_live_ms"):
        lines.append(
            f"\n**Query embedding** (`{e['model']}`, live, one query per call, not in any number"
            f" above): p50 {fmt(e['query_live_ms']['p50'])} ms, p95"
            f" {fmt(e['query_live_ms']['p95'])} ms."
        )
    else:
        lines.append(
            f"\n**Query embedding** (`{e['model']}`): all query vectors came from the cache in"
            " this run; see bench/results/quality.json for live embedding time."
        )
    lines += [
        "",
        f"**Hybrid + rerank:** not run: {r['hybrid+rerank']['reason']}.",
        "",
        "## Every cell (p50 / p95 / p99 ms; q/s)",
        "",
        "| cell | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for key in r["config"]["cells"]:
        cells = []
        for s in ran:
            p = sysrep[s]["latency_ms"].get(key)
            q = sysrep[s]["qps"].get(key)
            cells.append(
                f"{fmt(p['p50'])} / {fmt(p['p95'])} / {fmt(p['p99'])}; {fmt(q)}" if p else "—"
            )
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    if "ours" in ran:
        ex = sysrep["ours"]["latency_excluding_embed_ms"].get(HEADLINE)
        if ex:
            lines.append(
                f"\nOurs, {HEADLINE}, trace total minus the `embed` stage: p50 {fmt(ex['p50'])}"
                f" / p95 {fmt(ex['p95'])} ms (the stage is a cache lookup here)."
            )
    lines += [
        "",
        "## Quality per leg (nDCG@10 / Recall@100 / MRR@10)",
        "",
        "| mode | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for mode in ("lexical", "dense", "hybrid"):
        cells = []
        for s in ran:
            m = sysrep[s]["quality"].get(mode)
            cells.append(
                f"{m['ndcg@10']:.3f} / {m['recall@100']:.3f} / {m['mrr@10']:.3f}" if m else "—"
            )
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    if r.get("baselines"):
        lines += ["", "Published (full SciFact test; not comparable with a limited run):", ""]
        for b in r["baselines"]:
            lines.append(
                f"- {b['system']} ({b['compare_to']}): nDCG@10 {b['ndcg@10']}, Recall@100"
                f" {b['recall@100'] if b['recall@100'] is not None else '—'} — {b['source']}"
            )
    lines += [
        "",
        "## Filters (hybrid, concurrency 1)",
        "",
        "| | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for level in ("10%", "1%"):
        key = cell_key("hybrid", level, 1)
        lines.append(
            f"| {level}: hits returned / min(top_k, Units in filter) | "
            + " | ".join(fmt(sysrep[s]["filtered_fill"].get(key), 3) for s in ran)
            + " |"
        )
    lines.append(
        "| hits outside the filter (all cells) | "
        + " | ".join(str(sum(sysrep[s]["filter_violations"].values())) for s in ran)
        + " |"
    )
    lines += ["", "## Ingest and memory", ""]
    lines += [
        "| | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for label, fn in (
        ("version", lambda s: sysrep[s]["version"]),
        ("ingest s", lambda s: fmt(sysrep[s]["ingest"]["seconds"], 2)),
        ("of which live embedding s", lambda s: fmt(sysrep[s]["ingest"]["live_embedding_s"], 2)),
        (
            "ours' chunking alone, s (peers get chunks)",
            lambda s: fmt(sysrep[s]["ingest"].get("chunking_s_estimate"), 2),
        ),
        ("Units/s (vectors given)", lambda s: fmt(sysrep[s]["ingest"]["units_per_s"], 1)),
        ("index build s", lambda s: fmt(sysrep[s]["index_build_s"], 2)),
        ("index build is", lambda s: sysrep[s]["index_note"]),
        ("RSS after import MB", lambda s: fmt(sysrep[s]["rss_after_import_mb"], 0)),
        ("RSS after load MB", lambda s: fmt(sysrep[s]["rss_after_load_mb"], 0)),
        (
            "RSS after warm-up at concurrency 1 / then 8, MB",
            lambda s: (
                f"{fmt(sysrep[s]['rss_after_warmup_mb'].get('c1'), 0)} / "
                f"{fmt(sysrep[s]['rss_after_warmup_mb'].get('c8'), 0)}"
            ),
        ),
        ("peak RSS MB", lambda s: fmt(sysrep[s]["peak_rss_mb"], 0)),
    ):
        lines.append(f"| {label} | " + " | ".join(str(fn(s)) for s in ran) + " |")
    not_ran = [s for s in SYSTEMS if s in sysrep and not sysrep[s].get("ran")]
    for s in not_ran:
        lines.append(f"\n**{s}: not run** — {sysrep[s].get('error', 'unknown reason')}")
    lines += ["", "## Configurations", ""]
    for s in ran:
        lines.append(f"**{s}** {sysrep[s]['version']}")
        lines.append("")
        for k, v in sysrep[s]["config"].items():
            lines.append(f"- {k}: `{json.dumps(v) if not isinstance(v, str) else v}`")
        lines.append("")
    lines += [
        *(f"![{p.split('_', 1)[-1].removesuffix('.png')}]({p})\n" for p in r.get("plots", [])),
    ]
    return "\n".join(lines) + "\n"


def plots(r: dict[str, Any], out: Path, prefix: str = "peers") -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    sysrep = r["systems"]
    ran = [s for s in SYSTEMS if sysrep.get(s, {}).get("ran")]
    colors = {"ours": "tab:blue", "lancedb": "tab:orange", "txtai": "tab:green"}
    keys = [k for k in r["config"]["cells"] if k.startswith("hybrid/")]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 4), sharey=True)
    for ax, key in zip(np.atleast_1d(axes), keys, strict=True):
        data = [sysrep[s]["_latency_raw"].get(key, [np.nan]) for s in ran]
        bp = ax.boxplot(data, showfliers=True, patch_artist=True, whis=(5, 95))
        for patch, s in zip(bp["boxes"], ran, strict=True):
            patch.set_facecolor(colors.get(s, "grey"))
            patch.set_alpha(0.6)
        ax.set_xticks(range(1, len(ran) + 1), ran)
        ax.set_yscale("log")
        ax.set_title(key)
        ax.grid(True, which="both", axis="y", alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("search latency, ms (log; whiskers p5-p95)")
    fig.suptitle(f"{r['dataset']['name']}: search latency per request (loaded 2-core machine)")
    fig.tight_layout()
    p1 = out / f"{prefix}_latency.png"
    fig.savefig(p1, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    markers = {"lexical": "s", "dense": "^", "hybrid": "o"}
    for s in ran:
        for mode, m in sysrep[s]["quality"].items():
            lat = sysrep[s]["latency_ms"].get(cell_key(mode, "100%", 1))
            if not lat:
                continue
            ax.scatter(
                lat["p50"],
                m["ndcg@10"],
                c=colors.get(s, "grey"),
                marker=markers.get(mode, "o"),
                s=70,
                label=f"{s} {mode}",
            )
            ax.annotate(
                f"{s}/{mode}",
                (lat["p50"], m["ndcg@10"]),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.margins(x=0.2, y=0.1)
    ax.set_xlabel("search p50, ms (concurrency 1, log)")
    ax.set_ylabel("nDCG@10")
    ax.set_title(f"{r['dataset']['name']}: quality vs latency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    p2 = out / f"{prefix}_quality_latency.png"
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return [p1.name, p2.name]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--dataset", type=Path, default=Q.EVAL_DIR / "classic-adi")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (query batches)")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--lancedb-ann-min-rows", type=int, default=LANCEDB_ANN_MIN_ROWS)
    ap.add_argument(
        "--scale",
        type=int,
        help="latency at N Units of bench/scale_data.py (bulk-loaded with their vectors) instead"
        " of a dataset; SciFact test claims as queries; writes peers_scale<N>.*",
    )
    ap.add_argument("--work-dir", type=Path, help="where the temporary data dirs go")
    ap.add_argument(
        "--max-docs",
        type=int,
        help="with --scale: source documents of the text/vector pool (smoke runs)",
    )
    ap.add_argument(
        "--txtai-unlocked",
        action="store_true",
        help="call txtai concurrently without its Application's lock (crashed in trials)",
    )
    args = ap.parse_args(argv)
    if args.child:
        assert args.work is not None
        return child_main(args.child, args.work)
    args.argv = argv if argv is not None else sys.argv[1:]
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args)
    prefix = f"peers_scale{args.scale}" if args.scale else "peers"
    report["plots"] = plots(report, args.out, prefix)
    md = markdown(report)
    raw = {s: rep.pop("_latency_raw", None) for s, rep in report["systems"].items()}
    report["latency_samples_ms"] = raw
    (args.out / f"{prefix}.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / f"{prefix}.md").write_text(md)
    if args.scale and (args.out / "peers.md").exists():
        add_scale_section(args.out / "peers.md", report, prefix)
    print(md)
    print(f"wrote {args.out}/{prefix}.json, {prefix}.md and {report['plots']}", file=sys.stderr)
    return 0


def faster_peer(r: dict[str, Any], key: str, p: str) -> tuple[str, float] | None:
    """The peer with the lowest ``p`` latency in cell ``key``, and that latency."""
    best = None
    for s, rep in r["systems"].items():
        if s == "ours" or not rep.get("ran"):
            continue
        v = (rep.get("latency_ms", {}).get(key) or {}).get(p)
        if v is not None and (best is None or v < best[1]):
            best = (s, float(v))
    return best


def vs_faster_peer(r: dict[str, Any]) -> dict[str, Any]:
    """ours / the faster peer, per filtered hybrid cell and percentile (goal at 1 %: <= 0.5)."""
    out: dict[str, Any] = {}
    ours = r["systems"].get("ours", {})
    if not ours.get("ran"):
        return out
    for key in r["config"]["cells"]:
        for p in ("p50", "p95"):
            best = faster_peer(r, key, p)
            mine = (ours["latency_ms"].get(key) or {}).get(p)
            if best and mine is not None:
                out[f"{key}:{p}"] = {
                    "ours_ms": mine,
                    "peer": best[0],
                    "peer_ms": best[1],
                    "ratio": round(mine / best[1], 3),
                }
    return out


def add_scale_section(path: Path, r: dict[str, Any], prefix: str) -> None:
    """Put (or replace) this scale run's summary in peers.md, between markers."""
    begin, end = f"<!-- {prefix} -->", f"<!-- /{prefix} -->"
    text = path.read_text()
    if begin in text and end in text:
        text = text[: text.index(begin)] + text[text.index(end) + len(end) :].lstrip("\n")
    n = r["dataset"]["scale"]
    lines = [
        begin,
        f"## At {n:,} Units (`bench/peers.py --scale {n}`, {r['generated_at']})",
        "",
        f"Same query set (SciFact test claims, vectors given), Units of bench/scale_data.py"
        f" bulk-loaded with the same vectors into every system; latency only (no relevance"
        " judgments at scale: quality is the table above)."
        f" Full report: [{prefix}.md]({prefix}.md).",
        "",
        "| hybrid cell | "
        + " | ".join(s for s in SYSTEMS if r["systems"].get(s, {}).get("ran"))
        + " | ours / faster peer (p50, p95) |",
        "|---|" + "---|" * (1 + sum(1 for s in SYSTEMS if r["systems"].get(s, {}).get("ran"))),
    ]
    vs = r.get("vs_faster_peer", {})
    for key in r["config"]["cells"]:
        cells = []
        for s in SYSTEMS:
            rep = r["systems"].get(s, {})
            if rep.get("ran"):
                lat = rep["latency_ms"].get(key)
                cells.append(f"{fmt(lat['p50'])} / {fmt(lat['p95'])}" if lat else "—")
        a, b = vs.get(f"{key}:p50"), vs.get(f"{key}:p95")
        rat = f"{a['ratio']:.2f} ({a['peer']}), {b['ratio']:.2f} ({b['peer']})" if a and b else "—"
        lines.append(f"| {key} (p50 / p95 ms) | " + " | ".join(cells) + f" | {rat} |")
    snip, a = r.get("snippets"), vs.get("hybrid/1%/c1:p50")
    if snip and a:
        w, wo = snip["with_ms"]["p50"], snip["without_ms"]["p50"]
        est = a["ours_ms"] + w - wo
        lines += [
            "",
            f"Ours returns hits without snippets here, as the peers do. Our default, with"
            f" snippets, costs {fmt(w - wo)} ms more at the 1 % filter (p50, paired per query):"
            f" ~{fmt(est)} ms, ours/{a['peer']} ~{est / a['peer_ms']:.2f} with them.",
        ]
    lines += ["", end, ""]
    path.write_text(text.rstrip("\n") + "\n\n" + "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
