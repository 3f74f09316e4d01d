"""The caller's visibility predicate over the lexical index's signatures, vectorized.

Every document of the derived lexical index carries a *signature* (scope, plane, modality, owner,
groups); "may this caller read it" depends on nothing else the index holds. Corpora have few
signatures (10,000 for 100 scopes x 100 groups) but fewer still distinct values per field (100
scopes, 100 group sets), so the predicate is decided once per distinct value, in Python, with the
same rule as the reference predicate (``readfilter.within_any``), and combined over all
signatures with numpy gathers. Evaluating it signature by signature in Python was ~50 ms per
new scope at 10,000 signatures, most of a 1 %-filter search.

:class:`Visibility` is hashable (it is its own cache key) and callable on one signature (the
reference form, used by the tests to check the vectorized one).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...readfilter import ReadFilter, within_any

Signature = tuple[str, str, str, str, tuple[str, ...]]  # scope, plane, modality, owner, groups


class _Column:
    """Distinct values of one signature field and each signature's code into them."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._code: dict[Any, int] = {}
        self.codes = np.zeros(0, dtype=np.int32)

    def extend(self, vals: list[Any]) -> None:
        add = np.empty(len(vals), dtype=np.int32)
        for i, v in enumerate(vals):
            c = self._code.get(v)
            if c is None:
                c = self._code[v] = len(self.values)
                self.values.append(v)
            add[i] = c
        self.codes = np.concatenate([self.codes, add])

    def ok(self, test: Callable[[Any], bool]) -> np.ndarray:
        """``test`` of every signature's value (decided once per distinct value)."""
        per_value = np.fromiter((test(v) for v in self.values), dtype=bool, count=len(self.values))
        return per_value[self.codes]


class SigColumns:
    """Columnar view of an append-only signature list (one :class:`_Column` per field).

    ``sync`` follows one index epoch; a new epoch (the index was reset and rebuilt) starts over,
    so a code can never point at another generation's signature.
    """

    _PARTS = 64  # cached per-signature results of one predicate part (1 byte a signature)

    def __init__(self) -> None:
        self._epoch = -1
        self.cols = [_Column() for _ in range(5)]
        # Per-signature results of the two halves of a predicate, for the signatures as they
        # are now: the caller's ACL/plane/modality half is the same for all its queries, the
        # scope half for all queries in one scope. Deciding them again per distinct value was
        # most of a cold mask (each query of the 1 % bench cell has a scope of its own).
        self._parts: OrderedDict[Hashable, np.ndarray] = OrderedDict()

    @property
    def n(self) -> int:
        return len(self.cols[0].codes)

    def sync(self, sigs: list[Signature], epoch: int, n: int) -> None:
        """Take in signatures ``sigs[self.n:n]`` of the index in ``epoch`` (caller holds the
        index's read lock)."""
        if epoch != self._epoch or n < self.n:
            self._epoch, self.cols = epoch, [_Column() for _ in range(5)]
            self._parts.clear()
        if n > self.n:
            new = sigs[self.n : n]
            for j, col in enumerate(self.cols):
                col.extend([s[j] for s in new])
            self._parts.clear()  # results cover the old signatures only

    def part(self, key: Hashable, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` over the current signatures, cached under ``key`` until they change
        (a new epoch or new signatures; signatures themselves never change)."""
        got = self._parts.get(key)
        if got is None or len(got) != self.n:
            got = compute()
            self._parts[key] = got
            while len(self._parts) > self._PARTS:
                self._parts.popitem(last=False)
        return got


@dataclass(frozen=True)
class Visibility:
    """A ``ReadFilter``'s visibility, plane and modality/ACL filters, on signatures."""

    scopes: tuple[str, ...]
    name: str
    groups: frozenset[str]
    planes: frozenset[str]
    mods: frozenset[str]  # empty: any modality
    f_owner: str | None
    f_groups: frozenset[str] | None  # None or empty: no group filter

    @classmethod
    def of(cls, rf: ReadFilter, planes: Iterable[str] | None = None) -> Visibility:
        """``rf`` on signatures, over ``planes`` (default: the filter's own)."""
        return cls(
            scopes=rf.scopes,
            name=rf.principal,
            groups=rf.groups,
            planes=frozenset(rf.planes if planes is None else planes),
            mods=frozenset(rf.modalities),
            f_owner=rf.acl_owner,
            f_groups=rf.acl_groups or None,
        )

    def __call__(self, s: Signature) -> bool:
        scope, plane, modality, owner, sig_groups = s
        return (
            plane in self.planes
            and (not self.mods or modality in self.mods)
            and (owner == self.name or not self.groups.isdisjoint(sig_groups))
            and (self.f_owner is None or owner == self.f_owner)
            and (not self.f_groups or not self.f_groups.isdisjoint(sig_groups))
            and within_any(scope, self.scopes)
        )

    def over(self, sc: SigColumns) -> np.ndarray:
        """The predicate of every signature in ``sc`` (bool, length ``sc.n``): the scope half
        and the rest, each cached in ``sc`` under the fields it reads."""
        acl = sc.part(("acl", *self._acl_fields()), lambda: self._acl_over(sc))
        scopes = sc.part(("scope", self.scopes), lambda: self._scope_over(sc))
        return acl & scopes

    def _acl_fields(self) -> tuple[Hashable, ...]:
        return (
            self.name,
            self.groups,
            self.planes,
            self.mods,
            self.f_owner,
            self.f_groups,
        )

    def _scope_over(self, sc: SigColumns) -> np.ndarray:
        return sc.cols[0].ok(lambda s: within_any(s, self.scopes))

    def _acl_over(self, sc: SigColumns) -> np.ndarray:
        _, plane, modality, owner, groups = sc.cols
        ok = plane.ok(lambda p: p in self.planes)
        if self.mods:
            ok &= modality.ok(lambda m: m in self.mods)
        ok &= owner.ok(lambda o: o == self.name) | groups.ok(
            lambda g: not self.groups.isdisjoint(g)
        )
        if self.f_owner is not None:
            ok &= owner.ok(lambda o: o == self.f_owner)
        if self.f_groups:
            fg = self.f_groups
            ok &= groups.ok(lambda g: not fg.isdisjoint(g))
        return ok

    @property
    def key(self) -> Hashable:
        return self
