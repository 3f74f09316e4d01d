"""The support-check result and the ``EntailmentChecker`` Protocol every checker implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["EntailmentChecker", "Support"]


@dataclass(frozen=True)
class Support:
    """``score`` lies in [0.5, 1] when supported and in [0, 0.5) otherwise; ``reasons`` names
    every failed guard (empty when supported)."""

    supported: bool
    score: float
    reasons: tuple[str, ...] = ()


@runtime_checkable
class EntailmentChecker(Protocol):
    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        """``cited``: texts of the passages the sentence cites (spans or whole passages);
        ``others``: the other numbered passages the synthesizer saw."""
        ...
