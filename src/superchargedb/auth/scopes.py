"""Scope grammar, the one prefix rule, and clamping a request scope to grants.

A scope is 1-8 ``/``-separated segments matching ``[a-z0-9][a-z0-9._-]{0,62}`` with no ``.``/``..``
segment (D-1). Nothing is ever normalized: anything else is rejected.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ..errors import ScopeForbiddenError, ValidationError

_SEGMENT = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
# The whole grammar as one pattern (declared in OpenAPI for headers and query parameters).
SCOPE_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}(/[a-z0-9][a-z0-9._-]{0,62}){0,7}$"
MAX_SEGMENTS = 8

# Test-only mutation switches (D-50): each injects a known isolation bug so the
# property tests can prove they catch it. Never set outside tests.
MUTATIONS: set[str] = set()


def is_valid_scope(scope: object) -> bool:
    if not isinstance(scope, str) or not scope or len(scope) > 512:
        return False
    parts = scope.split("/")
    if len(parts) > MAX_SEGMENTS:
        return False
    return all(p not in (".", "..") and _SEGMENT.fullmatch(p) for p in parts)


def check_scope(scope: object, what: str = "scope") -> str:
    if not is_valid_scope(scope):
        raise ValidationError(
            f"invalid {what}: 1-8 '/'-separated lowercase segments [a-z0-9][a-z0-9._-]*",
            field=what,
        )
    assert isinstance(scope, str)
    return scope


def scope_within(inner: str, outer: str) -> bool:
    """True when ``inner`` equals ``outer`` or lies below it on a ``/`` boundary."""
    if "like_prefix" in MUTATIONS:  # emulates `scope LIKE outer || '%'`
        return inner.lower().startswith(outer.lower())
    if "ancestor" in MUTATIONS and outer.startswith(inner + "/"):
        return True
    return inner == outer or inner.startswith(outer + "/")


def ancestors(scope: str) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b", "a/b/c"]`` (self included)."""
    parts = scope.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def within_any(scope: str, outers: Iterable[str]) -> bool:
    return any(scope_within(scope, o) for o in outers)


def clamp(requested: str, grants: Iterable[str]) -> list[str]:
    """Clamp a request scope to the grants inside it (D-3, D-4).

    A request inside a grant searches exactly the request; a broader request searches the grants it
    contains; a disjoint one is a 403.
    """
    grants = list(grants)
    if within_any(requested, grants):
        return [requested]
    inner = sorted({g for g in grants if scope_within(g, requested)})
    if not inner:
        raise ScopeForbiddenError("scope is outside your grants")
    # Drop grants nested under another clamped grant: they add nothing.
    return [g for g in inner if not any(g != o and scope_within(g, o) for o in inner)]


def scope_token(scope: str) -> str:
    """One FTS token for a scope (unicode61 would split on '/', '.', '-')."""
    return "s" + hashlib.sha256(b"scope\0" + scope.encode()).hexdigest()[:20]


def owner_token(owner: str) -> str:
    return "o" + hashlib.sha256(b"owner\0" + owner.encode()).hexdigest()[:20]


def group_token(group: str) -> str:
    return "g" + hashlib.sha256(b"group\0" + group.encode()).hexdigest()[:20]


def acl_tokens(scope: str, owner: str, groups: Iterable[str]) -> str:
    """The text of the FTS ``acl`` column for a Unit (D-24)."""
    toks = [scope_token(a) for a in ancestors(scope)]
    toks.append(owner_token(owner))
    toks.extend(group_token(g) for g in sorted(set(groups)))
    return " ".join(toks)
