"""The outbox: every index operation a write commits, and the applier of the derived statistics.

A write appends one row per operation in its own transaction (``add`` for an insert or an ACL
change, ``remove`` for a delete) carrying the plane and Unit key, and the BM25 statistics' deltas:
documents (``d_docs``), tokens (``d_len``) and the document frequency change ``d_df`` of each of
its distinct ``terms``. The postings and the HNSW entry are already in place at commit; what
follows the outbox is the statistics (``lexical.py``, D-201).

``replay`` applies the committed rows not yet applied, in batches, under one advisory lock (so
one applier at a time, in any process, and writers never wait on it). The deltas commute, so
rows that commit out of sequence order are applied whenever they become visible, each exactly
once: the batch's sums and its ``applied`` flags commit together. ``applied()`` is the highest
sequence number below which every committed row is applied.

Applied rows stay ``RETAIN_S``: each API process's derived lexical index reads them by
transaction id (``lexical_tail.py``, D-267), then ``prune`` drops them.
"""

from __future__ import annotations

from typing import Any

import psycopg

from .lexical import term_deltas

APPLY_LOCK = 0x5CDB_0002
BATCH = 5000
# How long applied rows stay for the processes' derived lexical indexes to tail: one that has
# not caught up for longer rebuilds (it searches in SQL meanwhile).
RETAIN_S = 600.0


def append(
    cur: psycopg.Cursor[Any],
    op: str,
    plane: str,
    unit: int,
    d_docs: int,
    d_len: int,
    terms: list[str],
    d_df: int,
) -> None:
    cur.execute(
        "INSERT INTO outbox(op, plane, unit, d_docs, d_len, terms, d_df)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (op, plane, unit, d_docs, d_len, terms, d_df),
    )


def head(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT coalesce(max(seq), 0) FROM outbox").fetchone()
    return int(row[0]) if row else 0


def applied(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT coalesce((SELECT min(seq) - 1 FROM outbox WHERE NOT applied),"
        " (SELECT max(seq) FROM outbox), 0)"
    ).fetchone()
    return int(row[0]) if row else 0


def _apply_batch(conn: psycopg.Connection[Any], retain_s: float) -> int:
    """One batch in one transaction; returns how many rows it applied."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPLY_LOCK,))
        rows = conn.execute(
            "SELECT seq, d_docs, d_len, terms, d_df FROM outbox WHERE NOT applied"
            " ORDER BY seq LIMIT %s",
            (BATCH,),
        ).fetchall()
        if not rows:
            return 0
        d_docs = sum(int(r[1]) for r in rows)
        d_len = sum(int(r[2]) for r in rows)
        df = {t: d for t, d in term_deltas((r[3], int(r[4])) for r in rows).items() if d}
        conn.execute(
            "UPDATE lex_stats SET n_docs = n_docs + %s, total = total + %s WHERE id = 1",
            (d_docs, d_len),
        )
        if df:
            terms = sorted(df)
            conn.execute(
                "INSERT INTO lex_terms(term, df) SELECT * FROM unnest(%s::text[], %s::bigint[])"
                " ON CONFLICT (term) DO UPDATE SET df = lex_terms.df + excluded.df",
                (terms, [df[t] for t in terms]),
            )
            conn.execute("DELETE FROM lex_terms WHERE term = ANY(%s::text[]) AND df <= 0", (terms,))
        seqs = [int(r[0]) for r in rows]
        conn.execute("UPDATE outbox SET applied = true WHERE seq = ANY(%s::bigint[])", (seqs,))
        prune(conn, retain_s)
        return len(rows)


def prune(conn: psycopg.Connection[Any], retain_s: float = RETAIN_S) -> None:
    """Drop applied rows older than ``retain_s`` (the newest applied row stays: head() and
    applied() read it) and record the newest transaction id dropped, which tells a process's
    derived lexical index whose watermark it passes that it missed rows (``lexical_tail.py``)."""
    conn.execute(
        "WITH d AS (DELETE FROM outbox WHERE applied AND at < now() - make_interval(secs => %s)"
        " AND seq < (SELECT max(seq) FROM outbox WHERE applied) RETURNING xid)"
        " UPDATE lex_stats SET pruned_xid = greatest(pruned_xid, (SELECT max(xid) FROM d))"
        " WHERE id = 1 AND EXISTS (SELECT 1 FROM d)",
        (float(retain_s),),
    )


def replay(conn: psycopg.Connection[Any], retain_s: float = RETAIN_S) -> int:
    """Apply every committed row not yet applied (autocommit connection); returns applied()."""
    while _apply_batch(conn, retain_s) == BATCH:
        pass
    return applied(conn)
