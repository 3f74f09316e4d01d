"""Media derived before Units kept their words, queued to be derived again (D-215).

``superchargedb reindex --rederive`` finds each document whose newest finished derivation job
produced utterance or page Units that have no word table (``unit_words``: they were derived
before D-172/D-210, so they are also cut the old way: whole paragraphs of speech, Tesseract's
page-wide blocks) and queues that job again, with the same request (payload, principal, scope,
ACL and dedupe key, so a later ingest of the same object finds the new job). The worker then
replaces the document's Units as any derivation does. The copy reserves no media quota (the
document already counts) and, like any job, leaves the old Units in place if it fails.
"""

from __future__ import annotations

import json
import sqlite3

from .jobs import JobQueue

WORDED = ("utterance", "scan", "pdf_page")  # derived modalities that now keep a word table
COST_KEYS = ("cost_pages", "cost_ms")


def stale_jobs(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """The newest finished derivation per request whose Units lack word tables."""
    cur = conn.execute(
        "SELECT * FROM jobs WHERE kind = 'derive' AND state != 'failed' ORDER BY created_at"
    )
    cur.row_factory = sqlite3.Row
    newest: dict[str, sqlite3.Row] = {}
    for r in cur:
        newest[str(r["dedupe_key"])] = r
    marks = ",".join("?" * len(WORDED))
    out = []
    for r in newest.values():
        if r["state"] != "done":  # queued or running: it will keep words already
            continue
        ids = json.loads(r["result"] or "{}").get("unit_ids") or []
        if not ids:
            continue
        found = conn.execute(
            f"SELECT 1 FROM units u WHERE u.unit_id IN ({','.join('?' * len(ids))})"
            f" AND u.modality IN ({marks})"
            " AND NOT EXISTS (SELECT 1 FROM unit_words w WHERE w.unit = u.id) LIMIT 1",
            [*ids, *WORDED],
        ).fetchone()
        if found is not None:
            out.append(r)
    return out


def requeue(conn: sqlite3.Connection, queue: JobQueue, rows: list[sqlite3.Row]) -> list[str]:
    """Queue each job again, in the caller's transaction."""
    ids = []
    for r in rows:
        payload = {k: v for k, v in json.loads(r["payload"]).items() if k not in COST_KEYS}
        ids.append(
            queue.enqueue(
                conn,
                "derive",
                payload,
                principal=r["principal"],
                scope=r["scope"],
                acl_owner=r["acl_owner"],
                acl_groups=json.loads(r["acl_groups"]),
                dedupe_key=r["dedupe_key"],
            )
        )
    return ids
