"""``AuditTrail`` on the catalog: the chain's verification, a tenant's record count and the
export, over ``audit.py`` (which also appends and anchors); D-188."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path

from ..protocols_reads import AuditEntry, AuditTrail, ChainReport
from . import audit
from .catalog import Catalog


class SqliteAuditTrail:
    """``anchor``: the signed head kept outside the data dir (None: the chain alone)."""

    def __init__(self, catalog: Catalog, key: bytes, anchor: Path | None) -> None:
        self.catalog = catalog
        self.key = key
        self.anchor = anchor

    def verify_chain(self) -> ChainReport:
        got = audit.verify(self.catalog.reader(), self.key, self.anchor)
        return ChainReport(
            ok=bool(got["ok"]),
            records=int(got["records"]),
            head=got.get("head"),
            first_bad_seq=got.get("first_bad_seq"),
            reason=got.get("reason"),
        )

    def tenant_records(self, tenants: Collection[str]) -> int:
        return audit.tenant_record_count(self.catalog.reader(), tenants)

    def entries(self) -> Iterator[AuditEntry]:
        for r in self.catalog.reader().execute(
            "SELECT seq, prev_hash, hash, record FROM audit_log ORDER BY seq"
        ):
            yield AuditEntry(int(r[0]), str(r[1]), str(r[2]), str(r[3]))


_check: type[AuditTrail] = SqliteAuditTrail  # mypy checks the class against the seam
