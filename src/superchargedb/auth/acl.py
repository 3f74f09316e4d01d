"""The one visibility predicate (DECISIONS 5), rendered as SQL for every read path.

A Unit is readable when its scope lies within one of the effective scopes AND the caller is its
``acl_owner`` or shares one of its ``acl_groups``. Scope containment is a range test on the
``/`` boundary, never ``LIKE`` (DECISIONS 2): ``scope = t OR (scope >= t||'/' AND scope < t||'0')``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
