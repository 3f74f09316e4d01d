"""LanceDB as its docs recommend: native FTS, BITMAP scope indexes, prefiltered where(), hybrid
fused by RRFReranker(K=60), cosine; an ANN index only from ``--lancedb-ann-min-rows`` rows."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common.service import BATCH
from bench.peers.cells import LANCEDB_ANN_MIN_ROWS
from bench.peers.units import Queries, load_units, rss_now_mb, unit_batches


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
