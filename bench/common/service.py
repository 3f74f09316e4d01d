"""Our Service in-process as the quality benchmarks drive it: fresh data dir, alice, no caches."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common.data import doc_scope, unit_text

BATCH = 64  # documents per ingest call
QUALITY_TOP_K = 1000  # chunk hits per query, so Recall@100 over documents is meaningful
PRINCIPAL_KEY = "aegis_sk_alice"


def make_service(data_dir: Path, embedder: Any, **overrides: Any) -> tuple[Any, Any]:
    """(Service, alice) over a fresh ``data_dir``: result cache and rate limits off."""
    os.environ.setdefault("SCDB_AUDIT_KEY", secrets.token_hex(32))
    import superchargedb  # noqa: F401  (imports onnxruntime before usearch)
    from superchargedb.demo import seed_principals
    from superchargedb.settings import Settings

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
    try:
        from superchargedb.wiring import open_service
    except ImportError:  # a source tree from before the wiring (an A/B's older arm)
        from superchargedb.service import Service

        svc = Service(settings, embedder=embedder)
    else:
        svc = open_service(settings, embedder=embedder)
    seed_principals(svc)
    return svc, svc.authenticate(f"Bearer {PRINCIPAL_KEY}")


def embedded(svc: Any) -> Any:
    """The embedded (SQLite) backend behind ``svc``: its catalog, index sync and vector store,
    for a benchmark that looks inside them rather than through a Protocol."""
    from superchargedb.storage.sqlite.backend import SqliteBackend

    backend = svc.parts.backend
    if not isinstance(backend, SqliteBackend):
        raise TypeError(f"this benchmark reads the embedded backend, not {type(backend)}")
    return backend


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
