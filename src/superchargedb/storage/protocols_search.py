"""The search path's view of storage: the two legs under one ``ReadFilter``, the exact re-check
and hydration, in plain types.

A search ranks thousands of candidates and returns tens, so the legs speak in ``UnitKey``s: the
backend's compact integer handle of a stored Unit (SQLite: the catalog row's key; PostgreSQL:
the units table's bigint id). A key is only meaningful to the store that gave it and only for
the search that asked; what leaves the search is the hydrated :class:`HitRow`.

One :class:`SearchView` is one consistent read: the filter is rendered once, the legs and the
hydration read the same snapshot and the same applied outbox watermark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ..readfilter import ReadFilter
from ..types import Locator, Vector

UnitKey = int


class HitRow(NamedTuple):
    """What a hit shows of its Unit (a tuple: hydration builds up to a few hundred a search)."""

    unit_id: str
    scope: str
    doc_id: str
    modality: str
    plane: str
    source_uri: str | None
    mime: str | None
    text: str
    locator: Locator | None
    link: str | None  # the object URL at the exact spot (``#page=`` / ``#t=``), if any


@dataclass(frozen=True)
class Leg:
    """One leg's ranking, best first. ``checked``: every key is known to pass the exact filter
    now; False when it came from a derived index that may trail the catalog (an ACL change
    committed but not yet applied), so the search re-checks what it keeps."""

    keys: list[UnitKey]
    detail: str
    checked: bool = True
    # False: read on a node or an index that may trail the catalog (a hot standby; the
    # embedded index before it applied a worker's commit): the response is not cached, so an
    # entry keyed by the newest generations never holds an older view.
    fresh: bool = True


class SearchView(Protocol):
    def dense(self, vector: Vector, depth: int) -> Leg:
        """Nearest readable Units over the filter's planes, merged by cosine (ties by key)."""
        ...

    def lexical(self, terms: Sequence[str], depth: int, *, defer_check: bool) -> Leg:
        """BM25 over the readable Units; ``defer_check``: the caller re-checks the keys it
        keeps, so a derived index may answer unchecked (``Leg.checked`` False)."""
        ...

    def recheck(
        self, fused: Sequence[tuple[UnitKey, float]], need: int
    ) -> tuple[list[tuple[UnitKey, float]], Mapping[UnitKey, HitRow]]:
        """``fused`` with keys the exact filter rejects dropped from its first ``need``
        entries (refilled from the rest), and the hit rows of the kept ones."""
        ...

    def texts(self, keys: Sequence[UnitKey]) -> Mapping[UnitKey, str]:
        """The texts of ``keys`` (the reranker's input); keys deleted since are absent."""
        ...

    def hits(self, keys: Sequence[UnitKey]) -> Mapping[UnitKey, HitRow]:
        """Hit rows of ``keys`` (already admitted by the legs or the re-check); keys deleted
        since are absent."""
        ...


class SearchStore(Protocol):
    # Whether one view's lexical and dense legs may run at once, in two threads (each call
    # takes its own connection); a view over one connection says False.
    overlap_legs: bool

    def view(self, rf: ReadFilter) -> SearchView:
        """A consistent read for one search under ``rf``."""
        ...

    def cache_stats(self) -> tuple[int, int]:
        """The readable-candidate cache's bytes and entries (``/v1/stats``)."""
        ...
