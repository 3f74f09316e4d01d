"""The request scope: ``X-Aegis-Scope`` or ``?scope=``, read by this one function on every route.

Reads, writes, deletes, single-Unit and object routes all take the scope the same way, so a
write cannot land outside the scope its caller named (``?scope=`` used to be ignored by ingest).
"""

from __future__ import annotations

import dataclasses

from fastapi import Header, Query, Request

from ..auth.scopes import SCOPE_PATTERN
from ..errors import ValidationError
from ..service import Service
from ..types import Principal


def request_scope(
    request: Request,
    x_aegis_scope: str | None = Header(default=None, pattern=SCOPE_PATTERN),
    scope: str | None = Query(default=None, pattern=SCOPE_PATTERN),
) -> str | None:
    """The scope this request names, or None; a FastAPI dependency of every scoped route.

    Two values for one setting are ambiguous, so a repeated header or parameter and a header
    that disagrees with the parameter are each a 422 (the first or last would be a guess).
    """
    if len(request.headers.getlist("x-aegis-scope")) > 1:
        raise ValidationError("X-Aegis-Scope is repeated", field="X-Aegis-Scope")
    if len(request.query_params.getlist("scope")) > 1:
        raise ValidationError("?scope= is repeated", field="scope")
    if x_aegis_scope is not None and scope is not None and x_aegis_scope != scope:
        raise ValidationError("X-Aegis-Scope and ?scope= disagree", field="scope")
    return x_aegis_scope if x_aegis_scope is not None else scope


def narrowed(svc: Service, principal: Principal, scope: str | None) -> Principal:
    """``principal`` seeing only the request scope (clamped to its grants; 403 when disjoint):
    routes that address one Unit or object by id find nothing outside it, as for a missing id."""
    if scope is None:
        return principal
    scopes = tuple(svc.request_scope(principal, scope, None))
    return dataclasses.replace(principal, scopes=scopes)
