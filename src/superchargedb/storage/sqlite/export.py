"""An embedded data dir read for ``superchargedb migrate`` (D-275): held, and read in one snapshot.

The source is opened under the data-dir lock (``storage/lock.py``), so a running server's data
dir is refused rather than copied while it changes, and no server starts on it during the copy.
Everything is then read in ONE read transaction (WAL keeps it stable while anything else, a
``superchargedb worker`` say, still commits), so the copy is of one consistent state: the same
guarantee ``backup`` gets from SQLite's backup API, without a second copy of the catalog.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ValidationError
from ..lock import DataDirLock
from ..migrate_tables import WORD_COLUMNS, SourceInfo, Table, UnitBatch
from ..unit_rows import unit_record
from . import audit
from .objects import FileBlobStore

_UNIT_SQL = (
    "SELECT id, unit_id, scope, doc_id, plane, modality, source_uri, mime, text, acl_owner,"
    " acl_groups, content_hash, chunk_idx, n_chunks, loc_kind, loc_start, loc_end, t_start_ms,"
    " t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, created_at, event_at,"
    " object_key, object_sha, context, created_by, embedding FROM units WHERE id > ?"
    " ORDER BY id LIMIT ?"
)


class EmbeddedSource:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        db = data_dir / "catalog.db"
        if not db.is_file():
            raise ValidationError(f"no embedded catalog in {data_dir} (catalog.db)")
        self.lock = DataDirLock(data_dir)
        self.lock.acquire()  # ConflictError when a server holds it
        try:
            self.conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("BEGIN")  # one snapshot for the whole copy
            self.conn.execute("SELECT 1 FROM units LIMIT 1")  # the snapshot starts here
        except BaseException:
            self.lock.release()
            raise
        self.blobs = FileBlobStore(data_dir / "objects")

    def close(self) -> None:
        self.conn.close()
        self.lock.release()

    def info(self) -> SourceInfo:
        c = self.conn
        first = c.execute("SELECT hash FROM audit_log ORDER BY seq LIMIT 1").fetchone()
        born = c.execute(
            "SELECT applied_at FROM schema_migrations WHERE name = 'm001_initial'"
        ).fetchone()
        ident = f"{born[0] if born else ''}:{first[0] if first else ''}"
        models = [r[0] for r in c.execute("SELECT DISTINCT model_id FROM units LIMIT 2")]
        if len(models) > 1:
            raise ValidationError(
                f"the source holds Units of more than one model ({', '.join(models)}): finish"
                " `superchargedb reindex` on it first"
            )
        dims = [int(r[0]) // 2 for r in c.execute("SELECT DISTINCT length(embedding) FROM units")]
        if len(dims) > 1:
            raise ValidationError(f"the source holds vectors of several sizes: {sorted(dims)}")
        head = c.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
        return SourceInfo(
            store_id=hashlib.sha256(ident.encode()).hexdigest()[:32],
            model_id=models[0] if models else None,
            dim=dims[0] if dims else None,
            audit_seq=int(head[0]) if head else 0,
            audit_hash=str(head[1]) if head else audit.GENESIS,
        )

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def rows(
        self, t: Table, after: list[Any] | None, limit: int
    ) -> list[tuple[list[Any], tuple[Any, ...]]]:
        """The next ``limit`` rows after the key ``after`` (from the start when None), each
        ``(its key, its columns)``, with JSON lists decoded."""
        key = ", ".join(t.key)
        where, params = "", [limit]
        if after is not None:
            marks = ", ".join("?" * len(t.key))
            where, params = f"WHERE ({key}) > ({marks})", [*after, limit]
        cols = ", ".join(t.columns)
        got = self.conn.execute(
            f"SELECT {key}, {cols} FROM {t.name} {where} ORDER BY {key} LIMIT ?", params
        ).fetchall()
        n, lists = len(t.key), {t.columns.index(c) for c in t.lists}
        out = []
        for r in got:
            vals = tuple(json.loads(v) if i in lists else v for i, v in enumerate(tuple(r)[n:]))
            out.append((list(tuple(r)[:n]), vals))
        return out

    def units(self, after: int, limit: int) -> UnitBatch | None:
        """The next Units above catalog id ``after`` with their vectors as stored, their word
        tables and keyframes; None past the last."""
        rows = self.conn.execute(_UNIT_SQL, (after, limit)).fetchall()
        if not rows:
            return None
        units = [
            replace(
                unit_record(r, json.loads(r["acl_groups"])),
                context=r["context"],
                created_by=r["created_by"],
            )
            for r in rows
        ]
        vectors = np.stack([np.frombuffer(r["embedding"], dtype=np.float16) for r in rows])
        ids = {int(r["id"]): str(r["unit_id"]) for r in rows}
        lo, hi = min(ids), max(ids)
        words = [
            (ids[int(w["unit"])], *(w[c] for c in WORD_COLUMNS))
            for w in self.conn.execute(
                f"SELECT unit, {', '.join(WORD_COLUMNS)} FROM unit_words"
                " WHERE unit BETWEEN ? AND ? ORDER BY unit, idx",
                (lo, hi),
            )
            if int(w["unit"]) in ids
        ]
        frames = [
            (ids[int(k["unit"])], str(k["mime"]), bytes(k["data"]))
            for k in self.conn.execute(
                "SELECT unit, mime, data FROM unit_keyframes WHERE unit BETWEEN ? AND ?"
                " ORDER BY unit",
                (lo, hi),
            )
            if int(k["unit"]) in ids
        ]
        return UnitBatch(hi, units, vectors, words, frames)

    def blob(self, sha256: str) -> Path:
        return self.blobs.path(sha256)

    def verify_audit(self, key: bytes, anchor: Path | None) -> dict[str, Any]:
        """The source chain checked (with its anchor) before anything is copied."""
        return audit.verify(self.conn, key, anchor)
