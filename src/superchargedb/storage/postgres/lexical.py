"""The lexical leg in SQL: BM25 from a postings table, equal to the embedded backend's (D-201).

Terms are FTS5's own ``porter unicode61`` tokens, from the same tokenizer oracle the embedded
backend's sparse index uses (``storage/sqlite/fts5_tokens.py``), and the query's words are
``query_terms`` as there. The score is the expression of ``storage/sqlite/sparse_search.py``
(FTS5's ``bm25()``): ``sum_i idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl))``
over the query's phrases in query order, ``idf = ln((N - n + 0.5) / (n + 0.5))`` clamped to
1e-6, ties to the older Unit. ``D`` counts the Unit's text tokens plus its ``acl`` column's
tokens, as FTS5 does (one per ancestor scope, one for the owner, one per group: ``acl_len``).
A query word FTS5 reads as several tokens (``err_7731``) is a phrase, counted from positions.

What is transactional: a Unit's postings (``postings``: term, unit, tf, positions) and ``dl`` are
written in the write that stores it, so a committed Unit is a candidate of the next search from
any process. What is derived: the statistics (``lex_terms.df``, ``lex_stats`` N and total
length), maintained by the outbox applier (``outbox.py``) so that concurrent writers never
queue on hot statistic rows; until it has run, a new term counts with ``df`` 1 and ``N`` at
least ``df``. Once the outbox is applied the scores are the embedded backend's to the last bit.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from ...query_terms import query_terms
from ...readfilter import ReadFilter, ancestors
from ..protocols import Scored
from ..sqlite.fts5_tokens import Fts5Tokenizer
from ..sqlite.sparse_segment import K1, TF_MAX, B
from .filter_sql import where_sql

_tok: Fts5Tokenizer | None = None
_tok_lock = threading.Lock()


def tokenizer() -> Fts5Tokenizer:
    """The process's tokenizer (thread-safe; its piece cache is shared by every backend)."""
    global _tok
    with _tok_lock:
        if _tok is None:
            _tok = Fts5Tokenizer()
        return _tok


def acl_len(scope: str, groups: Iterable[str]) -> int:
    """Tokens of the Unit's FTS5 ``acl`` column (``storage/sqlite/acl_tokens.py``): its scope's
    every ancestor, its owner, each distinct group; each a single hashed token."""
    return len(ancestors(scope)) + 1 + len(set(groups))


def postings(text: str, context: str = "") -> tuple[dict[str, tuple[int, list[int]]], int]:
    """``term -> (tf, positions)`` of a Unit's ``text`` and ``context`` (the title line a later
    chunk carries: FTS5's second indexed column) and their token count. The context's positions
    follow the text's after a gap of one, so no phrase matches across the two columns."""
    tok = tokenizer()
    toks = tok.tokens(text)
    pos: dict[str, list[int]] = {}
    for i, t in enumerate(toks):
        pos.setdefault(t, []).append(i)
    n = len(toks)
    if context:
        ctx = tok.tokens(context)
        for i, t in enumerate(ctx, n + 1):
            pos.setdefault(t, []).append(i)
        n += len(ctx)
    return {t: (min(len(p), TF_MAX), p) for t, p in pos.items()}, n


def _phrases(query: str) -> list[tuple[int, tuple[str, ...]]]:
    """The query's phrases ``(query position, tokens)`` (:func:`phrases_of` its terms)."""
    return phrases_of(query_terms(query))


def phrases_of(terms: Sequence[str]) -> list[tuple[int, tuple[str, ...]]]:
    """The phrases ``(query position, tokens)`` of a query's terms (``query_terms``); a term
    with no token is dropped (FTS5 matches nothing for it, and the sparse index skips it)."""
    tok = tokenizer()
    out = []
    for qi, word in enumerate(terms):
        toks = tuple(tok.tokens(word))
        if toks:
            out.append((qi, toks))
    return out


def _phrase_cte(i: int, toks: Sequence[str]) -> tuple[str, list[object]]:
    """Units holding the phrase and its count in each: positions ``x, x+1, ...`` in order."""
    joins = " ".join(
        f"JOIN postings p{j} ON p{j}.unit = p0.unit AND p{j}.term = %s" for j in range(1, len(toks))
    )
    follow = " AND ".join(f"x + {j} = ANY(p{j}.pos)" for j in range(1, len(toks)))
    sql = (
        f"ph{i} AS MATERIALIZED (SELECT unit, f FROM (SELECT p0.unit,"
        f" (SELECT count(*) FROM unnest(p0.pos) AS a(x) WHERE {follow})::integer AS f"
        f" FROM postings p0 {joins} WHERE p0.term = %s) c WHERE f > 0)"
    )
    return sql, [*toks[1:], toks[0]]


def search_sql(terms: Sequence[str], k: int, rf: ReadFilter) -> tuple[str, list[object]] | None:
    """The BM25 top-``k`` statement over what ``rf`` admits for a query's ``terms`` (None: no
    searchable term); it returns ``(key, unit_id, score)`` rows, best first.

    It starts from the query terms' postings (an index-only scan of ``(term, unit) INCLUDE
    (tf)`` once vacuumed) and checks each hit's Unit against the filter. Starting from the
    admitted Units instead was measured no faster under a 1 % filter (1.2 vs 1.1 ms at 30k
    Units, the planner hashes the postings either way) and far slower under a broad one."""
    phrases = phrases_of(terms)
    if not phrases or k <= 0:
        return None
    single = [(qi, t[0]) for qi, t in phrases if len(t) == 1]
    multi = [(qi, t) for qi, t in phrases if len(t) > 1]
    ctes = [
        "st AS MATERIALIZED (SELECT n_docs::float8 AS n, total::float8 AS tot FROM lex_stats)",
        "q AS MATERIALIZED (SELECT q.qi, q.term, coalesce(t.df, 0)::float8 AS df"
        " FROM unnest(%s::integer[], %s::text[]) AS q(qi, term)"
        " LEFT JOIN lex_terms t ON t.term = q.term)",
    ]
    params: list[object] = [[qi for qi, _ in single], [t for _, t in single]]
    hits = ["SELECT p.unit, q.qi, q.df, p.tf FROM q JOIN postings p ON p.term = q.term"]
    for i, (qi, toks) in enumerate(multi):
        sql, ps = _phrase_cte(i, toks)
        ctes.append(sql)
        params += ps
        # A phrase's n is the Units holding it (FTS5 counts them per query), not a statistic.
        hits.append(f"SELECT unit, {int(qi)}, (SELECT count(*) FROM ph{i})::float8, f FROM ph{i}")
    # The idf of each hit: n at least 1 and N at least n while the statistics lag (the module
    # docstring); FTS5's clamp of a non-positive idf to 1e-6.
    ctes.append(
        "h AS (SELECT x.unit, x.qi, x.tf, CASE WHEN v.idf <= 0 THEN 1e-6::float8 ELSE v.idf END"
        f" AS idf FROM ({' UNION ALL '.join(hits)}) AS x(unit, qi, df, tf) CROSS JOIN st,"
        " LATERAL (SELECT ln((greatest(st.n, greatest(x.df, 1)) - greatest(x.df, 1) + 0.5)"
        " / (greatest(x.df, 1) + 0.5)) AS idf) v)"
    )
    ctes.append(
        "a AS MATERIALIZED (SELECT CASE WHEN st.tot > 0 AND st.n > 0 THEN st.tot / st.n"
        " ELSE 1::float8 END AS avgdl FROM st)"
    )
    where, wparams = where_sql(rf)
    sql = (
        "WITH " + ", ".join(ctes) + " SELECT u.id, u.unit_id,"
        " sum(h.idf * ((h.tf::float8 * (%s::float8 + 1.0::float8))"
        " / (h.tf::float8 + %s::float8 * (1::float8 - %s::float8"
        " + %s::float8 * u.dl::float8 / a.avgdl))) ORDER BY h.qi) AS score"
        f" FROM h JOIN units u ON u.id = h.unit CROSS JOIN a WHERE {where}"
        " GROUP BY u.id, u.unit_id ORDER BY score DESC, u.id LIMIT %s"
    )
    return sql, [*params, K1, K1, B, B, *wparams, k]


def search_rows(
    conn: psycopg.Connection[Any], terms: Sequence[str], k: int, rf: ReadFilter
) -> list[tuple[int, str, float]]:
    """The BM25 top ``k`` for ``terms`` as ``(key, unit_id, score)``, best first."""
    built = search_sql(terms, k, rf)
    if built is None:
        return []
    sql, params = built
    return [(int(r[0]), str(r[1]), float(r[2])) for r in conn.execute(sql.encode(), params)]


def search(conn: psycopg.Connection[Any], query: str, k: int, rf: ReadFilter) -> list[Scored]:
    return [Scored(uid, score) for _, uid, score in search_rows(conn, query_terms(query), k, rf)]


def term_deltas(rows: Iterable[tuple[Sequence[str], int]]) -> Counter[str]:
    """Summed document-frequency changes of outbox rows ``(terms, d_df)``."""
    out: Counter[str] = Counter()
    for terms, d in rows:
        for t in terms:
            out[t] += d
    return out
