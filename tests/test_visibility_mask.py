"""The vectorized visibility predicate equals its per-signature reference, and the mask cache of
the lexical index never serves a mask across an index reset (no mocks: real signatures)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from isolation_mutations import inject
from superchargedb.storage.sqlite.visibility import SigColumns, Visibility

SCOPES = ["acme", "acme/alpha", "acme/alpha/x", "acme/alphabet", "acme/beta", "other", "other/a"]
PLANES = ["text", "visual", "audio"]
MODS = ["text", "image", "code"]
NAMES = ["alice", "bob", "carol"]
GROUPS = ["g1", "g2", "g3", "g4"]


def random_sig(rng: random.Random) -> tuple[str, str, str, str, tuple[str, ...]]:
    groups = tuple(sorted(rng.sample(GROUPS, rng.randint(0, 3))))
    return (
        rng.choice(SCOPES),
        rng.choice(PLANES),
        rng.choice(MODS),
        rng.choice(NAMES),
        groups,
    )


def random_vis(rng: random.Random) -> Visibility:
    acl = rng.random() < 0.5
    return Visibility(
        scopes=tuple(rng.sample(SCOPES, rng.randint(1, 3))),
        name=rng.choice(NAMES),
        groups=frozenset(rng.sample(GROUPS, rng.randint(0, 3))),
        planes=frozenset(rng.sample(PLANES, rng.randint(1, 3))),
        mods=frozenset(rng.sample(MODS, rng.randint(0, 2))),
        f_owner=rng.choice([None, *NAMES]) if acl else None,
        f_groups=frozenset(rng.sample(GROUPS, rng.randint(0, 2))) if acl else None,
    )


@pytest.mark.parametrize("mutation", [None, "like_prefix", "ancestor"])
def test_vectorized_equals_reference(mutation: str | None, monkeypatch) -> None:
    """Also with a scope rule bug injected: the vectorized form follows the one rule."""
    rng = random.Random(7)
    if mutation:
        inject(monkeypatch, mutation)
    sigs = [random_sig(rng) for _ in range(400)]
    cols = SigColumns()
    for n in (0, 1, 50, 51, 400):  # grows in steps, as the index learns signatures
        cols.sync(sigs, 0, n)
        assert cols.n == n
        for _ in range(40):
            vis = random_vis(rng)
            want = np.fromiter((vis(s) for s in sigs[:n]), dtype=bool, count=n)
            assert np.array_equal(vis.over(cols), want)


def test_new_epoch_starts_over() -> None:
    rng = random.Random(3)
    a = [random_sig(rng) for _ in range(30)]
    b = [random_sig(rng) for _ in range(30)]
    cols = SigColumns()
    cols.sync(a, 0, 30)
    cols.sync(b, 1, 30)  # same length, another index generation: re-read, not reused
    vis = random_vis(rng)
    assert vis.over(cols).tolist() == [vis(s) for s in b]


def test_mask_is_not_reused_after_a_reset(tmp_path: Path) -> None:
    """A reset index restarts its version at 0: the mask cache keys on the epoch too."""
    from superchargedb.storage.sqlite.sparse import SparseIndex
    from superchargedb.storage.sqlite.sparse_search import SparseSearcher

    ix = SparseIndex(tmp_path / "lex")
    sp = SparseSearcher(ix)
    ix.sigs.append(("acme", "text", "text", "alice", ()))
    ix._ensure_docs(1)
    ix.sig[0], ix.live[0], ix.n_docs = 0, True, 1
    vis = Visibility(("acme",), "alice", frozenset(), frozenset({"text"}), frozenset(), None, None)
    with ix.rw.read():
        assert sp.mask(vis.key, vis)[0][:1].tolist() == [True]
    version = ix.version
    ix._reset()
    ix.sigs.append(("other", "text", "text", "bob", ()))
    ix._ensure_docs(1)
    ix.sig[0], ix.live[0], ix.n_docs, ix.version = 0, True, 1, version
    with ix.rw.read():
        assert sp.mask(vis.key, vis)[0][:1].tolist() == [False]


def test_cached_halves_never_cross_principals_or_signatures() -> None:
    """The per-signature halves cached in SigColumns (ACL half per caller, scope half per scope
    list) give the reference answer in any order of callers, including two callers that share
    their groups but not their name (owner-only signatures), and after new signatures arrive."""
    rng = random.Random(11)
    sigs = [random_sig(rng) for _ in range(300)]
    sigs.append(("acme/alpha", "text", "text", "alice", ()))  # owner-only: alice's alone
    cols = SigColumns()
    cols.sync(sigs, 0, 200)

    def vis(name: str, groups: set[str], scopes: tuple[str, ...]) -> Visibility:
        return Visibility(
            scopes=scopes,
            name=name,
            groups=frozenset(groups),
            planes=frozenset(PLANES),
            mods=frozenset(),
            f_owner=None,
            f_groups=None,
        )

    callers = [
        vis("alice", {"g1"}, ("acme",)),
        vis("bob", {"g1"}, ("acme",)),  # same groups and scope, another name
        vis("alice", {"g1"}, ("other",)),  # same caller, another scope
        vis("carol", set(), ("acme", "other")),
    ]
    for n in (200, len(sigs)):
        cols.sync(sigs, 0, n)
        for _ in range(3):
            for v in rng.sample(callers, len(callers)):
                want = np.fromiter((v(s) for s in sigs[:n]), dtype=bool, count=n)
                assert np.array_equal(v.over(cols), want)
    assert callers[0].over(cols)[-1] and not callers[1].over(cols)[-1]
    assert len(cols._parts) <= SigColumns._PARTS


def test_mask_cache_is_bounded_by_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Masks are kept up to a byte budget, least recently used out first; each one cached
    answers like a fresh build."""
    import superchargedb.storage.sqlite.sparse_search as ss
    from superchargedb.storage.sqlite.sparse import SparseIndex

    ix = SparseIndex(tmp_path / "lex")
    sp = ss.SparseSearcher(ix)
    owners = [f"user{i}" for i in range(6)]
    for owner in owners:
        ix.sigs.append(("acme", "text", "text", owner, ()))
    ix._ensure_docs(len(owners))
    for i in range(len(owners)):
        ix.sig[i], ix.live[i] = i, True
    ix.n_docs = len(owners)
    per_mask = len(ix.sig)  # bytes: one bool per catalog id slot
    monkeypatch.setattr(ss, "_MASK_BYTES", 3 * per_mask)

    def vis(owner: str) -> Visibility:
        return Visibility(
            ("acme",), owner, frozenset(), frozenset({"text"}), frozenset(), None, None
        )

    with ix.rw.read():
        for i, owner in enumerate(owners):
            m, full = sp.mask(vis(owner).key, vis(owner))
            assert np.flatnonzero(m).tolist() == [i] and not full
        assert len(sp._masks) == 3 and sp._mask_bytes == 3 * per_mask
        # The three most recent stay cached (the same array comes back), the others rebuild.
        kept = {k[0] for k in sp._masks}
        assert kept == {vis(o).key for o in owners[3:]}
        first = sp.mask(vis(owners[5]).key, vis(owners[5]))[0]
        assert first is sp.mask(vis(owners[5]).key, vis(owners[5]))[0]
        assert np.flatnonzero(sp.mask(vis(owners[0]).key, vis(owners[0]))[0]).tolist() == [0]
        assert sp._mask_bytes == 3 * per_mask
    sp.drop_masks()
    assert not sp._masks and sp._mask_bytes == 0
