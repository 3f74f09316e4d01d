"""Consistency checks over a PostgreSQL store (``superchargedb doctor``; ``ServerBackend.doctor``).

The same report shape as the embedded backend's (``storage/sqlite/doctor.py``): a section per
check, each with its own ``ok``, and ``ok`` over all. PostgreSQL keeps its own pages consistent,
so the checks are the project's invariants, read in one repeatable-read snapshot so that
writers running beside the check cannot make it disagree with itself:

- ``lexical``: the BM25 statistics plus the deltas the outbox has not applied yet equal what
  the Units and postings hold (document count, total length, a sample of terms' df);
- ``vectors``: every Unit was embedded with the store's model;
- ``objects``: every blob a row references is in the blob store (else data is lost); orphans
  (files no row references) cost space and are only counted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from ..sqlite.objects import blob_report

_SAMPLE_TERMS = 30


def _lexical(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    row = conn.execute(
        "SELECT (SELECT n_docs FROM lex_stats) + coalesce((SELECT sum(d_docs) FROM outbox"
        "   WHERE NOT applied), 0),"
        " (SELECT count(*) FROM units),"
        " (SELECT total FROM lex_stats) + coalesce((SELECT sum(d_len) FROM outbox"
        "   WHERE NOT applied), 0),"
        " (SELECT coalesce(sum(dl), 0) FROM units),"
        " (SELECT count(*) FROM outbox WHERE NOT applied)"
    ).fetchone()
    assert row is not None
    n_docs, units, total, lengths, pending = (int(v) for v in row)
    bad_terms = conn.execute(
        "WITH t AS (SELECT term, df FROM lex_terms ORDER BY random() LIMIT %s)"
        " SELECT t.term, t.df + coalesce((SELECT sum(o.d_df) FROM outbox o"
        "   WHERE NOT o.applied AND t.term = ANY(o.terms)), 0),"
        " (SELECT count(*) FROM postings p WHERE p.term = t.term) FROM t",
        (_SAMPLE_TERMS,),
    ).fetchall()
    problems = [
        {"term": str(r[0]), "df": int(r[1]), "postings": int(r[2])}
        for r in bad_terms
        if int(r[1]) != int(r[2])
    ]
    return {
        "ok": n_docs == units and total == lengths and not problems,
        "units": units,
        "n_docs": n_docs,
        "total_length": total,
        "unit_lengths": lengths,
        "outbox_pending": pending,
        "terms_checked": len(bad_terms),
        "problems": problems[:10],
    }


def _vectors(conn: psycopg.Connection[Any], model_id: str) -> dict[str, Any]:
    """A Unit embedded with another model is not comparable with this one's query vectors
    (the column's type fixes the dimension): ``reindex`` re-embeds it."""
    row = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE model_id <> %s) FROM units", (model_id,)
    ).fetchone()
    assert row is not None
    units, other_model = int(row[0]), int(row[1])
    return {"ok": other_model == 0, "units": units, "other_model": other_model}


def referenced_blobs(conn: psycopg.Connection[Any]) -> set[str]:
    """Every blob a row can still reach (``sqlite/objects.referenced_blobs``'s sources)."""
    rows = conn.execute(
        "SELECT sha256 FROM objects UNION SELECT object_sha FROM units WHERE object_sha IS NOT"
        " NULL UNION SELECT payload::jsonb ->> 'sha256' FROM jobs WHERE state IN"
        " ('queued', 'running') AND pg_input_is_valid(payload, 'jsonb')"
    ).fetchall()
    return {str(r[0]) for r in rows if r[0]}


def _objects(
    conn: psycopg.Connection[Any], root: Path, exists: Callable[[str], bool]
) -> dict[str, Any]:
    return blob_report(referenced_blobs(conn), root, lambda sha: _exists(exists, sha))


def _exists(exists: Callable[[str], bool], sha: str) -> bool:
    try:
        return exists(sha)
    except Exception:  # a malformed reference is a lost blob, not a crashed report
        return False


def doctor(
    conn: psycopg.Connection[Any],
    *,
    model_id: str,
    objects_root: Path,
    blob_exists: Callable[[str], bool],
) -> dict[str, Any]:
    """The report, from one snapshot (``conn`` is an autocommit pool connection)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        report: dict[str, Any] = {
            "lexical": _lexical(conn),
            "vectors": _vectors(conn, model_id),
            "objects": _objects(conn, objects_root, blob_exists),
        }
    report["ok"] = all(v["ok"] for v in report.values() if isinstance(v, dict))
    return report
