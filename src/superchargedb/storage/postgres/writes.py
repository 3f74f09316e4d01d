"""The one write transaction on PostgreSQL (``StoreTx``: ``WriteTx`` of ``protocols.py`` plus the
write side of ``protocols_writes.py``) over the open transaction's cursor.

Everything done through one ``tx`` is one PostgreSQL transaction: Units with their postings and
outbox operations, jobs, documents and quota, usage, word tables, generations, KV and the audit
record. A bulk import's batch (``import_batch``) stores the Units whose idempotency key is new,
skipping the rest in the same statement (``ON CONFLICT DO NOTHING``), and audits once (D-175).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from ...types import Principal
from ..ids import merkle_root
from ..protocols import JobRecord, JobSpec, Lease, UnitRecord, Vector
from . import audit as audit_sql
from . import jobs as jobs_sql
from . import units as units_sql
from .object_catalog import PgObjectRowsTx
from .principals import PgPrincipalWriter
from .sql import OnCursor
from .write_rows import PgDocs, PgKeyframes, PgQuota, PgUsage, PgWords


@dataclass(frozen=True)
class TxConfig:
    """What a write needs of its backend: the model its vectors are of, the audit chain's key,
    a new job's attempts."""

    model_id: str
    audit_key: bytes
    max_attempts: int


class PgTx:
    """The Protocols' ``StoreTx`` (and ``AuthTx``) over one open PostgreSQL transaction."""

    def __init__(self, c: TxConfig, cur: psycopg.Cursor[Any]) -> None:
        self.c, self.cur = c, cur
        self.sql = OnCursor(cur)

    @property
    def units(self) -> PgTx:
        return self

    @property
    def jobs(self) -> PgTxJobs:
        return PgTxJobs(self.c, self.cur)

    @property
    def audit(self) -> PgTxAudit:
        return PgTxAudit(self.c, self.cur)

    @property
    def kv(self) -> PgTx:
        return self

    @property
    def principals(self) -> PgPrincipalWriter:  # AuthTx (protocols_auth.py)
        return PgPrincipalWriter(self.cur)

    @property
    def docs(self) -> PgDocs:
        return PgDocs(self.sql)

    @property
    def quota(self) -> PgQuota:
        return PgQuota(self.sql)

    @property
    def usage(self) -> PgUsage:
        return PgUsage(self.sql)

    @property
    def words(self) -> PgWords:
        return PgWords(self.sql)

    @property
    def object_rows(self) -> PgObjectRowsTx:  # ServiceTx (protocols_service.py)
        return PgObjectRowsTx(self.sql)

    @property
    def keyframes(self) -> PgKeyframes:
        return PgKeyframes(self.sql)

    # UnitWriter
    def insert(self, unit: UnitRecord, vector: Vector) -> None:
        units_sql.insert(self.cur, unit, vector, self.c.model_id)

    def insert_many(self, units: Sequence[UnitRecord], vectors: Vector) -> None:
        units_sql.insert_many(self.cur, units, vectors, self.c.model_id)

    def import_batch(self, units: Sequence[UnitRecord], vectors: Vector, actor: str) -> int:
        # An imported Unit is whole (one chunk), as the embedded backend's bulk rows store it.
        whole = [dataclasses.replace(u, chunk_index=0, chunk_count=1) for u in units]
        got = units_sql.insert_new(self.cur, whole, vectors, self.c.model_id)
        stored = [whole[i] for i, _ in got]
        docs = {(u.scope, u.doc_id, u.acl_owner) for u in stored}
        now = units[0].created_at if units else 0
        self.docs.reserve(sorted(docs), actor, now)
        if got:
            keys = sorted(k for _, k in got)
            scopes = sorted({u.scope for u in stored})
            units_sql.bump_generations(self.cur, scopes)
            self.audit.append(
                actor,
                "import",
                {
                    "units": len(got),
                    "rowids": [keys[0], keys[-1]],  # the units table's ids (D-175)
                    "unchanged": len(units) - len(got),
                    "scopes": scopes,
                    "merkle_root": merkle_root([u.content_hash for u in stored]),
                },
            )
        return len(got)

    def delete(self, unit_ids: Sequence[str]) -> list[UnitRecord]:
        return units_sql.delete(self.cur, unit_ids)

    def set_groups(self, unit_ids: Sequence[str], groups: Sequence[str]) -> None:
        units_sql.set_groups(self.cur, unit_ids, groups)

    def bump_generations(self, scopes: Iterable[str]) -> None:
        units_sql.bump_generations(self.cur, scopes)

    # KVWriter
    def set(self, key: str, value: str) -> None:
        self.cur.execute(
            "INSERT INTO kv(key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


class PgTxJobs:
    def __init__(self, c: TxConfig, cur: psycopg.Cursor[Any]) -> None:
        self.c, self.cur = c, cur

    def enqueue(self, spec: JobSpec) -> str:
        return jobs_sql.enqueue(self.cur, spec, self.c.max_attempts)

    def find(self, dedupe_key: str) -> JobRecord | None:
        return jobs_sql.find(self.cur, dedupe_key)

    def set_groups(self, job_id: str, groups: Sequence[str]) -> None:
        jobs_sql.set_groups(self.cur, job_id, groups)

    def complete(self, lease: Lease, result_json: str) -> None:
        jobs_sql.complete(self.cur, lease, result_json)


class PgTxAudit:
    def __init__(self, c: TxConfig, cur: psycopg.Cursor[Any]) -> None:
        self.c, self.cur = c, cur

    def append(self, actor: Principal | str, action: str, record: Mapping[str, object]) -> str:
        return audit_sql.append(self.cur, self.c.audit_key, actor, action, record)


if TYPE_CHECKING:  # mypy checks the transaction against the seam
    from ..protocols_auth import AuthTx
    from ..protocols_writes import StoreTx

    _tx: type[StoreTx] = PgTx
    _auth_tx: type[AuthTx] = PgTx
