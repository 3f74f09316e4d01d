"""What the parent prepares before the children load: query vectors and filter buckets, the
scale Units, the embedding cache; and a live embedding sample between phases."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.data import bucket
from bench.common.embedcache import embed_queries, live_embedder, open_cache
from bench.common.stats import pct


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
    work: Path,
    n: int,
    n_queries: int,
    cache_dir: Path,
    max_docs: int | None = None,
    eval_dir: Path | None = None,
) -> tuple[list[str], list[str], dict[str, Any]]:
    """The first ``n`` Units of bench/scale_data.py with their vectors, for every system (peers:
    ``units.npz``; ours: ``scale_units.jsonl`` + ``scale_vectors.npy`` for the bulk import), and
    the SciFact test claims (real embeddings) as queries, each with its filter bucket.
    ``max_docs`` (smoke runs) draws the text and vector pool from fewer source documents, so a
    cold embedding cache costs seconds, not the whole pool's minutes."""
    from bench import scale_data as SD

    data = SD.ScaleData.load(eval_dir, cache_dir=cache_dir, max_docs=max_docs)
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


def warm_embedding_cache(args: Any) -> dict[str, Any]:
    """Fill the embedding cache in a separate process (``bench.quality --warm-cache-only``), so
    that our measured child never loads the model or embeds (a cold cache would inflate its
    ingest time and peak RSS)."""
    import subprocess
    import sys

    from bench.common.proc import child_env, module_cmd

    print("embedding cache: warming (embeds only texts not cached yet) ...", file=sys.stderr)
    t0 = time.perf_counter()
    limits = ["--limit-docs", str(args.limit_docs)] if args.limit_docs is not None else []
    limits += ["--limit-queries", str(args.limit_queries)] if args.limit_queries else []
    warm = subprocess.run(
        module_cmd(
            "quality",
            "--warm-cache-only",
            "--dataset",
            str(args.dataset),
            "--split",
            args.split,
            "--cache-dir",
            str(args.cache_dir),
            *limits,
        ),
        capture_output=True,
        text=True,
        env=child_env(),
    )
    if warm.returncode != 0:
        raise SystemExit(f"warming the embedding cache failed:\n{warm.stderr[-3000:]}")
    info: dict[str, Any] = json.loads(warm.stdout.strip().splitlines()[-1])
    info["seconds"] = round(time.perf_counter() - t0, 2)
    return info
