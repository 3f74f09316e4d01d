"""Scope grammar, the one prefix rule, and clamping a request scope to grants.

A scope is 1-8 ``/``-separated segments matching ``[a-z0-9][a-z0-9._-]{0,62}`` with no ``.``/``..``
segment (D-1). Nothing is ever normalized: anything else is rejected.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import ScopeForbiddenError, ValidationError
from ..readfilter import ancestors, scope_within, within_any

__all__ = [
    "SCOPE_PATTERN",
    "ancestors",
    "check_scope",
    "clamp",
    "is_valid_scope",
    "scope_within",
    "within_any",
]

_SEGMENT = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
# The whole grammar as one pattern (declared in OpenAPI for headers and query parameters).
SCOPE_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}(/[a-z0-9][a-z0-9._-]{0,62}){0,7}$"
MAX_SEGMENTS = 8


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
