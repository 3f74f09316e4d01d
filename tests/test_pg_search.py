"""The search pipeline (``search/hybrid.py``'s ``Searcher``, the real model) over the PostgreSQL
search view gives the embedded backend's hits: the same Units in the same order for hybrid,
dense and lexical queries under filters (D-240), and an ACL change shows at once."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

import pg_stack
from superchargedb.models.embedder import Embedder
from superchargedb.readfilter import ReadFilter
from superchargedb.schemas import AegisQuery
from superchargedb.search.hybrid import Searcher
from superchargedb.settings import Settings
from superchargedb.storage.protocols import UnitRecord
from superchargedb.storage.sqlite.backend import SqliteBackend
from superchargedb.types import Trace

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402

TEXTS = [
    "The deployment pipeline runs the integration tests before every release.",
    "Database backups are kept for thirty days and verified weekly.",
    "Each tenant has its own rate limits per API key.",
    "Phishing simulations are sent to every employee twice a year.",
    "The espresso machine on the third floor needs descaling.",
    "Glacier surveys measure the ice thickness with ground radar.",
    "Invoices are due within thirty days of receipt.",
    "The on-call engineer acknowledges a page within five minutes.",
    "Release notes list every change that ships in the deployment.",
    "Backups of the glacier survey data are copied to a second site.",
]
SCOPES = ["acme/alpha", "acme/alpha/x", "acme/alphabet", "acme/beta"]
QUERIES = [
    "deployment release tests",
    "backups thirty days",
    "glacier radar",
    "rate limits",
    "espresso",
    "who answers a page",
]


def unit(i: int) -> UnitRecord:
    return UnitRecord(
        unit_id=f"u{i:02d}",
        scope=SCOPES[i % len(SCOPES)],
        doc_id=f"d{i}",
        plane="text",
        modality="text",
        text=TEXTS[i],
        acl_owner="alice" if i % 3 else "bob",
        acl_groups=("eng",) if i % 2 else (),
        content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
        created_at=1_700_000_000_000 + i,
    )


def readers() -> list[ReadFilter]:
    return [
        ReadFilter("alice", ("acme",), frozenset({"eng"}), ("text",)),
        ReadFilter("carol", ("acme/alpha",), frozenset({"eng"}), ("text",)),
        ReadFilter("bob", ("acme/alpha", "acme/beta"), frozenset(), ("text",)),
    ]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[tuple[Any, Any]]:
    tmp = tmp_path_factory.mktemp("search")
    key = bytes(range(32))
    lite = SqliteBackend.open(tmp / "lite", dim=embedder.dim, model_id="m", audit_key=key)
    pg = PgBackend.open(
        pg_stack.database(tmp / "pg"),
        dim=embedder.dim,
        model_id="m",
        audit_key=key,
        objects_dir=tmp / "pg-objects",
    )
    units = [unit(i) for i in range(len(TEXTS))]
    vectors = embedder.embed([u.text for u in units])
    for b in (lite, pg):
        with b.write() as tx:
            tx.units.insert_many(units, vectors)
        b.outbox.replay()
    yield lite, pg
    lite.close()
    pg.close()


def hits(b: Any, embedder: Embedder, q: AegisQuery, rf: ReadFilter) -> list[str]:
    searcher = Searcher(Settings(), b.search, embedder, None)
    return [h["unit_id"] for h in searcher.run(q, rf, Trace())]


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_the_pipeline_ranks_as_on_the_embedded_backend(
    both: tuple[Any, Any], embedder: Embedder, mode: str
) -> None:
    lite, pg = both
    shown, longest = 0, 0
    for rf in readers():
        for text in QUERIES:
            q = AegisQuery(q=text, mode=mode, top_k=5)  # type: ignore[arg-type]
            want = hits(lite, embedder, q, rf)
            assert hits(pg, embedder, q, rf) == want, (mode, rf.principal, text)
            shown, longest = shown + len(want), max(longest, len(want))
    assert shown >= 15 and longest >= 2  # not vacuous: hits, and orders of several to compare


def test_an_acl_change_shows_in_the_next_search(both: tuple[Any, Any], embedder: Embedder) -> None:
    _, pg = both
    rf = readers()[1]  # carol reads acme/alpha through the group only
    q = AegisQuery(q="glacier radar", top_k=10)
    before = hits(pg, embedder, q, rf)
    assert "u01" in before  # acme/alpha/x, shared with eng
    with pg.write() as tx:
        tx.units.set_groups(["u01"], ["ops"])
    try:
        assert "u01" not in hits(pg, embedder, q, rf)  # nothing replayed in between
    finally:
        with pg.write() as tx:
            tx.units.set_groups(["u01"], ["eng"])
        pg.outbox.replay()
