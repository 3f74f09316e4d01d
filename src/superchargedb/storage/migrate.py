"""``superchargedb migrate``: an embedded data dir copied into a server deployment (D-275, D-276).

The source is held and read in one snapshot (``sqlite/export.py``); the database is claimed for
it (``postgres/migrate_target.py``). Then, a batch per PostgreSQL transaction: the principals,
their keys (hashes) and console sessions; the objects with their blobs (into the deployment's
blob store: its objects folder or its bucket); the documents; the Units with their vectors as
stored (nothing is embedded), word tables and keyframes; usage, jobs and scope generations; the
audit chain record for record. The Units' outbox is applied, and the copy is checked: every
table's rows counted on both sides, the derived BM25 statistics against the Units, every blob
the database names present in the blob store, and the chain verified on PostgreSQL with the same
key, ending at the source's head. A blob is stored before the row naming it commits, so an
interrupted run leaves at most a blob nothing names yet, which the resumed run names.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .migrate_tables import COUNTED, TABLES, UNITS, UNITS_AFTER, Table
from .postgres import audit as pg_audit
from .postgres.migrate_target import PgTarget
from .sqlite.export import EmbeddedSource
from .sqlite.objects import FileBlobStore

DEFAULT_BATCH = 1000
Progress = Callable[[str, int], None]  # (table, rows copied since the last call)


class _Run:
    def __init__(
        self, src: EmbeddedSource, tgt: PgTarget, blobs: FileBlobStore, batch: int, on: Progress
    ) -> None:
        self.src, self.tgt, self.blobs, self.batch, self.on = src, tgt, blobs, batch, on
        self.missing: set[str] = set()  # blobs the source names but lacks (or holds altered)
        self.blobs_copied = 0

    def rows(self, t: Table) -> None:
        after = self.tgt.after(t.name)
        while True:
            got = self.src.rows(t, after, self.batch)
            if not got:
                return
            if t.name == "objects":
                for _, r in got:
                    self.blob(str(r[t.columns.index("sha256")]))
            after = got[-1][0]
            self.tgt.put_rows(t, [r for _, r in got], after)
            self.on(t.name, len(got))

    def units(self, model_id: str) -> None:
        after = self.tgt.after(UNITS) or 0
        while (b := self.src.units(after, self.batch)) is not None:
            for u in b.units:
                if u.object_sha:
                    self.blob(u.object_sha)
            self.tgt.put_units(b, model_id)
            after = b.last
            self.on(UNITS, len(b.units))

    def blob(self, sha: str) -> None:
        """Into the deployment's blob store unless there, checked against its name."""
        if sha in self.missing or self.blobs.exists(sha):
            return
        path = self.src.blob(sha)
        if not path.is_file():
            self.missing.add(sha)
            return
        with open(path, "rb") as f:
            staged = self.blobs.stage(iter(lambda: f.read(1 << 20), b""), None)
        try:
            if staged.sha256 != sha:
                self.missing.add(sha)
                return
            self.blobs.commit(staged)
            self.blobs_copied += 1
        finally:
            self.blobs.discard(staged)


def migrate(
    source: Path,
    url: str,
    blobs: FileBlobStore,
    audit_key: bytes,
    *,
    batch: int = DEFAULT_BATCH,
    source_anchor: Path | None = None,
    target_anchor: Path | None = None,
    progress: Callable[[dict[str, int]], Progress] | None = None,
) -> dict[str, Any]:
    """Copy ``source`` into the database at ``url`` (resuming an interrupted run of the same
    source) and check the copy; returns the report (``report["ok"]``). ``progress`` is given
    each table's source row count and returns the callback told of each batch."""
    t0 = time.perf_counter()
    src = EmbeddedSource(source)
    try:
        info = src.info()
        chain = src.verify_audit(audit_key, source_anchor)
        if not chain["ok"]:
            raise ValidationError(
                f"the source's audit chain does not verify (seq {chain.get('first_bad_seq')}:"
                f" {chain.get('reason')}); nothing copied"
            )
        tgt = PgTarget(url)
        try:
            recorded = tgt.recorded_model()
            dim, model_id = info.dim, info.model_id
            if dim is None or model_id is None:  # no Units: the database's model, if any
                if recorded is None:
                    raise ValidationError(
                        "the source holds no Units, so no model to create the schema with:"
                        " start `superchargedb serve` on the database once, then migrate"
                    )
                dim, model_id = recorded
            resumed = tgt.claim(info, dim, model_id)
            totals = {t: src.count(t) for t in COUNTED}
            on = progress(totals) if progress is not None else (lambda _t, _n: None)
            run = _Run(src, tgt, blobs, batch, on)
            for t in TABLES[:UNITS_AFTER]:
                run.rows(t)
            run.units(model_id)
            for t in TABLES[UNITS_AFTER:]:
                run.rows(t)
            tgt.apply_outbox()
            report = _check(run, totals, info.audit_seq, info.audit_hash, audit_key)
            report.update(
                resumed=resumed,
                model_id=model_id,
                dim=dim,
                blobs_copied=run.blobs_copied,
                seconds=round(time.perf_counter() - t0, 3),
            )
            if report["ok"]:
                tgt.done({k: report[k] for k in ("audit", "model_id", "dim")})
                if target_anchor is not None:
                    pg_audit.write_anchor(tgt.conn, audit_key, target_anchor)
            return report
        finally:
            tgt.close()
    finally:
        src.close()


def _check(run: _Run, totals: dict[str, int], seq: int, head: str, key: bytes) -> dict[str, Any]:
    """Counts per table, the derived statistics, the blobs and the chain, each with its ok."""
    got = run.tgt.counts()
    tables = {t: {"source": totals[t], "target": got[t]} for t in COUNTED}
    lex = run.tgt.lexical()
    lex_ok = lex["n_docs"] == lex["units"] and lex["total_len"] == lex["units_len"]
    lex_ok = lex_ok and lex["pending"] == 0
    absent = sorted(s for s in run.tgt.blobs() if s in run.missing or not run.blobs.exists(s))
    chain = run.tgt.verify_audit(key)
    audit = {
        "ok": chain.ok and chain.records == seq and (chain.head or "") == head,
        "records": chain.records,
        "source_records": seq,
        "head": chain.head,
        "source_head": head,
        "reason": chain.reason,
    }
    ok = all(v["source"] == v["target"] for v in tables.values()) and lex_ok and audit["ok"]
    return {
        "ok": ok and not absent,
        "tables": tables,
        "lexical": {**lex, "ok": lex_ok},
        "blobs_absent": absent[:10],
        "blobs_absent_count": len(absent),
        "audit": audit,
    }
