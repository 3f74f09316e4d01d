"""The PostgreSQL lexical leg ranks exactly as the embedded backend: the same Units in both
stores, the same queries and filters, the same top 10 in the same order; and its BM25 values
are FTS5's ``bm25()`` on the embedded catalog (D-201)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pg_stack
from superchargedb.query_terms import query_terms
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import UnitRecord
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.storage.sqlite.lexical_leg import fts_match
from superchargedb.types import Principal

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

from superchargedb.storage.postgres import lexical  # noqa: E402
from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402
from superchargedb.storage.postgres.search_store import PgSearchStore  # noqa: E402

DIM = 8
KEY = bytes(range(32))
WORDS = (  # most frequent first  # noqa: SIM905
    "the of and a in to is data dataset ice melt runoff river delta sediment core sample"
    " drill station winter summer running runs runner ran measure measured measurement model"
    " models modelling glacier survey café naïve résumé Zürich über 2021 2022 7731 err_7731"
    " x-ray co-operation don't it's alpha beta gamma delta omega"
).split()
SCOPES = ["acme", "acme/alpha", "acme/alpha/x", "acme/beta", "beta"]
GROUPS = [(), ("eng",), ("ops",), ("eng", "ops"), ("eng", "ops", "sales")]
OWNERS = ["alice", "bob", "carol"]
QUERIES = [
    "glacier",
    "glacier survey",
    "ice melt runoff",
    "running",
    "running runs ran",
    "measurement models",
    "the glacier of ice",
    "err_7731",
    "err_7731 drill",
    "x-ray station",
    "co-operation",
    "cafe zurich",
    "Café Zürich",
    "naive resume",
    "2021 data",
    "zzzunknown",
    "zzzunknown glacier",
    "delta delta",
    "alpha beta gamma delta omega",
    "don't",
    "sample core drill winter summer",
]


def corpus(n: int = 400) -> list[UnitRecord]:
    rng = random.Random(7)
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    out = []
    for i in range(n):
        words = rng.choices(WORDS, weights, k=rng.randint(3, 40))
        scope, groups = rng.choice(SCOPES), rng.choice(GROUPS)
        if i % 17 == 0:  # the same text, scope and ACL: tied scores, broken by age in both
            words, scope, groups = ["glacier", "survey", "glacier"], "acme/alpha", ("eng",)
        out.append(
            UnitRecord(
                unit_id=f"u{i:04d}",
                scope=scope,
                doc_id=f"d{i // 3}",
                plane="text",
                modality="text",
                text=" ".join(words),
                acl_owner=rng.choice(OWNERS),
                acl_groups=groups,
                content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
                created_at=1_700_000_000_000 + i,
                # A later chunk's title line: FTS5's second column, phrases within it only.
                context="" if i % 17 == 0 or i % 5 else f"{rng.choice(WORDS)} err_7731 report",
            )
        )
    return out


def readers() -> list[ReadFilter]:
    def rf(name: str, groups: set[str], scopes: tuple[str, ...]) -> ReadFilter:
        p = Principal(
            id=f"p-{name}",
            name=name,
            perms=frozenset({"read"}),
            tier="pro",
            scopes=scopes,
            active_scope=scopes[0],
            groups=frozenset(groups),
        )
        return ReadFilter.of(p, scopes, ["text"])

    return [
        rf("alice", {"eng", "ops", "sales"}, ("acme", "beta")),
        rf("bob", {"eng"}, ("acme/alpha",)),
        rf("carol", set(), ("acme",)),
    ]


def vec(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIM).astype(np.float32)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    tmp = tmp_path_factory.mktemp("lexical")
    lite = SqliteBackend.open(tmp / "lite", dim=DIM, model_id="m", audit_key=KEY)
    pg = PgBackend.open(
        pg_stack.database(tmp / "pg"),
        dim=DIM,
        model_id="m",
        audit_key=KEY,
        objects_dir=tmp / "pg-objects",
    )
    units = corpus()
    for b in (lite, pg):
        for start in range(0, len(units), 100):
            with b.write() as tx:
                for i, u in enumerate(units[start : start + 100], start):
                    tx.units.insert(u, vec(i))
        with b.write() as tx:  # history both indexes must follow: removals and ACL changes
            tx.units.delete([u.unit_id for u in units[5::23]])
            tx.units.set_groups([u.unit_id for u in units[7::19]], ["eng", "sales"])
        b.outbox.replay()
    yield lite, pg
    lite.close()
    pg.close()


def fts5_scores(lite: SqliteBackend, query: str, rf: ReadFilter) -> dict[str, float]:
    """FTS5's own ``bm25()`` (negated: higher is better) of every match the reader may see."""
    match = fts_match(query_terms(query), rf.scopes, rf.principal, rf.groups)
    assert match is not None
    rows = lite.catalog.reader().execute(
        "SELECT u.unit_id, -bm25(units_fts, 1.0, 1.0, 0.0) FROM units_fts f"
        " JOIN units u ON u.id = f.rowid WHERE units_fts MATCH ?",
        (match,),
    )
    return {r[0]: r[1] for r in rows}


@pytest.mark.parametrize("query", QUERIES)
def test_same_top10_as_the_embedded_backend(both: tuple[Any, Any], query: str) -> None:
    lite, pg = both
    for rf in readers():
        want = [h.unit_id for h in lite.lexical.search(query, 10, rf)]
        got = pg.lexical.search(query, 10, rf)
        assert [h.unit_id for h in got] == want, (query, rf.principal)
        if not got:
            continue
        ref = fts5_scores(lite, query, rf)
        for h in got:
            assert h.score == ref[h.unit_id], (query, h.unit_id, h.score - ref[h.unit_id])


@pytest.mark.parametrize("path", ["postings", "derived"])
@pytest.mark.parametrize("query", QUERIES)
def test_the_search_views_lexical_leg_ranks_as_the_embedded_ones(
    both: tuple[Any, Any], query: str, path: str
) -> None:
    """The search path's leg (``SearchView.lexical``, integer keys hydrated to hit rows) gives
    the embedded backend's Units in its order, whether or not the caller defers the check: from
    the postings in SQL, and from the process's derived index (D-267), which answers unchecked
    when the caller re-checks and leaves a query with a phrase to SQL."""
    lite, pg = both
    tail = None
    if path == "derived":
        tail = pg.lexical_tail
        tail.catch_up()
        assert tail.ready
    store = PgSearchStore(pg._conn, pg.exact_max, tail)
    terms = query_terms(query)
    phrase = any(len(toks) > 1 for _, toks in lexical.phrases_of(terms))
    derived = path == "derived" and not phrase
    for rf in readers():
        want_view = lite.search.view(rf)
        want_leg = want_view.lexical(terms, 10, defer_check=False)
        want_rows = want_view.hits(want_leg.keys)
        want = [want_rows[k].unit_id for k in want_leg.keys]
        for defer in (False, True):
            view = store.view(rf)
            leg = view.lexical(terms, 10, defer_check=defer)
            rows = view.hits(leg.keys)
            assert leg.detail == ("bm25 (derived)" if derived else "bm25 (postings)")
            assert leg.checked is not (derived and defer)
            assert [rows[k].unit_id for k in leg.keys] == want, (query, rf.principal, defer)


def test_the_corpus_has_ties_phrases_and_misses(both: tuple[Any, Any]) -> None:
    """The comparison above is not vacuous: it covers tied scores, a phrase query and a query
    with no match."""
    _, pg = both
    rf = readers()[0]
    top = pg.lexical.search("glacier survey", 10, rf)
    assert len(top) == 10 and len({h.score for h in top}) < 10  # ties
    assert pg.lexical.search("err_7731", 10, rf)
    assert lexical._phrases("err_7731") == [(0, ("err", "7731"))]
    assert pg.lexical.search("zzzunknown", 10, rf) == []


def test_acl_length_is_fts5s(both: tuple[Any, Any]) -> None:
    """FTS5 counts the acl column's tokens in a Unit's length; ``acl_len`` says how many."""
    from superchargedb.storage.sqlite.acl_tokens import acl_tokens

    tok = lexical.tokenizer()
    for scope in SCOPES:
        for groups in GROUPS:
            text = acl_tokens(scope, "alice", groups)
            assert len(tok.tokens(text)) == lexical.acl_len(scope, groups)


def test_a_committed_unit_is_found_before_the_statistics_follow(tmp_path: Path) -> None:
    """Postings are written with the Unit: the next search finds it even while the outbox
    (the statistics) is not applied yet, and after the replay its score is exact."""
    pg = PgBackend.open(
        pg_stack.database(tmp_path / "pg"),
        dim=DIM,
        model_id="m",
        audit_key=KEY,
        objects_dir=tmp_path / "objects",
    )
    try:
        rf = readers()[0]
        u = corpus(1)[0]
        with pg.write() as tx:
            tx.units.insert(u, vec(0))
        assert pg.outbox.applied() < pg.outbox.head()
        before = pg.lexical.search("glacier", 5, rf)
        assert [h.unit_id for h in before] == [u.unit_id]
        pg.outbox.replay()
        after = pg.lexical.search("glacier", 5, rf)
        assert [h.unit_id for h in after] == [u.unit_id]
        # One document ("glacier survey glacier": tf 2, D = avgdl): N = n = 1 gives idf
        # ln(0.5 / 1.5) < 0, which FTS5 clamps to 1e-6.
        assert after[0].score == pytest.approx(1e-6 * 2 * 2.2 / (2 + 1.2), rel=1e-9)
    finally:
        pg.close()
