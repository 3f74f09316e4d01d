"""Retrieval quality of our Service on any BEIR-layout folder: BM25, dense and hybrid RRF.

Runs in-process through the real ingest and search path (``Service.ingest`` / ``Service.search``
as ``alice``, a fresh data dir, result cache off) and scores nDCG@10, Recall@100 and MRR@10 over
*documents* (chunk hits aggregated by best rank, D-70), with the published baselines
of $SCDB_EVAL_DIR/README.md beside ours. "hybrid + rerank" is reported as not run: no real
reranker is configured offline, and the search trace says so.

Embeddings are computed once per text with the default model (MiniLM-L6 int8, 256 tokens) and
cached under ``bench/results/cache/<dataset>.npz``; the Service is given a caching embedder, so a
second run of the same dataset ingests without re-embedding. The vectors are the model's, so the
scores are the same as with live embedding. bench/peers.py reuses the cache and the helpers here.

    .venv/bin/python bench/quality.py --dataset $SCDB_EVAL_DIR/classic-adi
    .venv/bin/python bench/quality.py --dataset $SCDB_EVAL_DIR/scifact --limit-docs 1000 \\
        --limit-queries 100

Writes ``<out>/quality.json`` and ``<out>/quality.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EVAL_DIR = Path(os.environ.get("SCDB_EVAL_DIR", "/work/shared/eval"))
CACHE_DIR = Path(os.environ.get("SCDB_BENCH_CACHE") or REPO / "bench" / "results" / "cache")
MODES = ("lexical", "dense", "hybrid")
BATCH = 64  # documents per ingest call
QUALITY_TOP_K = 1000  # chunk hits per query, so Recall@100 over documents is meaningful
PRINCIPAL_KEY = "aegis_sk_alice"
BASE_SCOPE = "acme/alpha/bench"  # alice's grant is acme/alpha

# Published test-split baselines ($SCDB_EVAL_DIR/README.md), by dataset folder name.
BASELINES: dict[str, list[dict[str, Any]]] = {
    "scifact": [
        {
            "system": "BM25 flat (Lucene, k1=0.9, b=0.4)",
            "compare_to": "lexical",
            "ndcg@10": 0.6789,
            "recall@100": 0.9253,
            "source": "Pyserini 2cr/beir.yaml",
        },
        {
            "system": "BM25 multifield (BEIR paper setup)",
            "compare_to": "lexical",
            "ndcg@10": 0.6647,
            "recall@100": 0.9076,
            "source": "Pyserini; BEIR paper (Thakur et al. 2021)",
        },
        {
            "system": "all-MiniLM-L6-v2 (dense)",
            "compare_to": "dense",
            "ndcg@10": 0.6451,
            "recall@100": 0.925,
            "source": "MTEB results",
        },
        {
            "system": "bge-small-en-v1.5 (dense)",
            "compare_to": "dense",
            "ndcg@10": 0.7127,
            "recall@100": 0.945,
            "source": "MTEB results",
        },
        {
            "system": "RRF(BM25 flat, bge-base-en-v1.5), k=60",
            "compare_to": "hybrid",
            "ndcg@10": 0.7420,
            "recall@100": 0.9767,
            "source": "Pyserini docs/experiments-beir-fusion.md",
        },
        {
            "system": "txtai hybrid (its published BEIR notebook)",
            "compare_to": "hybrid",
            "ndcg@10": 0.713,
            "recall@100": None,
            "source": "neuml/txtai examples/48",
        },
        {
            "system": "BM25 + ms-marco-MiniLM-L-6-v2 cross-encoder rerank top-100",
            "compare_to": "hybrid+rerank",
            "ndcg@10": 0.682,
            "recall@100": None,
            "source": "BEIR repo reranking README",
        },
    ],
}


# -- data ------------------------------------------------------------------------------------


def load_dataset(path: Path, split: str = "test") -> tuple[dict[str, Any], dict[str, str], Any]:
    from superchargedb.evaluation import load_beir

    return load_beir(path, split)


def select(
    corpus: dict[str, dict[str, str]],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    limit_docs: int | None,
    limit_queries: int | None,
    relevant_first: bool = True,
) -> tuple[list[str], list[str]]:
    """(doc ids to ingest, query ids to score).

    With ``limit_docs``, the selected queries' relevant documents come first (unless
    ``relevant_first`` is false), the budget is filled with other documents in file order, and
    only queries whose relevant documents were all ingested are scored.
    """
    qids = [q for q in qrels if q in queries and any(g > 0 for g in qrels[q].values())]
    if limit_queries is not None:
        qids = qids[:limit_queries]
    if limit_docs is None:
        docs = list(corpus)
    else:
        order: dict[str, None] = {}
        for q in qids if relevant_first else ():
            for d, g in qrels[q].items():
                if g > 0 and d in corpus:
                    order[d] = None
        for d in corpus:
            order[d] = None
        docs = list(order)[:limit_docs]
    ingested = set(docs)
    qids = [q for q in qids if all(d in ingested for d, g in qrels[q].items() if g > 0)]
    return docs, qids


def unit_text(doc: dict[str, str]) -> str:
    """SciFact Units are ``title + "\\n" + text`` (D-71); the same for every set."""
    return (doc.get("title") or "") + "\n" + (doc.get("text") or "")


def bucket(doc_id: str) -> int:
    """A stable 0..99 bucket per document: the unit of the 10 % / 1 % scope filters."""
    return zlib.crc32(doc_id.encode("utf-8")) % 100


def doc_scope(doc_id: str) -> str:
    b = bucket(doc_id)
    return f"{BASE_SCOPE}/t{b // 10}/u{b:02d}"


FILTERS = ("100%", "10%", "1%")


def filter_scope(level: str, u: int) -> str:
    """The query scope that selects ~``level`` of the corpus (``u`` picks the bucket)."""
    if level == "100%":
        return BASE_SCOPE
    if level == "10%":
        return f"{BASE_SCOPE}/t{u // 10}"
    if level == "1%":
        return f"{BASE_SCOPE}/t{u // 10}/u{u:02d}"
    raise ValueError(level)


# -- embedding cache -------------------------------------------------------------------------


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


# -- our service -----------------------------------------------------------------------------


def make_service(data_dir: Path, embedder: Any, **overrides: Any) -> tuple[Any, Any]:
    """(Service, alice) over a fresh ``data_dir``: result cache and rate limits off."""
    os.environ.setdefault("SCDB_AUDIT_KEY", secrets.token_hex(32))
    import superchargedb  # noqa: F401  (imports onnxruntime before usearch)
    from superchargedb.demo import seed_principals
    from superchargedb.settings import Settings
    from superchargedb.wiring import open_service

    settings = Settings(
        data_dir=data_dir,
        max_top_k=QUALITY_TOP_K,
        cache_max_bytes=0,  # every query must run, not be served from the result cache
        embed_cache_size=0,
        rate_key_rps=0,
        rate_ip_rps=0,
        job_workers=0,
        audit_anchor_file=data_dir.parent / f"{data_dir.name}-anchor.json",
        **overrides,
    )
    svc = open_service(settings, embedder=embedder)
    seed_principals(svc)
    return svc, svc.authenticate(f"Bearer {PRINCIPAL_KEY}")


def ingest_docs(
    svc: Any,
    principal: Any,
    corpus: dict[str, dict[str, str]],
    docs: Sequence[str],
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    stored = 0
    t0 = time.perf_counter()
    for i in range(0, len(docs), BATCH):
        batch = docs[i : i + BATCH]
        units = [{"text": unit_text(corpus[d]), "doc_id": d, "scope": doc_scope(d)} for d in batch]
        out = svc.ingest(principal, {"units": units})
        for d, res in zip(batch, out["results"], strict=True):
            if not res.get("ok"):
                raise RuntimeError(f"ingest of doc {d} failed: {res.get('error')}")
            stored += len(res.get("unit_ids") or []) or 1
        if progress is not None:
            progress(len(batch))
    secs = time.perf_counter() - t0
    return {"docs": len(docs), "units": stored, "seconds": secs}


def stage_ms(trace: dict[str, Any], name: str) -> float:
    for s in trace.get("stages", []):
        if s.get("stage") == name and not s.get("skipped"):
            return float(s["ms"])
    return 0.0


def pct(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "mean": round(float(a.mean()), 3),
        "n": len(values),
    }


def score(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    from superchargedb.evaluation import mrr_at_k, ndcg_at_k, recall_at_k

    qids = list(rankings)
    out = {
        "ndcg@10": statistics.fmean(ndcg_at_k(rankings[q], qrels[q], 10) for q in qids),
        "recall@100": statistics.fmean(recall_at_k(rankings[q], qrels[q], 100) for q in qids),
        "mrr@10": statistics.fmean(mrr_at_k(rankings[q], qrels[q], 10) for q in qids),
    }
    for k, v in out.items():
        if math.isnan(v):
            raise RuntimeError(f"{k} is NaN")
    return {k: round(v, 4) for k, v in out.items()}


def git_commit() -> str:
    """The checkout's short commit, or "unknown"."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "unknown"


def environment() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    commit = git_commit()
    return {
        "git_commit": commit,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": load,
    }


# -- the quality benchmark -------------------------------------------------------------------


def warm_cache(
    dataset: Path, split: str, docs: Sequence[str], cache_dir: Path = CACHE_DIR
) -> dict[str, Any]:
    """Embed (once) every text the Service embeds when ingesting ``docs``; fast when cached.

    Runs a throwaway ingest into a temp dir with the caching embedder, so that a measured run
    afterwards finds every vector in the cache (no model in its process, no embedding time).
    """
    corpus, _, _ = load_dataset(dataset, split)
    cache = open_cache(dataset.resolve().name, cache_dir)
    emb = make_caching_embedder(cache)
    tmp = Path(tempfile.mkdtemp(prefix="scdb-bench-warm-"))
    try:
        svc, alice = make_service(tmp / "data", emb)
        try:
            ing = ingest_docs(svc, alice, corpus, docs)
        finally:
            svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cache.save()
    return {"units": ing["units"], "embedded_live": emb.misses, "live_s": round(emb.live_s, 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from superchargedb.evaluation import aggregate_docs

    tqdm = _tqdm()
    name = args.dataset.resolve().name
    corpus, queries, qrels = load_dataset(args.dataset, args.split)
    docs, qids = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
    if not qids:
        raise SystemExit("no query has all its relevant documents ingested; raise --limit-docs")
    print(f"{name}: {len(docs)} docs to ingest, {len(qids)} queries", file=sys.stderr)
    cache = open_cache(name, args.cache_dir)
    emb = make_caching_embedder(cache)
    qvecs, q_live = embed_queries(cache, [queries[q] for q in qids])
    del qvecs  # the Service embeds queries itself (served from the same cache)
    tmp = Path(tempfile.mkdtemp(prefix="scdb-bench-quality-"))
    try:
        svc, alice = make_service(tmp / "data", emb)
        try:
            with tqdm(total=len(docs), desc="ingest", unit="doc", file=sys.stderr) as bar:
                ing = ingest_docs(svc, alice, corpus, docs, bar.update)
            cache.save()
            modes: dict[str, Any] = {}
            for mode in MODES:
                rankings: dict[str, list[str]] = {}
                wall: list[float] = []
                embed_ms: list[float] = []
                for qid in tqdm(qids, desc=f"search {mode}", unit="q", file=sys.stderr):
                    body = {"q": queries[qid], "top_k": QUALITY_TOP_K, "mode": mode}
                    t0 = time.perf_counter()
                    out = svc.search(alice, body, query_scope=BASE_SCOPE)
                    wall.append((time.perf_counter() - t0) * 1000)
                    assert out["trace"]["cache"] == "miss"
                    embed_ms.append(stage_ms(out["trace"], "embed"))
                    rankings[qid] = aggregate_docs(out["hits"])
                modes[mode] = {
                    **score(rankings, qrels),
                    "queries": len(qids),
                    "latency_ms": {
                        "in_process": pct(wall),
                        "excluding_embed": pct(
                            [w - e for w, e in zip(wall, embed_ms, strict=True)]
                        ),
                    },
                }
            probe = svc.search(
                alice, {"q": queries[qids[0]], "top_k": 10, "rerank": True}, query_scope=BASE_SCOPE
            )
            rr = [s for s in probe["trace"]["stages"] if s.get("stage") == "rerank"]
            rerank_reason = (rr[0].get("skipped") if rr else None) or "no rerank stage in trace"
            ingest_live = emb.live_s
        finally:
            svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cache.save()
    base = BASELINES.get(name, [])
    return {
        "benchmark": "quality",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "bench/quality.py " + " ".join(args.argv),
        "dataset": {
            "name": name,
            "path": str(args.dataset),
            "split": args.split,
            "docs": len(docs),
            "units": ing["units"],
            "queries_scored": len(qids),
            "limited": args.limit_docs is not None or args.limit_queries is not None,
        },
        "config": {
            "unit_text": 'title + "\\n" + text',
            "top_k": QUALITY_TOP_K,
            "batch_docs": BATCH,
            "scope": BASE_SCOPE,
            "embedder": cache.model_id,
            "embedding": "cached per text (same model; misses embedded live)",
        },
        "environment": environment(),
        "ingest": {
            "seconds": round(ing["seconds"], 3),
            "live_embedding_s": round(ingest_live, 3),
            "docs_per_s_excluding_embedding": round(
                ing["docs"] / max(ing["seconds"] - ingest_live, 1e-9), 2
            ),
        },
        "query_embedding_live_ms": pct(q_live),
        "modes": modes,
        "hybrid+rerank": {"ran": False, "reason": rerank_reason},
        "baselines": base,
    }


def fmt(v: float | None, nd: int = 3) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def markdown(r: dict[str, Any]) -> str:
    ds = r["dataset"]
    lines = [
        f"# Retrieval quality: {ds['name']}",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit"
        f" `{r['environment']['git_commit']}`, {r['environment']['cpus']} CPUs, load average"
        f" {r['environment']['loadavg']}).",
        "",
        f"- {ds['docs']} documents ({ds['units']} stored Units), {ds['queries_scored']} queries"
        f" of split `{ds['split']}`"
        + (" (**limited run: not comparable to published numbers**)" if ds["limited"] else "")
        + ".",
        f"- In-process `Service.search`, `top_k={r['config']['top_k']}`, chunk hits aggregated"
        " to documents by best rank. Hybrid is RRF (k=60) of the dense and BM25 legs.",
        f"- Embedder `{r['config']['embedder']}`; vectors cached per text.",
        "",
        "| mode | nDCG@10 | Recall@100 | MRR@10 | p50 / p95 ms (in-process) |",
        "|---|---|---|---|---|",
    ]
    for mode in MODES:
        m = r["modes"][mode]
        lat = m["latency_ms"]["in_process"]
        lines.append(
            f"| {mode} | {fmt(m['ndcg@10'])} | {fmt(m['recall@100'])} | {fmt(m['mrr@10'])}"
            f" | {fmt(lat['p50'], 1)} / {fmt(lat['p95'], 1)} |"
        )
    lines.append(f"| hybrid + rerank | not run: {r['hybrid+rerank']['reason']} | | | |")
    lines += ["", "## Published baselines", ""]
    if not r["baselines"]:
        lines.append(f"No published baseline for `{ds['name']}` in /work/shared/eval/README.md.")
    else:
        lines += [
            "| system | nDCG@10 | Recall@100 | ours (same leg) nDCG@10 / Recall@100 | source |",
            "|---|---|---|---|---|",
        ]
        for b in r["baselines"]:
            ours = r["modes"].get(b["compare_to"])
            cell = (
                f"{b['compare_to']}: {fmt(ours['ndcg@10'])} / {fmt(ours['recall@100'])}"
                if ours
                else f"{b['compare_to']}: not run"
            )
            lines.append(
                f"| {b['system']} | {fmt(b['ndcg@10'])} | {fmt(b['recall@100'])} | {cell}"
                f" | {b['source']} |"
            )
    return "\n".join(lines) + "\n"


def _tqdm() -> Any:
    from tqdm import tqdm

    return tqdm


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, default=EVAL_DIR / "scifact")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument(
        "--warm-cache-only",
        action="store_true",
        help="only fill the embedding cache for the selected documents (used by peers.py)",
    )
    args = ap.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    if args.warm_cache_only:
        corpus, queries, qrels = load_dataset(args.dataset, args.split)
        docs, _ = select(corpus, queries, qrels, args.limit_docs, args.limit_queries)
        print(json.dumps(warm_cache(args.dataset, args.split, docs, args.cache_dir)))
        return 0
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.json").write_text(json.dumps(report, indent=2) + "\n")
    md = markdown(report)
    (args.out / "quality.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'quality.json'} and {args.out / 'quality.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
