"""VectorStore against a numpy brute-force oracle, with real usearch and real temp dirs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import superchargedb  # noqa: F401  (imports onnxruntime before usearch: import order matters)
from superchargedb.errors import UnavailableError
from superchargedb.storage.vectors import PLANES, VectorOp, VectorStore

DIM = 384
N = 20_000
K = 10


def clustered(n: int, dim: int, seed: int, centres: int = 200, noise: float = 0.35) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def adds(keys: range | list[int], vecs: np.ndarray, plane: str = "text", seq0: int = 0) -> list:
    return [VectorOp(seq0 + i + 1, "add", plane, k, vecs[i]) for i, k in enumerate(keys)]


def oracle(
    stored: np.ndarray, keys: np.ndarray, q: np.ndarray, k: int, cand: np.ndarray | None = None
) -> list[int]:
    """Brute force over the f16 vectors as stored; ties by key asc."""
    scores = (stored @ q) / np.linalg.norm(stored, axis=1) / np.linalg.norm(q)
    mask = np.ones(len(keys), bool) if cand is None else np.isin(keys, cand)
    ks, ss = keys[mask], scores[mask]
    return [int(x) for x in ks[np.lexsort((ks, -ss))[:k]]]


# Building the 20k-vector graph takes 10-20 s on the 2-core machine: the tests over it run in
# `make test` (the slow tier), the smaller stores below in the fast tier too.
BIG = pytest.mark.slow


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory):
    x = clustered(N, DIM, seed=7)
    keys = np.arange(1, N + 1, dtype=np.uint64)
    # The production expansion_add (128): at 64 the graph built on a loaded machine sometimes fell
    # just under the 0.95 recall bar (non-deterministic multi-threaded build).
    store = VectorStore(tmp_path_factory.mktemp("big"), DIM, "test-model", expansion_add=128)
    store.load()
    store.rebuild("text", zip(keys.tolist(), x, strict=True), seq=N)
    stored = store.get("text", keys)  # the data as stored; the oracle ranks it independently
    rng = np.random.default_rng(11)
    qs = x[rng.integers(0, N, 20)] + 0.1 * rng.standard_normal((20, DIM)).astype(np.float32)
    return store, keys, stored, qs


@BIG
def test_stored_rows_are_the_f16_of_the_normalized_input(big) -> None:
    store, keys, stored, _ = big
    assert store.count("text") == N
    # within one f16 ulp: the store renormalizes before the f16 cast
    expected = clustered(N, DIM, seed=7)[:50].astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(store.get("text", keys[:50]), expected, rtol=1e-3, atol=1e-4)


@BIG
def test_one_percent_filter_is_exact_with_recall_one(big) -> None:
    store, keys, stored, qs = big
    rng = np.random.default_rng(1)
    for q in qs:
        cand = rng.choice(keys, N // 100, replace=False)
        hits, plan = store.search_planned("text", q, K, cand)
        assert plan == "exact"
        assert [h for h, _ in hits] == oracle(stored, keys, q, K, cand)
        scores = np.array([s for _, s in hits])
        assert (np.diff(scores) <= 0).all()
        want = stored[np.array([h for h, _ in hits]) - 1] @ (q / np.linalg.norm(q))
        np.testing.assert_allclose(
            scores, want / np.linalg.norm(stored[[h - 1 for h, _ in hits]], axis=1), atol=1e-5
        )


@BIG
@pytest.mark.parametrize("fraction", [0.05, 0.20, 1.0])
def test_hnsw_branch_recall_at_least_095(big, fraction: float) -> None:
    store, keys, stored, qs = big
    rng = np.random.default_rng(2)
    recalls = []
    for q in qs:
        cand = None if fraction == 1.0 else rng.choice(keys, int(N * fraction), replace=False)
        hits, plan = store.search_planned("text", q, K, cand, exact_max=0, exact_fraction=0.0)
        assert plan == "hnsw"
        assert len(hits) == K
        if cand is not None:
            assert np.isin([h for h, _ in hits], cand).all()
        truth = set(oracle(stored, keys, q, K, cand))
        recalls.append(len(truth & {h for h, _ in hits}) / K)
    assert np.mean(recalls) >= 0.95, recalls


@BIG
def test_full_candidate_array_matches_unfiltered(big) -> None:
    store, keys, stored, qs = big
    hits, plan = store.search_planned("text", qs[0], K, keys)  # 20k <= exact_max: exact
    assert plan == "exact"
    assert [h for h, _ in hits] == oracle(stored, keys, qs[0], K)


@BIG
@pytest.mark.parametrize(
    ("size", "exact_max", "fraction", "plan"),
    [
        (1000, 1000, 0.0, "exact"),
        (1001, 1000, 0.0, "hnsw"),
        (1000, 0, 0.05, "exact"),  # 1000 == 5 % of 20k
        (1001, 0, 0.05, "hnsw"),
    ],
)
def test_planner_threshold_both_sides(big, size, exact_max, fraction, plan) -> None:
    store, keys, stored, qs = big
    cand = np.random.default_rng(3).choice(keys, size, replace=False)
    hits, got = store.search_planned(
        "text", qs[1], K, cand, exact_max=exact_max, exact_fraction=fraction
    )
    assert got == plan
    store.search("text", qs[1], K, cand, exact_max=exact_max, exact_fraction=fraction)
    assert store.last_plan == plan
    assert np.isin([h for h, _ in hits], cand).all() and len(hits) == K


@BIG
@pytest.mark.parametrize("force_hnsw", [False, True])
def test_filter_with_fewer_than_k_keys_returns_exactly_those(big, force_hnsw: bool) -> None:
    store, keys, _, qs = big
    cand = np.array([5, 17, 19_999, N + 100, N + 101], dtype=np.uint64)  # two are not indexed
    kw = {"exact_max": 0, "exact_fraction": 0.0} if force_hnsw else {}
    hits = store.search("text", qs[2], K, cand, **kw)
    assert sorted(h for h, _ in hits) == [5, 17, 19_999]
    assert store.search("text", qs[2], K, np.array([], dtype=np.uint64)) == []


def test_exact_ties_break_by_key_even_with_many_duplicates(tmp_path: Path) -> None:
    store = VectorStore(tmp_path, 32, "m")
    x = clustered(400, 32, seed=3, centres=10)
    x[100:300] = x[0]  # 200 identical vectors (boilerplate chunks), more than any shortlist
    store.apply(adds(list(range(1000, 600, -1)), x))  # keys inserted in descending order
    cand = np.arange(600, 1001, dtype=np.uint64)
    hits, plan = store.search_planned("text", x[0], 5, cand)
    assert plan == "exact"
    dup_keys = sorted({1000 - i for i in [0, *range(100, 300)]})
    assert [h for h, _ in hits] == dup_keys[:5]


def small_store(path: Path, n: int = 600, dim: int = 32, seed: int = 5) -> tuple:
    store = VectorStore(path, dim, "m")
    store.load()
    x = clustered(n, dim, seed=seed, centres=20)
    ops = adds(range(1, n + 1), x)
    store.apply(ops)
    return store, x, ops


def test_apply_is_idempotent(tmp_path: Path) -> None:
    store, x, ops = small_store(tmp_path)
    before = store.keys("text").copy()
    store.apply(ops)  # same seqs: skipped
    assert store.applied_seq("text") == len(ops)
    # same keys under new seqs (a replay after a crash before checkpoint): contains() guards add
    store.apply(adds(range(1, 601), x, seq0=len(ops)))
    np.testing.assert_array_equal(store.keys("text"), before)
    store.apply([VectorOp(5000, "remove", "text", 99_999, None)])  # missing key: ignored
    store.apply([VectorOp(5001, "add", "text", 700, None)])  # Unit since deleted: skipped
    assert store.count("text") == 600 and store.applied_seq("text") == 5001
    assert store.tombstones("text") == 0


def test_remove_then_search_never_returns_key(tmp_path: Path) -> None:
    store, x, ops = small_store(tmp_path)
    gone = list(range(1, 601, 3))
    store.apply([VectorOp(1000 + i, "remove", "text", k, None) for i, k in enumerate(gone)])
    assert store.count("text") == 600 - len(gone)
    all_keys = np.arange(1, 601, dtype=np.uint64)
    for key in gone[:20]:
        q = x[key - 1]
        for kw in ({}, {"candidates": all_keys}, {"candidates": all_keys, "exact_max": 0}):
            got = {h for h, _ in store.search("text", q, 50, **kw)}
            assert not got & set(gone)
        assert not store.contains("text", key)
    with pytest.raises(KeyError):
        store.get("text", [gone[0]])


def test_checkpoint_load_round_trip(tmp_path: Path) -> None:
    store, x, ops = small_store(tmp_path)
    store.apply([VectorOp(601, "remove", "text", 7, None)])
    store.apply(adds(range(1, 11), x, plane="audio", seq0=601))
    store.checkpoint()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audio.611.usearch", "meta.json", "text.601.usearch"]
    again = VectorStore(tmp_path, 32, "m")
    marks = again.load()
    assert marks == {"text": 601, "visual": 0, "audio": 611, "doc_visual": 0}
    for plane in PLANES:
        np.testing.assert_array_equal(again.keys(plane), store.keys(plane))
        assert again.durable_seq(plane) == again.applied_seq(plane) == marks[plane]
    assert again.tombstones("text") == 1
    np.testing.assert_array_equal(again.get("text", [1, 2]), store.get("text", [1, 2]))
    # a watermark-only advance renames the file; no change means no new file
    again.apply([], through=700)
    again.checkpoint()
    again.checkpoint()
    assert {p.name for p in tmp_path.glob("text.*")} == {"text.700.usearch"}
    assert VectorStore(tmp_path, 32, "m").load()["visual"] == 700


def test_truncated_newest_falls_back_to_previous_then_empty(tmp_path: Path) -> None:
    store, x, ops = small_store(tmp_path)
    store.checkpoint()
    prev = tmp_path / "text.600.usearch"
    keep = tmp_path.parent / (tmp_path.name + "-keep.usearch")
    shutil.copy(prev, keep)
    old_keys = store.keys("text")
    store.apply(adds(range(601, 651), clustered(50, 32, seed=9), seq0=600))
    store.checkpoint()
    shutil.copy(keep, prev)  # as if we crashed before cleanup of the older file
    newest = tmp_path / "text.650.usearch"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    again = VectorStore(tmp_path, 32, "m")
    assert again.load()["text"] == 600
    np.testing.assert_array_equal(again.keys("text"), old_keys)
    assert (tmp_path / "text.650.usearch.corrupt").exists()
    prev.write_bytes(prev.read_bytes()[:-10])  # now the only file is truncated too
    third = VectorStore(tmp_path, 32, "m")
    assert third.load()["text"] == 0 and third.count("text") == 0


def test_meta_mismatch_raises(tmp_path: Path) -> None:
    store, _, _ = small_store(tmp_path)
    store.checkpoint()
    for dim, model in ((32, "other-model"), (64, "m")):
        with pytest.raises(UnavailableError, match="superchargedb reindex"):
            VectorStore(tmp_path, dim, model).load()


def test_compaction_keeps_live_set(tmp_path: Path) -> None:
    store, x, ops = small_store(tmp_path)
    gone = list(range(1, 601, 4)) + list(range(2, 601, 8))
    store.apply([VectorOp(1000 + i, "remove", "text", k, None) for i, k in enumerate(gone)])
    assert store.needs_compaction("text")
    live = store.keys("text")
    vecs = store.get("text", live)
    hits_before = store.search("text", x[2], 10)
    store.compact("text")
    assert not store.needs_compaction("text") and store.tombstones("text") == 0
    np.testing.assert_array_equal(store.keys("text"), live)
    np.testing.assert_array_equal(store.get("text", live), vecs)
    # HNSW is approximate and the rebuilt graph differs: judge both against the exact top 10
    # of the live set (an identical order before and after failed now and then under load).
    q = x[2] / np.linalg.norm(x[2])
    sims = (vecs.astype(np.float32) / np.linalg.norm(vecs, axis=1, keepdims=True)) @ q
    exact = {int(k) for k in live[np.argsort(-sims)[:10]]}
    after = [h for h, _ in store.search("text", x[2], 10)]
    assert len(after) == 10 and set(after) <= {int(k) for k in live}
    assert len(exact & set(after)) >= 9 and len(exact & {h for h, _ in hits_before}) >= 9
    store.checkpoint()
    assert VectorStore(tmp_path, 32, "m").load()["text"] == store.applied_seq("text")


def test_concurrent_searches_while_applying(tmp_path: Path) -> None:
    store, x, _ = small_store(tmp_path, n=300)
    more = clustered(600, 32, seed=13)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                store.search("text", x[0], 5)
                store.search("text", x[0], 5, np.arange(1, 200, dtype=np.uint64))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    seq = 300
    for i in range(0, 600, 20):
        store.apply(adds(range(1000 + i, 1020 + i), more[i : i + 20], seq0=seq))
        seq += 20
        if i % 200 == 0:
            seq += 1
            store.apply([VectorOp(seq, "remove", "text", 1 + i // 20, None)])
    store.checkpoint()
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert store.count("text") == 900 - 3


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np
    import superchargedb
    from superchargedb.storage.vectors import VectorOp, VectorStore

    store = VectorStore(Path(sys.argv[1]), 32, "m")
    store.load()
    rng = np.random.default_rng(21)
    store.apply([VectorOp(600 + i, "add", "text", 5000 + i, rng.standard_normal(32))
                 for i in range(1, 41)])
    store.apply([VectorOp(700, "remove", "text", 3, None)])
    store.checkpoint()
    print("survived")
    """
)


@pytest.mark.parametrize(
    ("point", "mark"),
    [("vectors.checkpoint.mid_save", 600), ("vectors.checkpoint.before_cleanup", 700)],
)
def test_sigkill_during_checkpoint_keeps_a_valid_watermark(
    tmp_path: Path, point: str, mark: int
) -> None:
    store, _, _ = small_store(tmp_path)
    store.checkpoint()
    before = store.keys("text")
    src = str(Path(superchargedb.__file__).resolve().parents[1])
    env = {**os.environ, "SCDB_CRASH_AT": point, "PYTHONPATH": src}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert b"survived" not in proc.stdout
    again = VectorStore(tmp_path, 32, "m")
    assert again.load()["text"] == mark
    if mark == 600:
        np.testing.assert_array_equal(again.keys("text"), before)
    else:
        expected = np.union1d(before[before != 3], np.arange(5001, 5041, dtype=np.uint64))
        np.testing.assert_array_equal(again.keys("text"), expected)
    assert not (tmp_path / "text.tmp").exists()


def _mirror_matches_index(store: VectorStore, plane: str = "text") -> None:
    """The plane's row mirror holds exactly the index's keys, with its f16 rows bit for bit."""
    index = store._ix[plane]
    keys = np.sort(np.asarray(index.keys, dtype=np.uint64))
    mirror = store._rows[plane]
    assert mirror is not None
    probe = np.arange(0, int(keys.max()) + 50, dtype=np.uint64)
    got, rows = mirror.present(probe)
    assert got.tolist() == keys.tolist()
    want = store._fetch(index, keys)
    assert np.array_equal(rows.view(np.uint16), want.view(np.uint16))


def test_row_mirror_follows_the_index_through_every_change(tmp_path: Path) -> None:
    """Adds, removes, re-adds, compaction and a reload: the mirror the exact scans read stays
    the index's own rows, and the exact plan ranks the same with or without it."""
    x = clustered(3000, DIM, seed=3)
    store = VectorStore(tmp_path, DIM, "test-model")
    store.load()
    store.apply(adds(range(1, 2001), x[:2000]))
    gone = list(range(1, 2001, 7))
    store.apply([VectorOp(3000 + i, "remove", "text", k, None) for i, k in enumerate(gone)])
    store.apply(adds([1, 8], x[2000:2002], seq0=4000))  # removed keys come back
    store.apply(adds(range(2001, 2900), x[2002:2901], seq0=5000))
    _mirror_matches_index(store)
    cand = np.arange(1, 2900, 3, dtype=np.uint64)
    for q in x[2950:2955]:
        with_rows = store.search("text", q, 10, cand)
        mirror, store._rows["text"] = store._rows["text"], None
        without = store.search("text", q, 10, cand)
        store._rows["text"] = mirror
        assert with_rows == without and len(with_rows) == 10
    store.compact("text")
    _mirror_matches_index(store)
    store.checkpoint()
    again = VectorStore(tmp_path, DIM, "test-model")
    again.load()
    _mirror_matches_index(again)
    assert again.rows_nbytes() >= again.count("text") * DIM * 2


def test_keys_too_sparse_for_the_mirror_fall_back_to_the_index(tmp_path: Path) -> None:
    x = clustered(3, DIM, seed=5)
    store = VectorStore(tmp_path, DIM, "test-model")
    store.load()
    far = 2**40
    store.apply(adds([1, 2, far], x))
    assert store._rows["text"] is None  # a 2**40-entry key table is not built
    cand = np.array([1, 2, far], dtype=np.uint64)
    assert store.search("text", x[2], 1, cand)[0][0] == far
    assert store.get("text", [far]).shape == (1, DIM)
    with pytest.raises(KeyError):
        store.get("text", [3])


class _SlowAdds:
    """The plane's index, each ``add`` taking a while and counted (everything else passes)."""

    def __init__(self, index: object) -> None:
        self._index = index
        self.adds = 0
        self.started = threading.Event()

    def add(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        self.started.set()
        time.sleep(0.05)
        self._index.add(keys, vecs)  # type: ignore[attr-defined]
        self.adds += 1

    def __len__(self) -> int:
        return len(self._index)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self._index, name)


def test_a_search_runs_between_the_chunks_of_a_large_add(tmp_path: Path) -> None:
    """A bulk import's add is applied in chunks, each under its own write lock, and the lock
    lets queued searches in between: a search started during a 6-chunk add returns before the
    add ends, and the add lands whole (the row mirror in lockstep)."""
    from superchargedb.storage import vectors as V

    store, x, _ = small_store(tmp_path, n=300)
    more = clustered(6 * V.ADD_CHUNK, 32, seed=17)
    slow = _SlowAdds(store._ix["text"])
    store._ix["text"] = slow  # type: ignore[assignment]
    adder = threading.Thread(
        target=store.apply, args=(adds(range(1000, 1000 + len(more)), more, seq0=300),)
    )
    adder.start()
    assert slow.started.wait(10)
    hits = store.search("text", x[0], 5)
    done_when_searched = slow.adds
    adder.join()
    assert len(hits) == 5
    assert slow.adds == 6 and done_when_searched < 6
    store._ix["text"] = slow._index  # type: ignore[assignment]
    assert store.count("text") == 300 + len(more)
    _mirror_matches_index(store)


def test_the_lock_admits_queued_readers_between_two_writes() -> None:
    """A writer that takes the lock again at once does not starve a reader queued meanwhile."""
    from superchargedb.storage.vectors import _RWLock

    lock = _RWLock()
    writes = 0
    first = threading.Event()

    def writer() -> None:
        nonlocal writes
        for _ in range(20):
            with lock.write():
                first.set()
                time.sleep(0.01)
                writes += 1

    t = threading.Thread(target=writer)
    t.start()
    assert first.wait(10)
    with lock.read():
        seen = writes
    t.join()
    assert writes == 20 and seen < 20
