"""``AuditTrail`` on PostgreSQL: the chain's verification (with the signed anchor outside the
database, when there is one), a tenant's record count and the export (``audit.py``; D-188)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path

from ..protocols_reads import AuditEntry, AuditTrail, ChainReport
from . import audit
from .sql import Conn


class PgAuditTrail:
    """``anchor``: the signed head kept outside the database (None: the chain alone)."""

    def __init__(self, conn: Conn, key: bytes, anchor: Path | None) -> None:
        self.conn = conn
        self.key = key
        self.anchor = anchor

    def verify_chain(self) -> ChainReport:
        with self.conn() as conn:
            return audit.verify_chain(conn, self.key, self.anchor)

    def tenant_records(self, tenants: Collection[str]) -> int:
        with self.conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return audit.tenant_records(conn, tenants)

    def entries(self) -> Iterator[AuditEntry]:
        """Streamed through a server-side cursor in one snapshot (the connection is held until
        the export is read to its end or dropped)."""
        with (
            self.conn() as conn,
            conn.transaction(),
            conn.cursor(name="audit_export") as cur,
        ):
            cur.itersize = 1000
            cur.execute("SELECT seq, prev_hash, hash, record FROM audit_log ORDER BY seq")
            for r in cur:
                yield AuditEntry(int(r[0]), str(r[1]), str(r[2]), str(r[3]))


_check: type[AuditTrail] = PgAuditTrail  # mypy checks the class against the seam
