"""What the side-by-side benchmark measures: systems, cells (mode x filter x concurrency)."""

from __future__ import annotations

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


def rounds_of(n: int, rounds: int) -> list[list[int]]:
    rounds = max(1, min(rounds, n))
    return [list(range(n))[r::rounds] for r in range(rounds)]
