"""The one visibility predicate (D-5), rendered as SQL for every read path, and the
rules for destroying and re-permissioning Units.

A Unit is readable when its scope lies within one of the effective scopes AND the caller is its
``acl_owner`` or shares one of its ``acl_groups``. Scope containment is a range test on the
``/`` boundary, never ``LIKE`` (D-2): ``scope = t OR (scope >= t||'/' AND scope < t||'0')``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from ..types import Principal
from . import scopes as scopes_mod


def scope_sql(col: str, scopes: Sequence[str]) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    for s in scopes:
        if "like_prefix" in scopes_mod.MUTATIONS:  # test-only injected bug
            parts.append(f"{col} LIKE ?")
            params.append(s + "%")
            continue
        parts.append(f"({col} = ? OR ({col} >= ? AND {col} < ?))")
        params.extend([s, s + "/", s + "0"])
        if "ancestor" in scopes_mod.MUTATIONS:  # test-only injected bug
            for a in scopes_mod.ancestors(s)[:-1]:
                parts.append(f"{col} = ?")
                params.append(a)
    return "(" + (" OR ".join(parts) or "0") + ")", params


def acl_sql(alias: str, owner: str, groups: Iterable[str]) -> tuple[str, list[object]]:
    groups = sorted(set(groups))
    if not groups:
        return f"{alias}.acl_owner = ?", [owner]
    marks = ",".join("?" * len(groups))
    return (
        f"({alias}.acl_owner = ? OR EXISTS (SELECT 1 FROM unit_groups g"
        f" WHERE g.unit = {alias}.id AND g.grp IN ({marks})))",
        [owner, *groups],
    )


def visible_sql(
    alias: str, scopes: Sequence[str], owner: str, groups: Iterable[str]
) -> tuple[str, list[object]]:
    s_sql, s_params = scope_sql(f"{alias}.scope", scopes)
    a_sql, a_params = acl_sql(alias, owner, groups)
    return f"{s_sql} AND {a_sql}", s_params + a_params


def unit_groups(unit: Mapping[str, Any]) -> set[str]:
    """A Unit row's groups: the catalog keeps them as a JSON list."""
    raw = unit["acl_groups"]
    return set(orjson.loads(raw) if isinstance(raw, str | bytes) else raw)


def may_destroy(principal: Principal, unit: Mapping[str, Any]) -> bool:
    """Whether ``principal`` may delete, replace or re-permission ``unit`` (a catalog row).

    Its own Units within its scopes, with or without ``read``; anyone else's only when it can read
    them (the ACL and the ``read`` permission): a write key must not destroy what it cannot see,
    nor learn from a 200-vs-404 which ids exist. Callers answer a refusal as a missing Unit.
    """
    if principal.is_operator:
        return True
    if not scopes_mod.within_any(str(unit["scope"]), principal.scopes):
        return False
    if unit["acl_owner"] == principal.name:
        return True
    return principal.has("read") and bool(unit_groups(unit) & principal.groups)


def may_add_groups(principal: Principal, old: Iterable[str], new: Iterable[str]) -> bool:
    """Whether ``principal`` may move an ACL from groups ``old`` to ``new``.

    A writer (an admin too) adds only groups it belongs to; removing groups is always allowed.
    Otherwise a key with no groups could publish into any group's answers, cited as supported.
    """
    if principal.is_operator:
        return True
    return set(new) - set(old) <= principal.groups
