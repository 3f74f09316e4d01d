"""The PostgreSQL side of ``superchargedb migrate`` (D-275): a database claimed for one source
store, filled a batch per transaction, each batch recording how far it got.

``kv['migrate:source']`` names the store the database receives (its id and the audit head it
was read at). A database that holds anything else (Units, principals, a chain, documents,
objects or jobs not written by a migration of this store, or vectors of another model or size)
is refused before anything is written. Each batch commits with ``kv['migrate:after:<table>']``,
the source key it ended at, so an interrupted run resumes after the last committed batch; the
rows also go in with ``ON CONFLICT DO NOTHING`` on their natural keys, so nothing is copied
twice even if the key were lost. The Units go through the backend's own insert
(``units.insert_new``): their postings and outbox operations are derived as on any write, and
the outbox is applied at the end (``lex_stats``, ``lex_terms``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

from ...errors import ConflictError
from ..migrate_tables import COUNTED, WORD_COLUMNS, SourceInfo, Table, UnitBatch
from ..protocols_reads import ChainReport
from . import audit, migrations, outbox
from . import units as units_sql

RUN_LOCK = 0x5CDB_0004  # pg_try_advisory_lock key: one migrate run per database
SOURCE_KEY = "migrate:source"
# Tables whose rows mean the database already holds a store.
_OCCUPIED = ("units", "principals", "audit_log", "docs", "objects", "jobs", "usage_daily")


class PgTarget:
    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True, application_name="scdb-migrate")
        got = self.conn.execute("SELECT pg_try_advisory_lock(%s)", (RUN_LOCK,)).fetchone()
        if not (got and got[0]):
            self.conn.close()
            raise ConflictError("another `superchargedb migrate` is writing to this database")

    def close(self) -> None:
        self.conn.close()  # the session's advisory lock goes with it

    # -- claiming the database ----------------------------------------------------------------
    def recorded_model(self) -> tuple[int, str] | None:
        c = self.conn
        if c.execute("SELECT to_regclass('meta')").fetchone() in (None, (None,)):
            return None
        got = c.execute("SELECT key, value FROM meta WHERE key IN ('dim', 'model_id')")
        rows: dict[str, str] = {str(k): str(v) for k, v in got}
        if "dim" not in rows or "model_id" not in rows:
            return None
        return int(rows["dim"]), str(rows["model_id"])

    def claim(self, src: SourceInfo, dim: int, model_id: str) -> bool:
        """Create the schema if missing and claim the database for ``src``; True when a
        previous run of the same source is resumed. Refuses anything else."""
        recorded = self.recorded_model()
        if recorded is not None and recorded != (dim, model_id):
            raise ConflictError(
                f"the database holds {recorded[0]}-d vectors of {recorded[1]!r}; the source's"
                f" are {dim}-d of {model_id!r}"
            )
        migrations.migrate(self.conn, dim, model_id)
        register_vector(self.conn)
        mine = {"store_id": src.store_id, "audit_head": f"{src.audit_seq}:{src.audit_hash}"}
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT value FROM kv WHERE key = %s FOR UPDATE", (SOURCE_KEY,)
            ).fetchone()
            if row is not None:
                theirs = json.loads(row[0])
                if theirs.get("store_id") != src.store_id:
                    raise ConflictError(
                        "the database holds a migration of another store; migrate into an"
                        " empty database"
                    )
                if theirs.get("audit_head") != mine["audit_head"]:
                    raise ConflictError(
                        "the source changed since the interrupted run (its audit head was"
                        f" {theirs.get('audit_head')}, now {mine['audit_head']}): the copy would"
                        " not be of one state; migrate into an empty database again"
                    )
                return True
            held = {t: n for t, n in self.counts(_OCCUPIED).items() if n}
            if held:
                what = ", ".join(f"{n} {t}" for t, n in held.items())
                raise ConflictError(
                    f"the database holds a store that is not from this source ({what});"
                    " migrate into an empty database"
                )
            self._set(SOURCE_KEY, mine)
        return False

    # -- progress ---------------------------------------------------------------------------
    def after(self, table: str) -> Any:
        row = self.conn.execute(
            "SELECT value FROM kv WHERE key = %s", (f"migrate:after:{table}",)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def _set(self, key: str, value: Any) -> None:
        self.conn.execute(
            "INSERT INTO kv(key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )

    # -- batches ----------------------------------------------------------------------------
    def put_rows(self, t: Table, rows: Sequence[tuple[Any, ...]], last_key: list[Any]) -> None:
        """One batch of ``t`` and its progress, one transaction."""
        flags = {t.columns.index(c) for c in t.flags}
        params = [
            tuple(bool(v) if i in flags and v is not None else v for i, v in enumerate(r))
            for r in rows
        ]
        names = ", ".join(t.columns)
        marks = ", ".join(["%s"] * len(t.columns))
        sql = f"INSERT INTO {t.name}({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(sql.encode(), params)
            if t.name == "audit_log" and rows:
                # The head as the source's chain records it ("seq:hash"), as an append writes it.
                seq, h = rows[-1][0], rows[-1][2]
                cur.execute(
                    "INSERT INTO kv(key, value) VALUES ('audit_head', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (f"{seq}:{h}",),
                )
            self._set(f"migrate:after:{t.name}", last_key)

    def put_units(self, b: UnitBatch, model_id: str) -> int:
        """One batch of Units (postings and outbox rows derived by the backend's insert), their
        word tables and keyframes, and the progress, one transaction; returns Units stored."""
        with self.conn.transaction(), self.conn.cursor() as cur:
            stored = units_sql.insert_new(cur, b.units, b.vectors, model_id)
            if b.words:
                cols = list(zip(*b.words, strict=True))
                types = ["text", "integer", "integer", "integer", "bigint", "bigint", "integer"]
                types += ["float8"] * 5
                arrays = ", ".join(f"%s::{ty}[]" for ty in types)
                cur.execute(
                    f"INSERT INTO unit_words(unit, {', '.join(WORD_COLUMNS)}) SELECT u.id,"
                    f" {', '.join('w.' + c for c in WORD_COLUMNS)} FROM unnest({arrays})"
                    f" AS w(uid, {', '.join(WORD_COLUMNS)}) JOIN units u ON u.unit_id = w.uid"
                    " ON CONFLICT DO NOTHING",
                    [list(c) for c in cols],
                )
            if b.keyframes:
                cur.execute(
                    "INSERT INTO unit_keyframes(unit, mime, data) SELECT u.id, k.mime, k.data"
                    " FROM unnest(%s::text[], %s::text[], %s::bytea[]) AS k(uid, mime, data)"
                    " JOIN units u ON u.unit_id = k.uid ON CONFLICT DO NOTHING",
                    [list(c) for c in zip(*b.keyframes, strict=True)],
                )
            self._set("migrate:after:units", b.last)
        return len(stored)

    def apply_outbox(self) -> int:
        """Apply the Units' outbox operations: the BM25 statistics follow the postings."""
        return outbox.replay(self.conn)

    # -- the check --------------------------------------------------------------------------
    def counts(self, tables: Sequence[str] = COUNTED) -> dict[str, int]:
        q = ", ".join(f"(SELECT count(*) FROM {t})" for t in tables)
        row = self.conn.execute(f"SELECT {q}".encode()).fetchone()
        assert row is not None
        return {t: int(n) for t, n in zip(tables, row, strict=True)}

    def lexical(self) -> dict[str, int]:
        """The derived statistics against the Units they derive from."""
        row = self.conn.execute(
            "SELECT (SELECT n_docs FROM lex_stats WHERE id = 1),"
            " (SELECT total FROM lex_stats WHERE id = 1),"
            " (SELECT count(*) FROM units), (SELECT coalesce(sum(dl), 0) FROM units),"
            " (SELECT count(*) FROM outbox WHERE NOT applied)"
        ).fetchone()
        assert row is not None
        keys = ("n_docs", "total_len", "units", "units_len", "pending")
        return dict(zip(keys, (int(v) for v in row), strict=True))

    def blobs(self) -> set[str]:
        """Every blob the database names (an object's, or the one a Unit was derived from)."""
        got = self.conn.execute(
            "SELECT sha256 FROM objects UNION SELECT object_sha FROM units"
            " WHERE object_sha IS NOT NULL"
        )
        return {str(r[0]) for r in got}

    def verify_audit(self, key: bytes) -> ChainReport:
        return audit.verify_chain(self.conn, key)

    def done(self, report: dict[str, Any]) -> None:
        self._set("migrate:done", report)
