"""The lexical leg: FTS5 BM25 over the catalog with scope/ACL pushdown (DECISIONS 23, 24).

User text never reaches FTS5 syntax: the query is an OR of double-quoted ``\\w+`` tokens minus the
Lucene stopwords, AND-ed with the caller's hashed ACL tokens in the weight-0 ``acl`` column.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence

from ..auth.scopes import group_token, owner_token, scope_token

# Lucene's English stopword set (what the published BM25 baselines use).
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
_TOKEN = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 64


def query_terms(q: str) -> list[str]:
    """Distinct lower-cased ``\\w+`` tokens of ``q`` minus stopwords, in order."""
    seen: dict[str, None] = {}
    for t in _TOKEN.findall(q.lower()):
        if t not in STOPWORDS and t not in seen:
            seen[t] = None
    return list(seen)[:MAX_TERMS]


def fts_match(
    terms: Sequence[str], scopes: Iterable[str], owner: str, groups: Iterable[str]
) -> str | None:
    """The MATCH expression, or None when the query has no searchable term."""
    if not terms:
        return None
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    scope_part = " OR ".join(scope_token(s) for s in scopes)
    who = [owner_token(owner)] + [group_token(g) for g in sorted(groups)]
    acl_part = " OR ".join(who)
    return f"acl : ({scope_part}) AND acl : ({acl_part}) AND {{text context}} : ({quoted})"


def lexical_search(
    conn: sqlite3.Connection,
    match: str,
    visible_sql: str,
    params: Sequence[object],
    limit: int,
) -> list[int]:
    """Catalog rowids ranked by BM25 (text and context weight 1, acl 0), best first.

    ``visible_sql`` re-states the exact visibility predicate on ``u`` (defence in depth against
    token collisions, plus plane/modality/time/doc filters the FTS index does not hold).
    """
    sql = (
        "SELECT f.rowid FROM units_fts f JOIN units u ON u.id = f.rowid"
        f" WHERE units_fts MATCH ? AND {visible_sql}"
        " ORDER BY bm25(units_fts, 1.0, 1.0, 0.0), f.rowid LIMIT ?"
    )
    return [r[0] for r in conn.execute(sql, (match, *params, limit))]
