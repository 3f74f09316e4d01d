"""The rules for destroying and re-permissioning Units.

Reading is decided by the one visibility rule in ``readfilter.py`` (rendered by storage);
these are the write-side rules, one function each, so a test can replace one to prove the
isolation checks catch its bug.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ..readfilter import within_any
from ..types import Principal


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
    if not within_any(str(unit["scope"]), principal.scopes):
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
