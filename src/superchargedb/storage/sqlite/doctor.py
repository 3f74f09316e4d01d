"""Consistency checks over a data dir: SQLite integrity, FTS5 vs its content, catalog vs index.

``superchargedb doctor`` and the crash-recovery tests run these. FTS5's own integrity-check does
not see external-content drift on SQLite 3.40, so the FTS index is compared against a fresh
rebuild in a temporary table (D-53).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...types import PLANES
from ..vectors import VectorStore
from .catalog import Catalog
from .objects import ORPHAN_GRACE_S, blob_report, referenced_blobs
from .sparse import SparseIndex

_WORD = re.compile(r"[a-z]{4,}")


def check_integrity(catalog: Catalog) -> dict[str, Any]:
    conn = catalog.reader()
    row = conn.execute("PRAGMA integrity_check").fetchone()
    return {"ok": row is not None and row[0] == "ok", "detail": row[0] if row else None}


def check_fts(catalog: Catalog, sample_terms: int = 30) -> dict[str, Any]:
    """Rebuild the FTS index in memory and compare what a sample of terms matches."""
    import sqlite3

    src = catalog.reader()
    mem = sqlite3.connect(":memory:")
    mem.execute(
        "CREATE VIRTUAL TABLE f USING fts5(text, context, acl, tokenize='porter unicode61')"
    )
    words: dict[str, None] = {}
    for r in src.execute("SELECT id, text, acl, context FROM units ORDER BY id"):
        mem.execute(
            "INSERT INTO f(rowid, text, context, acl) VALUES (?,?,?,?)", (r[0], r[1], r[3], r[2])
        )
        if len(words) < sample_terms * 20:
            for w in _WORD.findall(r[1].lower())[:5]:
                words[w] = None
    terms = list(words)[:: max(1, len(words) // sample_terms)][:sample_terms]
    problems = []
    with catalog.locked() as w:
        try:
            w.execute("INSERT INTO units_fts(units_fts) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            problems.append(f"integrity-check: {exc}")
    for t in terms:
        want = {r[0] for r in mem.execute("SELECT rowid FROM f WHERE f MATCH ?", (f'"{t}"',))}
        got = {
            r[0]
            for r in src.execute("SELECT rowid FROM units_fts WHERE units_fts MATCH ?", (f'"{t}"',))
        }
        if want != got:
            problems.append(f"term {t!r}: index has {len(got)} rows, content has {len(want)}")
    mem.close()
    return {"ok": not problems, "terms_checked": len(terms), "problems": problems}


def check_index(catalog: Catalog, store: VectorStore) -> dict[str, Any]:
    """The catalog and the vector index hold exactly the same ids, plane by plane."""
    conn = catalog.reader()
    out: dict[str, Any] = {"ok": True, "planes": {}}
    for plane in PLANES:
        cat = np.fromiter(
            (
                r[0]
                for r in conn.execute("SELECT id FROM units WHERE plane = ? ORDER BY id", (plane,))
            ),
            dtype=np.uint64,
        )
        idx = store.keys(plane)
        missing = np.setdiff1d(cat, idx)
        extra = np.setdiff1d(idx, cat)
        ok = missing.size == 0 and extra.size == 0
        out["planes"][plane] = {
            "catalog": int(cat.size),
            "index": int(idx.size),
            "missing_from_index": missing[:10].tolist(),
            "not_in_catalog": extra[:10].tolist(),
        }
        out["ok"] = out["ok"] and ok
    return out


def check_lexical(catalog: Catalog, lexical: SparseIndex) -> dict[str, Any]:
    """The derived lexical index holds exactly the catalog's ids (all planes)."""
    cat = np.fromiter(
        (r[0] for r in catalog.reader().execute("SELECT id FROM units ORDER BY id")),
        dtype=np.uint64,
    )
    idx = lexical.keys()
    missing, extra = np.setdiff1d(cat, idx), np.setdiff1d(idx, cat)
    return {
        "ok": missing.size == 0 and extra.size == 0,
        "catalog": int(cat.size),
        "index": int(idx.size),
        "missing_from_index": missing[:10].tolist(),
        "not_in_catalog": extra[:10].tolist(),
    }


def check_objects(
    catalog: Catalog,
    root: Path,
    grace_s: float = ORPHAN_GRACE_S,
    swept: dict[str, Any] | None = None,
    exists: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Every referenced blob is stored (else data is lost: not ok); orphans are only reported.

    ``exists`` asks the blob store (an S3 bucket: ``root`` then holds only local copies);
    without it a blob is a file under ``root``.

    Orphans (upload temp files, blobs no row references) cost space, not data; the server removes
    them at its next start. Files younger than ``grace_s`` may belong to a request in flight.
    """
    refs = referenced_blobs(catalog.reader())
    out = blob_report(
        refs, root, exists or (lambda sha: (root / sha[:2] / sha[2:4] / sha).is_file()), grace_s
    )
    if swept is not None:
        out["swept_at_startup"] = swept
    return out


def doctor(
    catalog: Catalog,
    store: VectorStore,
    lexical: SparseIndex | None = None,
    *,
    objects_root: Path | None = None,
    swept: dict[str, Any] | None = None,
    blob_exists: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "integrity": check_integrity(catalog),
        "fts": check_fts(catalog),
        "index": check_index(catalog, store),
    }
    if lexical is not None:
        report["lexical"] = check_lexical(catalog, lexical)
    if objects_root is not None:
        report["objects"] = check_objects(catalog, objects_root, swept=swept, exists=blob_exists)
    report["ok"] = all(v["ok"] for v in report.values() if isinstance(v, dict))
    return report
