"""Which tenants the current request acts for: the context row-level security is entered with.

The API's gate sets it once a principal is authenticated (the roots of its scopes, D-263); a
backend that enforces tenancy in the database (PostgreSQL's row-level security) reads it when
it hands out a connection. Nothing set means the process itself acts (start-up, the worker's
job runner, the operator's commands): those are not confined. ``as_system`` marks the few
places inside a request that must see across tenants on purpose (a principal's quota over all
its scopes, the object collector's blob references) so that each is one visible line.

The tenants also say which cluster a request's statements go to when tenants are spread over
several databases (``storage/postgres/router.py``, D-277): ``as_system`` lifts the row-level
confinement but keeps that route (the unconfined read still runs on the request's own
cluster); ``as_process`` drops both, for the operator's few deployment-wide reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ACTING: ContextVar[tuple[str, ...] | None] = ContextVar("scdb_acting_tenants", default=None)
_ROUTE: ContextVar[tuple[str, ...] | None] = ContextVar("scdb_route_tenants", default=None)


def tenant_of(scope: str) -> str:
    """The tenant a scope belongs to: its first segment (``acme/eng`` -> ``acme``)."""
    return scope.split("/", 1)[0]


def _tenants(scopes: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({tenant_of(s) for s in scopes if s}))


def act_for(scopes: Iterable[str]) -> None:
    """Confine the rest of this context (one request) to the tenants of ``scopes``."""
    tenants = _tenants(scopes)
    _ACTING.set(tenants)
    _ROUTE.set(tenants)


def acting_tenants() -> tuple[str, ...] | None:
    """The tenants the current context acts for; None when the process acts for itself."""
    return _ACTING.get()


def routed_tenants() -> tuple[str, ...] | None:
    """The tenants whose cluster the current context's statements go to (kept under
    ``as_system``); None when the process acts for itself."""
    return _ROUTE.get()


@contextmanager
def acting_for(scopes: Iterable[str]) -> Iterator[None]:
    """``act_for`` for a block only (a queued job run for its tenant, the demo's seeding,
    tests)."""
    tenants = _tenants(scopes)
    token, route = _ACTING.set(tenants), _ROUTE.set(tenants)
    try:
        yield
    finally:
        _ROUTE.reset(route)
        _ACTING.reset(token)


@contextmanager
def as_system() -> Iterator[None]:
    """A block that reads across tenants on purpose (see the module's docstring)."""
    token = _ACTING.set(None)
    try:
        yield
    finally:
        _ACTING.reset(token)


@contextmanager
def as_process() -> Iterator[None]:
    """A block that acts for the whole deployment: unconfined and on no one cluster (the
    operator's audit verification over every chain)."""
    token, route = _ACTING.set(None), _ROUTE.set(None)
    try:
        yield
    finally:
        _ROUTE.reset(route)
        _ACTING.reset(token)
