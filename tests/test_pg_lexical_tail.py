"""Each process's derived lexical index over PostgreSQL follows the outbox (D-267): another
process's commit is found by the next search, a transaction that drew a lower sequence number
but committed later is not missed, deletes and re-permissions reach it, and a process whose rows
were pruned rebuilds."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pg_stack
from superchargedb.readfilter import ReadFilter

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

from superchargedb.storage.postgres import outbox  # noqa: E402
from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402

DIM = 8
ALICE = ReadFilter(principal="alice", scopes=("acme",), groups=frozenset(), planes=("text",))
BOB = ReadFilter(principal="bob", scopes=("acme",), groups=frozenset({"ops"}), planes=("text",))


def _open(url: str, tmp: Path, name: str) -> PgBackend:
    return PgBackend.open(url, dim=DIM, model_id="m", audit_key=bytes(32), objects_dir=tmp / name)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[PgBackend, PgBackend]]:
    """Two handles on one database, as two API processes have; ``b`` has built its index."""
    url = pg_stack.database(tmp_path)
    a, b = _open(url, tmp_path, "a"), _open(url, tmp_path, "b")
    _insert(a, 0, "the quarterly glacier survey")
    b.lexical_tail.catch_up()
    assert b.lexical_tail.ready and b.lexical_tail.rebuilds == 1
    yield a, b
    a.close()
    b.close()


def _insert(b: PgBackend, i: int, text: str, groups: tuple[str, ...] = ()) -> None:
    with b.write() as tx:
        tx.units.insert(
            dataclasses.replace(pg_stack.unit(i), text=text, acl_groups=groups),
            np.ones(DIM, np.float32),
        )


def _found(b: PgBackend, word: str, rf: ReadFilter = ALICE) -> list[str]:
    """Unit ids of the lexical leg for ``word``, checked; the derived index must answer."""
    view = b.search.view(rf)
    leg = view.lexical([word], 10, defer_check=False)
    assert leg.detail == "bm25 (derived)"
    rows = view.hits(leg.keys)
    return [rows[k].unit_id for k in leg.keys]


def test_another_process_commit_is_found_by_the_next_search(
    two: tuple[PgBackend, PgBackend],
) -> None:
    a, b = two
    assert _found(b, "glacier") == ["u0"]
    _insert(a, 1, "a moraine forms below the glacier")
    assert _found(b, "moraine") == ["u1"]
    with a.write() as tx:
        tx.units.delete(["u1"])
    assert _found(b, "moraine") == []
    assert b.lexical_tail.rebuilds == 1  # all of it by tailing


def test_a_re_permission_reaches_the_index(two: tuple[PgBackend, PgBackend]) -> None:
    a, b = two
    _insert(a, 2, "the crevasse register")
    assert _found(b, "crevasse", BOB) == []  # bob owns nothing, shares no group yet
    with a.write() as tx:
        tx.units.set_groups(["u2"], ["ops"])
    assert _found(b, "crevasse", BOB) == ["u2"]
    # Unchecked, straight from the index's own signature filter: it was refreshed, not
    # merely hidden by the SQL re-check.
    assert b.lexical_tail.candidates(["crevasse"], 10, BOB) != []
    with a.write() as tx:
        tx.units.set_groups(["u2"], [])
    b.lexical_tail.catch_up()
    assert b.lexical_tail.candidates(["crevasse"], 10, BOB) == []
    assert _found(b, "crevasse", BOB) == []


def test_a_lower_sequence_number_committed_later_is_not_missed(
    two: tuple[PgBackend, PgBackend], tmp_path: Path
) -> None:
    """Transaction X appends its outbox row first (the lower ``seq``) and commits after Y;
    the index sees Y, then X. Tailing by ``seq > highest seen`` would lose X for good."""
    a, b = two
    c = _open(a.url, tmp_path, "c")
    appended, release = threading.Event(), threading.Event()

    def slow() -> None:
        with c.write() as tx:
            tx.units.insert(
                dataclasses.replace(pg_stack.unit(3), text="the slow serac"),
                np.ones(DIM, np.float32),
            )
            tx.cur.execute("SELECT 1").fetchone()  # the pipelined insert has run on the server
            appended.set()
            release.wait(30)

    t = threading.Thread(target=slow)
    t.start()
    try:
        assert appended.wait(30)
        _insert(a, 4, "the quick serac")
        assert _found(b, "serac") == ["u4"]
        # X holds the snapshot's xmin below Y: each catch-up reads Y's row again, applies it once.
        applied = b.lexical_tail.applied_ops
        assert _found(b, "serac") == ["u4"]
        assert b.lexical_tail.applied_ops == applied
    finally:
        release.set()
        t.join(30)
    with a._conn() as conn:
        seqs = dict(
            conn.execute(
                "SELECT u.unit_id, max(o.seq) FROM outbox o JOIN units u ON u.id = o.unit"
                " WHERE u.unit_id IN ('u3', 'u4') GROUP BY u.unit_id"
            ).fetchall()
        )
    assert seqs["u3"] < seqs["u4"]  # the scenario is real: X drew the lower number
    assert sorted(_found(b, "serac")) == ["u3", "u4"]
    c.close()


def test_pruned_rows_make_a_behind_process_rebuild(two: tuple[PgBackend, PgBackend]) -> None:
    a, b = two
    _insert(a, 5, "the firn line")
    _insert(a, 6, "the firn core")
    with a._conn() as conn:
        outbox.replay(conn, retain_s=0)  # applied, then pruned at once
        left = conn.execute("SELECT count(*) FROM outbox").fetchone()
    assert left == (1,)  # only the newest applied row stays
    assert sorted(_found(b, "firn")) == ["u5", "u6"]
    assert b.lexical_tail.rebuilds == 2
    _insert(a, 7, "firn again")  # and it tails again from there
    assert sorted(_found(b, "firn")) == ["u5", "u6", "u7"]
    assert b.lexical_tail.rebuilds == 2
