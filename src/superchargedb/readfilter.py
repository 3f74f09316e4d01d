"""What a read may see: the one visibility rule and the ``ReadFilter`` value that carries it.

A Unit is readable when its scope lies within one of the effective scopes AND the reader is its
``acl_owner`` or shares one of its ``acl_groups`` (D-5). Scope containment is on the ``/``
boundary, never a string prefix (D-2). A read request's filter adds the planes its tier allows,
modalities, doc ids, an event-time window and an ACL filter.

This module is the reference form of the rule. Storage renders a ``ReadFilter`` into its own
form (SQL, a signature mask, index tokens) and the contract tests check each rendering against
:meth:`ReadFilter.admits`. Auth builds the filter once per request; everything below carries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .schemas import AegisQuery
    from .types import Principal

# A modality list that matches nothing (a filter's modalities disjoint from the query's).
NO_MODALITY = "\0"


def scope_within(inner: str, outer: str) -> bool:
    """True when ``inner`` equals ``outer`` or lies below it on a ``/`` boundary."""
    return inner == outer or inner.startswith(outer + "/")


def ancestors(scope: str) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b", "a/b/c"]`` (self included)."""
    parts = scope.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def within_any(scope: str, outers: Iterable[str]) -> bool:
    return any(scope_within(scope, o) for o in outers)


def may_read(
    scopes: Iterable[str],
    name: str,
    groups: Iterable[str],
    scope: str,
    owner: str,
    unit_groups: Iterable[str],
) -> bool:
    """The visibility rule on plain values: scope containment and the ACL, both legs."""
    if not within_any(scope, scopes):
        return False
    return owner == name or not set(groups).isdisjoint(unit_groups)


@dataclass(frozen=True)
class ReadFilter:
    """Everything that decides which Units one read may touch, built once per request.

    ``modalities`` empty means any; ``(NO_MODALITY,)`` means none (the query's and the filter's
    modalities are disjoint). ``time_lo_ms`` inclusive, ``time_hi_ms`` exclusive, on ``event_at``.
    """

    principal: str
    scopes: tuple[str, ...]
    groups: frozenset[str]
    planes: tuple[str, ...]
    modalities: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    time_lo_ms: int | None = None
    time_hi_ms: int | None = None
    acl_owner: str | None = None
    acl_groups: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        principal: Principal,
        scopes: Sequence[str],
        planes: Sequence[str],
        q: AegisQuery | None = None,
    ) -> ReadFilter:
        """The filter of a read by ``principal`` over its effective ``scopes`` and ``planes``,
        narrowed by the query's modalities and filters when given."""
        if q is None:
            return cls(principal.name, tuple(scopes), frozenset(principal.groups), tuple(planes))
        f = q.filters
        mods = list(q.modalities or [])
        if f is not None and f.modalities():
            mods = [m for m in f.modalities() or [] if not q.modalities or m in q.modalities] or [
                NO_MODALITY
            ]
        lo = hi = None
        owner = None
        fgroups: frozenset[str] = frozenset()
        docs: tuple[str, ...] = ()
        if f is not None:
            docs = tuple(f.doc_ids() or ())
            if f.time is not None:
                lo, hi = f.time.bounds_ms()
            if f.acl is not None:
                owner = f.acl.owner
                fgroups = frozenset(f.acl.groups or ())
        return cls(
            principal=principal.name,
            scopes=tuple(scopes),
            groups=frozenset(principal.groups),
            planes=tuple(planes),
            modalities=tuple(mods),
            doc_ids=docs,
            time_lo_ms=lo,
            time_hi_ms=hi,
            acl_owner=owner,
            acl_groups=fgroups,
        )

    @property
    def index_only(self) -> bool:
        """True when every condition is one a lexical/vector index's signature holds (no doc
        ids, no time window): such a filter can be answered from the index alone."""
        return not self.doc_ids and self.time_lo_ms is None and self.time_hi_ms is None

    def admits(
        self,
        *,
        scope: str,
        owner: str,
        groups: Iterable[str],
        plane: str,
        modality: str,
        doc_id: str | None = None,
        event_at: int | None = None,
    ) -> bool:
        """The reference predicate: may this read touch a Unit with these fields?"""
        groups = frozenset(groups)
        if not may_read(self.scopes, self.principal, self.groups, scope, owner, groups):
            return False
        if plane not in self.planes:
            return False
        if self.modalities and modality not in self.modalities:
            return False
        if self.doc_ids and doc_id not in self.doc_ids:
            return False
        if self.time_lo_ms is not None and (event_at is None or event_at < self.time_lo_ms):
            return False
        if self.time_hi_ms is not None and (event_at is None or event_at >= self.time_hi_ms):
            return False
        if self.acl_owner is not None and owner != self.acl_owner:
            return False
        return not self.acl_groups or not self.acl_groups.isdisjoint(groups)
