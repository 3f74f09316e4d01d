"""What every child reads from the shared work dir: the queries, the Units and their vectors;
and its own memory."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.data import filter_scope


def rss_now_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


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
