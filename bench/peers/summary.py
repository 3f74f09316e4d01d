"""The headline comparisons: ours / peer per number, and ours against the faster peer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
