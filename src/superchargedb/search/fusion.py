"""Reciprocal rank fusion (D-27): one dense list, one lexical list, k=60."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def rrf(
    lists: Sequence[Sequence[K]], k: int = 60, tiebreak: dict[K, str] | None = None
) -> list[tuple[K, float]]:
    """Fuse ranked lists: ``score(d) = sum(1 / (k + rank_i(d)))`` with 1-based ranks.

    Ties are broken by ``tiebreak[d]`` (the unit_id) when given, else by the key itself, so the
    order is deterministic.
    """
    scores: dict[K, float] = {}
    for lst in lists:
        for rank, key in enumerate(lst, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    tb = tiebreak or {}
    return sorted(scores.items(), key=lambda kv: (-kv[1], tb.get(kv[0], str(kv[0]))))
