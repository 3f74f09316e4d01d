"""The search path's storage contract (``storage/protocols_search.py``): each leg and the
hydration return exactly what the filter admits, and the re-check has the last word when a
derived index trails the catalog.

Run on every backend kind by ``test_contract_search.py``; its teeth are tested there too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from contract.backends import DIM, Kind
from contract.checks import READERS, expected, fill, principal, unit
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols_search import Leg, SearchView
from superchargedb.types import Locator

Factory = Callable[..., Kind]
Q = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)


def _admitted(view: SearchView, leg: Leg) -> set[str]:
    """The unit ids a search would show from ``leg`` (re-checked when the leg says so)."""
    if leg.checked:
        rows = view.hits(leg.keys)
    else:
        fused, rows = view.recheck([(k, 1.0) for k in leg.keys], len(leg.keys))
        assert {k for k, _ in fused[: len(rows)]} <= set(rows)
    return {rows[k].unit_id for k in leg.keys if k in rows}


def check_search_legs_follow_the_filter(kind: Factory, tmp: Path) -> None:
    """Dense, lexical (checked and deferred) and hydration: exactly the admitted Units."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        for name, groups, scopes in READERS:
            rf = ReadFilter.of(principal(name, groups, scopes), scopes, ["text"])
            want = expected(rf)
            view = b.search.view(rf)
            assert _admitted(view, view.dense(Q, 50)) == want, (name, "dense")
            for defer in (False, True):
                leg = view.lexical(["glacier", "survey"], 50, defer_check=defer)
                assert _admitted(view, leg) == want, (name, "lexical", defer)
                if not defer:
                    assert leg.checked, "a leg asked to check itself must"
            texts = view.texts(view.dense(Q, 50).keys)
            assert all(t.startswith("glacier survey note") for t in texts.values())
    finally:
        b.close()


def check_recheck_hides_an_unapplied_acl_change(kind: Factory, tmp: Path) -> None:
    """Groups revoked in a committed write whose index update has not been applied yet: no
    leg lets the Unit through, whatever lags."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        alice = principal("alice", {"eng"}, ("acme/alpha",))
        rf = ReadFilter.of(alice, ("acme/alpha",), ["text"])
        assert "u-shared" in _admitted(b.search.view(rf), b.search.view(rf).dense(Q, 50))
        with b.write() as tx:  # as the service's PATCH writes it: groups, then generations
            tx.units.set_groups(["u-shared"], ["ops"])
            tx.units.bump_generations(["acme/alpha"])
        view = b.search.view(rf)
        assert "u-shared" not in _admitted(view, view.dense(Q, 50))
        for defer in (False, True):
            leg = view.lexical(["glacier"], 50, defer_check=defer)
            assert "u-shared" not in _admitted(view, leg), defer
    finally:
        b.close()


def check_hit_rows_round_trip(kind: Factory, tmp: Path) -> None:
    """A hit row carries the Unit's fields, its Locator and its object link."""
    b = kind().open(tmp / "store")
    try:
        base = unit("page", "acme/alpha", "alice", ())
        paged: Any = type(base)(
            **{
                **base.__dict__,
                "locator": Locator(kind="bbox", box=(0.1, 0.2, 0.3, 0.4), page=2),
                "object_key": "acme/alpha/runbook.pdf",
                "source_uri": "acme/alpha/runbook.pdf#page=2",
                "mime": "application/pdf",
            }
        )
        with b.write() as tx:
            tx.units.insert(paged, np.asarray(Q))
            tx.units.insert(unit("plain", "acme/alpha", "alice", ()), np.asarray(Q))
        b.outbox.replay()
        alice = principal("alice", set(), ("acme/alpha",))
        view = b.search.view(ReadFilter.of(alice, ("acme/alpha",), ["text"]))
        leg = view.dense(Q, 10)
        rows = view.hits(leg.keys)
        by_id = {r.unit_id: r for r in rows.values()}
        assert set(by_id) == {"u-page", "u-plain"}
        page, plain = by_id["u-page"], by_id["u-plain"]
        assert page.locator == paged.locator
        assert page.link == "/v1/objects/acme/alpha/runbook.pdf#page=2"
        assert (page.scope, page.doc_id, page.mime) == ("acme/alpha", "doc-page", "application/pdf")
        assert plain.locator is None and plain.link is None
        assert plain.text == "glacier survey note plain"
        _, checked = view.recheck([(k, 1.0) for k in leg.keys], 10)
        assert {r.unit_id: r for r in checked.values()} == by_id
    finally:
        b.close()


CHECKS = {
    f.__name__: f
    for f in (
        check_search_legs_follow_the_filter,
        check_recheck_hides_an_unapplied_acl_change,
        check_hit_rows_round_trip,
    )
}
