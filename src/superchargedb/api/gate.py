"""Who is asking: the per-address checks, then the key lookup, once per request.

Admission control (``api/admission.py``) needs the principal before it hands out a slot, and the
route dependency needs it again; both call ``authenticate_request``, which does the work once and
keeps the result in the request's state. The order is the brute-force defence: the per-address
rate limit and the failed-authentication lockout run before the catalog is touched, and a
failed lookup drains the lockout bucket. The address is the connection's peer, or what a trusted
proxy forwarded (``api/transport.py``), never a header from anyone else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import Scope

from .. import acting, console_sessions
from ..auth.principals import MAX_KEY_CHARS, bearer_key, hash_key
from ..errors import AuthError
from ..ratelimit import limited
from ..service import Service
from ..storage.disk import STORAGE_ERRORS
from ..types import Principal

STATE_KEY = "scdb_principal"
log = logging.getLogger("superchargedb.api")


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


def authorization_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            return value.decode("latin-1")
    return None


def session_token_of(scope: Scope) -> str | None:
    """The console session cookie, counted only where the gate accepts it: a GET or HEAD of
    an API route sent without a key (a key always wins; other methods need the key, D-150)."""
    if scope.get("method") not in ("GET", "HEAD") or not scope.get("path", "").startswith("/v1/"):
        return None
    if authorization_of(scope) is not None:
        return None
    return console_sessions.cookie_of(scope.get("headers", []))


def has_credentials(scope: Scope) -> bool:
    return authorization_of(scope) is not None or session_token_of(scope) is not None


def _by_session(svc: Service, token: str) -> Principal:
    sessions = svc.auth_store.sessions
    p, due = console_sessions.lookup(sessions, token, svc.settings.console_session_idle_s)
    if due:
        try:
            console_sessions.touch(sessions, token)
        except STORAGE_ERRORS:  # a full disk must not refuse reads
            log.warning("console session last-use not recorded", exc_info=True)
    return p


async def authenticate_request(svc: Service, scope: Scope) -> Principal:
    """The request's principal, or AuthError / RateLimitedError; the lookup runs once."""
    state = scope.setdefault("state", {})
    done = state.get(STATE_KEY)
    if done is not None:
        acting.act_for(done.scopes)  # this call may run in another task's context
        return done
    s = svc.settings
    ip = client_address(scope)
    lim = svc.limiter

    async def call(fn: Callable[..., float], *args: Any) -> float:
        # A shared store is a network round trip: keep it off the event loop.
        return await run_in_threadpool(fn, *args) if lim.remote else fn(*args)

    if s.rate_ip_rps > 0:
        wait = await call(lim.take, f"ip:{ip}", s.rate_ip_rps, s.rate_ip_burst)
        if wait:
            raise limited(wait, "per client")
    fail_rate = s.rate_auth_fail_per_min / 60
    if fail_rate > 0:
        wait = await call(lim.peek, f"authfail:{ip}", fail_rate, s.rate_auth_fail_per_min)
        if wait:  # too many bad keys from here: refuse before looking anything up
            raise limited(wait, "failed authentications")
    token = session_token_of(scope)
    digest = None if token is not None else _key_digest(authorization_of(scope))
    if digest is not None and s.rate_key_rps > 0:
        # Refused a moment ago and its bucket is still empty: refused again before the lookup
        # (D-288). Only a wait is told, and only to the key's holder.
        wait = svc.refused_keys.wait(digest)
        if wait:
            raise limited(wait, "per key")
    try:
        if token is not None:
            p = await run_in_threadpool(_by_session, svc, token)
        else:
            p = await run_in_threadpool(svc.authenticate, authorization_of(scope))
    except AuthError:
        if fail_rate > 0:
            await call(lim.take, f"authfail:{ip}", fail_rate, s.rate_auth_fail_per_min)
        raise
    if s.rate_key_rps > 0:
        wait = await call(lim.take, f"key:{p.id}", s.rate_key_rps, s.rate_key_burst)
        if wait:
            if digest is not None:
                svc.refused_keys.refuse(digest, wait)
            raise limited(wait, "per key")
    state[STATE_KEY] = p
    acting.act_for(p.scopes)  # row-level security's tenants for the rest of the request
    state["principal"] = p.name  # read by the access log and usage metering
    return p


def _key_digest(authorization: str | None) -> str | None:
    key = bearer_key(authorization)
    return hash_key(key) if key and len(key) <= MAX_KEY_CHARS else None


def tenant_of(p: Principal) -> str:
    """A principal's tenant: the root of its active scope (``acme`` for ``acme/eng``)."""
    return p.active_scope.split("/", 1)[0]
