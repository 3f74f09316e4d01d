"""Fusion and the FTS query builder against naive oracles."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from superchargedb.query_terms import STOPWORDS, query_terms
from superchargedb.search.fusion import rrf
from superchargedb.storage.sqlite.lexical_leg import fts_match


def naive_rrf(lists, k=60):
    docs = {d for lst in lists for d in lst}
    scores = {}
    for d in docs:
        s = 0.0
        for lst in lists:
            if d in lst:
                s += 1.0 / (k + lst.index(d) + 1)
        scores[d] = s
    return sorted(scores.items(), key=lambda kv: (-kv[1], str(kv[0])))


@given(
    st.lists(st.integers(0, 50), unique=True, max_size=30),
    st.lists(st.integers(0, 50), unique=True, max_size=30),
)
def test_rrf_matches_naive(a, b):
    got = rrf([a, b], k=60)
    want = naive_rrf([a, b], k=60)
    assert [d for d, _ in got] == [d for d, _ in want]
    for (_, s1), (_, s2) in zip(got, want, strict=True):
        assert abs(s1 - s2) < 1e-12


def test_rrf_ties_broken_by_tiebreak():
    got = rrf([[1], [2]], k=60, tiebreak={1: "b", 2: "a"})
    assert [d for d, _ in got] == [2, 1]


def test_query_terms_drop_stopwords_and_dedupe():
    assert query_terms("The cause of the failover, the CAUSE!") == ["cause", "failover"]
    assert not set(query_terms("a an the of and or")) & STOPWORDS


@given(st.text(max_size=80))
def test_any_user_text_is_a_valid_fts_query(q):
    """Whatever the user types, the MATCH expression parses (never an FTS5 syntax error)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5(text, context, acl, tokenize='porter unicode61')"
    )
    conn.execute("INSERT INTO f(text, acl) VALUES ('hello world', 'sabc oabc')")
    match = fts_match(query_terms(q), ["acme"], "alice", ["g1"])
    if match is not None:
        conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,)).fetchall()
