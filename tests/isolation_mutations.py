"""Known isolation bugs, injected from the tests by replacing one rule function.

Production code has no switch for them: :func:`inject` swaps the function for a buggy one in
every ``superchargedb`` module that holds it (``from x import f`` binds the name in the
importer too), through pytest's ``monkeypatch`` so the swap is undone after the test.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from superchargedb import readfilter
from superchargedb.auth import acl
from superchargedb.search import cache
from superchargedb.storage.sqlite import filter_sql


def _like_prefix_sql(col: str, scopes: Sequence[str]) -> tuple[str, list[object]]:
    """``scope LIKE t || '%'``: ``acme/alpha`` also matches ``acme/alphabet``."""
    parts = [f"{col} LIKE ?" for _ in scopes]
    return "(" + (" OR ".join(parts) or "0") + ")", [s + "%" for s in scopes]


def _like_prefix_within(inner: str, outer: str) -> bool:
    return inner.lower().startswith(outer.lower())


def _ancestor_sql(col: str, scopes: Sequence[str]) -> tuple[str, list[object]]:
    """Right containment, plus every ancestor of a scope (a child grant reads its parents)."""
    parts: list[str] = []
    params: list[object] = []
    for s in scopes:
        parts.append(f"({col} = ? OR ({col} >= ? AND {col} < ?))")
        params.extend([s, s + "/", s + "0"])
        for a in readfilter.ancestors(s)[:-1]:
            parts.append(f"{col} = ?")
            params.append(a)
    return "(" + (" OR ".join(parts) or "0") + ")", params


def _ancestor_within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer + "/") or outer.startswith(inner + "/")


_real_cache_key = cache.cache_key


def _cache_groups_only(
    endpoint: str, query: Any, scopes: Any, principal: Any, gens: Any, v: str, rf: Any = None
) -> str:
    """A key on groups alone: two principals with the same groups share entries."""
    anon = dataclasses.replace(principal, id="-", perms=frozenset())
    anon_rf = None if rf is None else dataclasses.replace(rf, principal="-")
    return _real_cache_key(endpoint, query, scopes, anon, gens, v, anon_rf)


def _cache_no_generations(
    endpoint: str, query: Any, scopes: Any, principal: Any, gens: Any, v: str, rf: Any = None
):
    """A key without generations: a re-permission serves the old response."""
    return _real_cache_key(endpoint, query, scopes, principal, {}, v, rf)


def _destroy_by_acl_alone(principal: Any, unit: Any) -> bool:
    """The old rule: the ACL decides, the read permission is forgotten."""
    if not readfilter.within_any(str(unit["scope"]), principal.scopes):
        return False
    return unit["acl_owner"] == principal.name or bool(acl.unit_groups(unit) & principal.groups)


# mutation -> [(module holding the real function, its name, the buggy replacement)]
MUTATIONS: dict[str, list[tuple[Any, str, Callable[..., Any]]]] = {
    "like_prefix": [
        (filter_sql, "scope_sql", _like_prefix_sql),
        (readfilter, "scope_within", _like_prefix_within),
    ],
    "ancestor": [
        (filter_sql, "scope_sql", _ancestor_sql),
        (readfilter, "scope_within", _ancestor_within),
    ],
    "cache_groups_only": [(cache, "cache_key", _cache_groups_only)],
    "cache_no_generations": [(cache, "cache_key", _cache_no_generations)],
    "destroy_without_read": [(acl, "may_destroy", _destroy_by_acl_alone)],
    "add_any_group": [(acl, "may_add_groups", lambda principal, old, new: True)],
}


def inject(monkeypatch: pytest.MonkeyPatch, mutation: str) -> None:
    """Replace the rule(s) of ``mutation`` wherever a ``superchargedb`` module holds them."""
    for home, name, bug in MUTATIONS[mutation]:
        real = getattr(home, name)
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("superchargedb") and (
                getattr(mod, name, None) is real
            ):
                monkeypatch.setattr(mod, name, bug)
