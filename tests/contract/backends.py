"""The backends the contract suite runs against, and broken variants of the embedded one.

A backend kind is a :class:`Kind`: how to open a store in a fresh directory, how to open a
second writer on the same store (another process would), and how to simulate a crash (the
process dies after a commit: nothing is flushed, checkpointed or closed cleanly). Every test in
this package runs against each kind: ``sqlite`` (the embedded default) and ``postgres`` (the
server stack: a database per store on one PostgreSQL per test session, skipped when the stack
extra is not installed).

The variants each break one rule in a copy of the SQLite backend (a subclass overriding one
step, never a switch in production code); ``test_teeth.py`` proves the suite fails on each.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import superchargedb  # noqa: F401  (onnxruntime before usearch)
from superchargedb.readfilter import ReadFilter, ancestors
from superchargedb.storage.sqlite import audit
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.catalog import Catalog
from superchargedb.storage.sqlite.filter_sql import scope_sql
from superchargedb.storage.sqlite.jobs import Job
from superchargedb.storage.sqlite.jobs import JobQueue as SqlJobQueue

DIM = 16
MODEL = "contract-test-model"
KEY = bytes(range(32))


@dataclass(frozen=True)
class Kind:
    name: str
    open: Callable[[Path], Any]
    peer: Callable[[Any], Any]  # a second writer on the same store
    crash: Callable[[Any], None]  # the process dies: nothing closed cleanly
    close_peer: Callable[[Any], None]


def sqlite_kind(
    cls: type[SqliteBackend] = SqliteBackend, lease_s: float = 300.0, lexical: str = "sparse"
) -> Kind:
    def open_(path: Path) -> SqliteBackend:
        return cls.open(
            path, dim=DIM, model_id=MODEL, audit_key=KEY, lease_s=lease_s, lexical_backend=lexical
        )

    def peer(b: SqliteBackend) -> SqliteBackend:
        # Another process's handle: its own catalog connections (SQLite's file lock orders
        # the two writers), the same files, no index of its own.
        cat = Catalog(b.catalog.path, "NORMAL")
        q = SqlJobQueue(cat, lease_s, 3, owner_kind="worker")
        return cls(cat, b.sync, b.blobs, q, KEY, MODEL)

    def crash(b: SqliteBackend) -> None:
        b.sync.close()  # joins the background vector pool; writes nothing
        b.catalog.close()
        if b._lock is not None:
            b._lock.release()

    def close_peer(p: SqliteBackend) -> None:
        p.catalog.close()  # the index is the owner's

    return Kind(cls.__name__, open_, peer, crash, close_peer)


# -- broken variants -----------------------------------------------------------------------
class IgnoresGroups(SqliteBackend):
    """The ACL leg forgotten: anything in scope is readable."""

    def _where(self, rf: ReadFilter, applied_seq: int | None) -> tuple[str, list[object]]:
        s_sql, params = scope_sql("u.scope", rf.scopes)
        where = f"{s_sql} AND u.plane IN ({','.join('?' * len(rf.planes))})"
        params += list(rf.planes)
        if applied_seq is not None:
            where += " AND u.seq <= ?"
            params.append(applied_seq)
        return where, params


def _with_scope_sql(
    rf: ReadFilter, applied_seq: int | None, scope_part: tuple[str, list[object]]
) -> tuple[str, list[object]]:
    from superchargedb.storage.sqlite.filter_sql import acl_sql

    s_sql, params = scope_part
    a_sql, a_params = acl_sql("u", rf.principal, rf.groups)
    where = f"{s_sql} AND {a_sql} AND u.plane IN ({','.join('?' * len(rf.planes))})"
    params = params + a_params + list(rf.planes)
    if applied_seq is not None:
        where += " AND u.seq <= ?"
        params.append(applied_seq)
    return where, params


class LikePrefix(SqliteBackend):
    """``scope LIKE t || '%'``: ``acme/alpha`` also reads ``acme/alphabet``."""

    def _where(self, rf: ReadFilter, applied_seq: int | None) -> tuple[str, list[object]]:
        parts = " OR ".join("u.scope LIKE ?" for _ in rf.scopes) or "0"
        return _with_scope_sql(rf, applied_seq, (f"({parts})", [s + "%" for s in rf.scopes]))


class AncestorScopes(SqliteBackend):
    """A grant also reads the Units of every ancestor scope."""

    def _where(self, rf: ReadFilter, applied_seq: int | None) -> tuple[str, list[object]]:
        s_sql, params = scope_sql("u.scope", rf.scopes)
        extra = [a for s in rf.scopes for a in ancestors(s)[:-1]]
        if extra:
            s_sql = f"({s_sql} OR u.scope IN ({','.join('?' * len(extra))}))"
            params = params + extra
        return _with_scope_sql(rf, applied_seq, (s_sql, params))


class DropsOutbox(SqliteBackend):
    """A Unit's outbox operation is lost: the derived indexes never learn of it."""

    def _insert(self, conn: Any, unit: Any, vector: Any) -> int:
        key = super()._insert(conn, unit, vector)
        conn.execute("DELETE FROM outbox WHERE op = 'add' AND key = ?", (key,))
        return key


class ClaimsTwice(SqliteBackend):
    """A claim ignores leases: a running job is handed out again at once."""

    def _claim(self) -> Job | None:
        token = secrets.token_hex(8)
        now = int(time.time() * 1000)
        with self.catalog.write() as conn:
            r = conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = ?,"
                " lease_until = ?, updated_at = ? WHERE id = (SELECT id FROM jobs"
                " WHERE state IN ('queued', 'running') ORDER BY created_at LIMIT 1) RETURNING *",
                (token, now + 300_000, now),
            ).fetchone()
        if r is None:
            return None
        return Job(
            r["id"],
            r["kind"],
            json.loads(r["payload"]),
            r["principal"],
            r["scope"],
            r["acl_owner"],
            json.loads(r["acl_groups"]),
            r["attempts"],
            r["max_attempts"],
            token,
        )


class ForksAudit(SqliteBackend):
    """Each writer chains after the head it last wrote itself (a cached head): two writers
    fork the chain."""

    _head: tuple[int, str] | None = None

    def _audit_append(self, conn: Any, actor: Any, action: str, record: dict[str, Any]) -> str:
        if self._head is None:
            row = conn.execute(
                "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            self._head = (row[0], row[1]) if row else (0, audit.GENESIS)
        last, prev = self._head
        seq = max(
            last + 1,
            int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM audit_log").fetchone()[0]) + 1,
        )
        at = int(time.time() * 1000)
        full = {**record, "seq": seq, "at": at, **audit.who(actor), "action": action}
        h = audit.chain_hash(self.audit_key, prev, full)
        conn.execute(
            "INSERT INTO audit_log(seq, prev_hash, hash, at, actor, action, record)"
            " VALUES (?,?,?,?,?,?,?)",
            (seq, prev, h, at, full["actor"], action, audit.canonical_json(full).decode()),
        )
        self._head = (seq, h)
        return h


def postgres_kind(lease_s: float = 300.0) -> Kind:
    """A database per store directory on the session's PostgreSQL (``pg_stack.py``); a peer is a
    second backend (its own pool) on the same database; a crash drops the backend's server
    sessions from the server side and abandons its pool."""
    import pg_stack

    pg_stack.server()  # skips, naming the install command, without the stack extra
    from contract.checks_reads import OPENERS, Reads
    from superchargedb.stack.postgres import bin_dir
    from superchargedb.storage.postgres.backend import PgBackend
    from superchargedb.storage.postgres.maintenance import PgMaintenance

    def reads(b: PgBackend) -> Reads:
        # A store's "data dir" is its database and its blob directory, both named by the path.
        def maintenance_at(path: Path) -> PgMaintenance:
            return PgMaintenance(pg_stack.database(path), path / "objects", bin_dir())

        return Reads(b.counts, b.job_views, maintenance_at, b.audit_trail)

    OPENERS[PgBackend] = reads

    def open_(path: Path) -> PgBackend:
        return PgBackend.open(
            pg_stack.database(path),
            dim=DIM,
            model_id=MODEL,
            audit_key=KEY,
            objects_dir=path / "objects",
            lease_s=lease_s,
        )

    def peer(b: PgBackend) -> PgBackend:
        return PgBackend.open(
            b.url,
            dim=DIM,
            model_id=MODEL,
            audit_key=KEY,
            objects_dir=b.blobs.root,
            lease_s=lease_s,
        )

    def crash(b: PgBackend) -> None:
        pg_stack.terminate(b.application_name)
        b.pool.close(timeout=1)  # its connections are dead already: nothing reaches the server

    def close_peer(p: PgBackend) -> None:
        p.close()

    return Kind("PgBackend", open_, peer, crash, close_peer)


# The embedded backend with each lexical index: the derived sparse index (whose answers the
# catalog re-checks) and FTS5 inside the catalog (where the SQL filter is the only one).
# Contract areas a backend kind does not implement yet, with the reason; their checks skip on
# it, saying so. Only the server stack's kind may be here, and the list only shrinks.
PENDING: dict[str, dict[str, str]] = {}


def skip_pending(kind: str, area: str) -> None:
    reason = PENDING.get(kind, {}).get(area)
    if reason is not None:
        pytest.skip(f"{kind}: the {area} Protocols are {reason}")


KINDS = {
    "sqlite": sqlite_kind,
    "sqlite-fts5": functools.partial(sqlite_kind, lexical="fts5"),
    "postgres": postgres_kind,
}
VARIANTS = {
    cls.__name__: cls
    for cls in (IgnoresGroups, LikePrefix, AncestorScopes, DropsOutbox, ClaimsTwice, ForksAudit)
}
