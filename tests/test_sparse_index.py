"""The derived lexical index: FTS5's tokens and ranking, lockstep with the catalog, no leaks.

Units are written with the bulk-import SQL (real catalog, real FTS5 triggers, real outbox) and
random unit vectors (only the lexical leg is under test); the sparse backend is compared with
FTS5 itself on the same catalog, and the filters with an independent set-based reference.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import superchargedb  # noqa: F401  (onnxruntime before usearch)
from bench.common import evaldir
from conftest import embedded
from corpus import DISTRACTORS
from superchargedb.query_terms import query_terms
from superchargedb.readfilter import ReadFilter
from superchargedb.schemas import AegisQuery
from superchargedb.storage.sqlite.bulk import insert_units
from superchargedb.storage.sqlite.catalog import Catalog
from superchargedb.storage.sqlite.filter_sql import where_sql
from superchargedb.storage.sqlite.fts5_tokens import Fts5Tokenizer
from superchargedb.storage.sqlite.index_sync import IndexSync
from superchargedb.storage.sqlite.lexical_leg import LexicalLeg
from superchargedb.storage.sqlite.sparse import SparseIndex
from superchargedb.storage.sqlite.units import delete_rows, update_acl, uuid7
from superchargedb.storage.vectors import VectorStore
from superchargedb.types import Principal

# Real text when SCDB_EVAL_DIR has Cranfield; the hand-made texts alone otherwise.
CRANFIELD = (
    None if evaldir.skip_reason("classic-cranfield") else evaldir.dataset("classic-cranfield")
)
DIM = 8
TRICKY = [
    "naïve café ÉCOLE Straße ﬁne İstanbul x²y ½ 3.5mg/kg α-helix ERR_7731 foo'bar",
    "“quoted” — dash… ＡＢＣ 日本語テキスト emoji😀ok tab\tnew\nline back\\slash a+b=c <tag>",
    "Running runners ran; connection connected connecting CONNECTIONS.",
]
SCOPES = ["acme/alpha", "acme/alpha/backend", "acme/beta", "acme/alphabet", "other/x"]
OWNERS = ["alice", "bob", "carol"]
GROUPS = ["eng", "ops", "sales"]


# Without the evaluation data: generated texts and queries over one vocabulary (stems that
# collide under Porter, repeated terms, unicode), as many as Cranfield gives, so that every
# comparison below has as much to compare either way.
_VOCAB = (  # noqa: SIM905  (a word list reads better as text)
    "wing wings winged flow flows flowing boundary layer layers heat heated heating shock "
    "shocks pressure pressures supersonic subsonic nozzle nozzles plate plates laminar "
    "turbulent turbulence drag lift cone cones jet jets blunt body bodies mach number numbers "
    "velocity stream streams surface surfaces temperature ratio ratios viscous inviscid "
    "transition separation separated wake wakes vortex vortices café naïve straße connection "
    "connecting connected running runners security keys quarterly database backups"
).split()


def _generated(n: int, words: tuple[int, int], seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_VOCAB, k=rng.randint(*words))) for _ in range(n)]


def texts() -> list[str]:
    out = list(DISTRACTORS) + TRICKY
    if CRANFIELD is None:
        return out + _generated(400, (6, 40), 7)
    with open(CRANFIELD / "corpus.jsonl", encoding="utf-8") as fh:
        return out + [json.loads(line)["text"] for line in fh][:400]


def queries() -> list[str]:
    qs = ["connection running", "café naive", "database backups", "security keys quarterly"]
    if CRANFIELD is None:
        return qs + _generated(60, (2, 6), 11)
    with open(CRANFIELD / "queries.jsonl", encoding="utf-8") as fh:
        return qs + [json.loads(line)["text"] for line in fh][:60]


def row(i: int, text: str, rng: random.Random) -> dict[str, object]:
    scope = rng.choice(SCOPES)
    groups = sorted(rng.sample(GROUPS, rng.randint(0, 2)))
    return {
        "unit_id": uuid7(),
        "scope": scope,
        "doc_id": f"d{i}",
        "modality": "text",
        "plane": "text",
        "source_uri": f"{scope}/d{i}",
        "mime": None,
        "text": text,
        "acl_owner": rng.choice(OWNERS),
        "acl_groups": groups,
        "content_hash": hashlib.sha256(f"{i}:{text}".encode()).hexdigest(),
        "created_at": 0,
        "event_at": 0,
        "created_by": "test",
        "model_id": "test-model",
    }


def open_dir(d: Path) -> tuple[Catalog, IndexSync]:
    cat = Catalog(d / "catalog.db", "NORMAL")
    store = VectorStore(d / "index", DIM, "test-model")
    sync = IndexSync(cat, store, 10**9, lexical=SparseIndex(d / "lexical"))
    sync.startup()
    return cat, sync


def write(cat: Catalog, sync: IndexSync, items: list[str], start: int, seed: int) -> None:
    rng = random.Random(seed)
    rows = [row(start + i, t, rng) for i, t in enumerate(items)]
    vecs = np.random.default_rng(seed).standard_normal((len(rows), DIM)).astype(np.float32)
    with cat.write_lock():
        with cat.write() as conn:
            insert_units(conn, rows, vecs)
        sync.apply_pending(checkpoint=False)


def principal(name: str, groups: list[str]) -> Principal:
    return Principal(name, name, frozenset({"read"}), "pro", ("acme",), "acme", frozenset(groups))


CALLERS = [
    (principal("alice", ["eng"]), ["acme"]),
    (principal("bob", []), ["acme/alpha"]),
    (principal("carol", ["ops", "sales"]), ["acme/alpha/backend", "acme/beta"]),
    (principal("dave", ["eng", "ops", "sales"]), ["acme"]),
]


def both(
    cat: Catalog,
    sync: IndexSync,
    q: str,
    who: Principal,
    scopes: list[str],
    k: int = 25,
    **extra: object,
):
    assert sync.lexical is not None
    leg = LexicalLeg("sparse", sync.lexical)
    conn = cat.reader()
    query = AegisQuery.model_validate({"q": q, **extra})
    rf = ReadFilter.of(who, scopes, ["text"], query)
    where, params = where_sql(rf, sync.applied_seq)
    terms = query_terms(q)
    sparse, backend = leg.search(conn, rf, terms, where, params, k)
    fts = LexicalLeg._fts(conn, terms, rf, where, params, k)
    return sparse, fts, backend


def assert_same_as_fts5(cat: Catalog, sync: IndexSync) -> int:
    compared = 0
    for q in queries():
        for who, scopes in CALLERS:
            sparse, fts, backend = both(cat, sync, q, who, scopes)
            assert sparse == fts, (q, who.name, backend)
            compared += bool(fts)
    return compared


def test_tokens_are_fts5_tokens() -> None:
    tok = Fts5Tokenizer()
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    items = texts()
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(items, 1))
    want: list[list[tuple[int, str]]] = [[] for _ in items]
    for doc, off, term in db.execute("SELECT doc, offset, term FROM v"):
        want[doc - 1].append((off, term))
    expected = [[t for _, t in sorted(w)] for w in want]
    assert tok.tokens_many(items) == expected
    assert [tok.tokens(t) for t in items] == expected
    assert tok.tokens("ERR_7731") == ["err", "7731"]  # a phrase to FTS5


def test_topk_equals_fts5_and_survives_restart(tmp_path: Path) -> None:
    cat, sync = open_dir(tmp_path)
    items = texts()
    write(cat, sync, items[: len(items) // 2], 0, 1)
    with cat.write_lock():
        sync.checkpoint()
    write(cat, sync, items[len(items) // 2 :], len(items) // 2, 2)  # applied, not checkpointed
    assert assert_same_as_fts5(cat, sync) > 20
    before = {q: both(cat, sync, q, *CALLERS[0])[0] for q in queries()}
    cat.close()  # a crash: no checkpoint of the second half
    cat, sync = open_dir(tmp_path)
    assert sync.lexical is not None and sync.lexical.n_docs == len(items)
    assert {q: both(cat, sync, q, *CALLERS[0])[0] for q in queries()} == before
    assert_same_as_fts5(cat, sync)
    cat.close()


def test_deletes_acl_updates_replay_and_rebuild(tmp_path: Path) -> None:
    cat, sync = open_dir(tmp_path)
    items = texts()
    write(cat, sync, items, 0, 3)
    with cat.write_lock():
        sync.checkpoint()  # compacts the outbox: a lost index must now be rebuilt
        with cat.write() as conn:
            delete_rows(conn, list(range(1, 40, 3)))
            update_acl(conn, list(range(2, 60, 3)), ["sales"])
        sync.apply_pending(checkpoint=False)
    assert_same_as_fts5(cat, sync)
    cat.close()
    # Replay: the deletes and ACL updates after the checkpoint come from the outbox.
    cat, sync = open_dir(tmp_path)
    assert_same_as_fts5(cat, sync)
    with cat.write_lock():
        sync.checkpoint()
    cat.close()
    # Rebuild: the index files are gone and the outbox was compacted past them.
    shutil.rmtree(tmp_path / "lexical")
    cat, sync = open_dir(tmp_path)
    live = {r[0] for r in cat.reader().execute("SELECT id FROM units")}
    assert sync.lexical is not None
    assert set(sync.lexical.keys().tolist()) == live
    assert_same_as_fts5(cat, sync)
    cat.close()
    # A damaged state file falls back to a rebuild, never to a wrong index.
    state = next((tmp_path / "lexical").glob("state.*.npz"))
    state.write_bytes(state.read_bytes()[:100])
    cat, sync = open_dir(tmp_path)
    assert_same_as_fts5(cat, sync)
    cat.close()


def reference_visible(r: sqlite3.Row, who: Principal, scopes: list[str]) -> bool:
    """Independent of the server's code: split-based scope containment, set-based ACL."""
    parts = r["scope"].split("/")
    inside = any(parts[: len(s.split("/"))] == s.split("/") for s in scopes)
    return inside and (
        r["acl_owner"] == who.name or bool(set(json.loads(r["acl_groups"])) & who.groups)
    )


def test_filters_never_leak(tmp_path: Path) -> None:
    cat, sync = open_dir(tmp_path)
    write(cat, sync, texts(), 0, 4)
    conn = cat.reader()
    rows = {r["id"]: r for r in conn.execute("SELECT id, scope, acl_owner, acl_groups FROM units")}
    seen = 0
    for q in queries():
        for who, scopes in CALLERS:
            got, _, _ = both(cat, sync, q, who, scopes, k=100)
            seen += len(got)
            assert all(reference_visible(rows[i], who, scopes) for i in got), (q, who.name)
    assert seen > 100
    # Revoking a group hides the Units from the next search; granting one shows them.
    who, scopes = CALLERS[2]  # carol: ops, sales
    q = queries()[-1]
    got = both(cat, sync, q, who, scopes, k=100)[0]
    mine = [i for i in got if rows[i]["acl_owner"] != "carol"]
    assert mine
    with cat.write_lock():
        with cat.write() as w:
            update_acl(w, mine, ["eng"])
        sync.apply_pending(checkpoint=False)
    after = both(cat, sync, q, who, scopes, k=100)[0]
    assert not set(mine) & set(after)
    with cat.write_lock():
        with cat.write() as w:
            update_acl(w, mine, ["ops"])
        sync.apply_pending(checkpoint=False)
    assert set(mine) <= set(both(cat, sync, q, who, scopes, k=100)[0])
    cat.close()


def test_filters_the_index_does_not_hold(tmp_path: Path) -> None:
    cat, sync = open_dir(tmp_path)
    write(cat, sync, texts(), 0, 8)
    who, scopes = principal("dave", GROUPS), ["acme", "other"]
    for q in queries()[:20]:
        docs = [f"d{i}" for i in range(0, 400, 7)]
        sparse, fts, backend = both(cat, sync, q, who, scopes, filters={"doc_id": docs})
        assert sparse == fts and backend == "sparse (catalog filter)"
        sparse, fts, _ = both(cat, sync, q, who, scopes, filters={"acl": {"groups": ["ops"]}})
        assert sparse == fts
        sparse, fts, _ = both(cat, sync, q, who, scopes, filters={"modality": "code"})
        assert sparse == fts == []
    cat.close()


def test_maxscore_equals_exhaustive(tmp_path: Path) -> None:
    from superchargedb.storage.sqlite.sparse_search import SparseSearcher

    cat, sync = open_dir(tmp_path)
    write(cat, sync, texts(), 0, 9)
    assert sync.lexical is not None
    sp = SparseSearcher(sync.lexical)
    tok = sync.lexical.tok
    for q in queries():
        tids = [sp.term_id(t[0]) if (t := tok.tokens(w)) else None for w in query_terms(q)]
        for key, pred in (("all", lambda s: True), ("alpha", lambda s: s[0] == "acme/alpha")):
            with sync.lexical.rw.read():
                mask, full = sp.mask(key, pred)
                assert full == (key == "all")
                for k in (1, 10, 100):
                    want = sp.topk(tids, mask, k, exhaustive=True)
                    assert sp.topk(tids, mask, k) == want
                    assert sp.topk(tids, mask, k, full=full) == want
    cat.close()


def test_exact_scores_from_postings_equal_forward_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shortlist's term frequencies from the query's postings (few phrase x segment pairs)
    and from the documents' forward lists (many) give the same top-k, ties included."""
    from superchargedb.storage.sqlite import sparse_search
    from superchargedb.storage.sqlite.sparse_search import SparseSearcher

    cat, sync = open_dir(tmp_path)
    items = texts()
    write(cat, sync, items[:150], 0, 9)  # three applies: three delta segments
    write(cat, sync, items[150:300], 1000, 8)
    write(cat, sync, items[300:], 2000, 7)
    assert sync.lexical is not None and len(sync.lexical.delta) >= 3
    sp = SparseSearcher(sync.lexical)
    tok = sync.lexical.tok
    for q in queries():
        tids = [sp.term_id(t[0]) if (t := tok.tokens(w)) else None for w in query_terms(q)]
        with sync.lexical.rw.read():
            mask, full = sp.mask("alpha", lambda s: s[0] == "acme/alpha")
            for k in (1, 10, 100):
                want = sp.topk(tids, mask, k, exhaustive=True)
                monkeypatch.setattr(sparse_search, "_POSTING_LOOKUPS", 0)
                assert sp.topk(tids, mask, k) == want
                monkeypatch.setattr(sparse_search, "_POSTING_LOOKUPS", 10_000)
                assert sp.topk(tids, mask, k) == want
    cat.close()


def test_phrase_terms_fall_back_to_fts5(tmp_path: Path) -> None:
    cat, sync = open_dir(tmp_path)
    write(cat, sync, [*DISTRACTORS, "The error code ERR_7731 means the disk is full."], 0, 5)
    who, scopes = principal("dave", GROUPS), ["acme", "other"]
    sparse, fts, backend = both(cat, sync, "what is ERR_7731", who, scopes)
    assert backend == "fts5 (phrase)" and sparse == fts and len(fts) == 1
    cat.close()


CHILD = """
import sys, random
import test_sparse_index as T
from pathlib import Path
cat, sync = T.open_dir(Path(sys.argv[1]))
items = T.texts()
T.write(cat, sync, items[:200], 10_000, 7)
with cat.write_lock():
    sync.checkpoint()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "point",
    [
        "sparse.apply.before",
        "sparse.apply.after",
        "sparse.checkpoint.before_segments",
        "sparse.checkpoint.mid_save",
        "sparse.checkpoint.after_rename",
    ],
)
def test_sigkill_at_fault_points(tmp_path: Path, point: str) -> None:
    cat, sync = open_dir(tmp_path)
    write(cat, sync, texts()[200:], 0, 6)
    with cat.write_lock():
        sync.checkpoint()
    cat.close()
    # The child imports this module: tests/ and the repository root (bench) on its path.
    here = Path(__file__).resolve().parent
    path = [str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "SCDB_CRASH_AT": point, "PYTHONPATH": os.pathsep.join(path)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, timeout=300)
    assert proc.returncode == -9, f"{point} was not reached"
    cat, sync = open_dir(tmp_path)
    live = {r[0] for r in cat.reader().execute("SELECT id FROM units")}
    assert sync.lexical is not None and set(sync.lexical.keys().tolist()) == live
    assert_same_as_fts5(cat, sync)
    cat.close()


TOPICS = ["harbor lighthouse", "desert caravan", "glacier survey", "violin workshop"]


def test_dense_candidates_from_the_index(svc) -> None:
    """The dense leg's readable ids come from the lexical index's mask: the same ids as the
    catalog's scan, and an ACL change shows in the next search of either leg."""
    from conftest import add_principal
    from superchargedb.storage.sqlite.candidates import readable_ids

    # In the groups it shares the Units with (a writer adds only groups it belongs to).
    alice = replace(svc.authenticate("Bearer aegis_sk_alice"), groups=frozenset({"eng", "ops"}))
    units = [
        {
            "text": f"Field notes {i} on the {TOPICS[i % 4]}, entry {i}.",
            "doc_id": f"n{i}",
            "scope": "acme/alpha/backend" if i % 3 else "acme/alpha",
            "acl_groups": ["eng"] if i % 2 else ["ops"],
        }
        for i in range(24)
    ]
    assert all(r["ok"] for r in svc.ingest(alice, {"units": units})["results"])
    key = add_principal(svc, "reader", perms=["read"], scopes=["acme/alpha"], groups=["eng"])
    reader = svc.authenticate(f"Bearer {key}")
    query = AegisQuery(q="glacier survey notes")
    for who, scopes in ((reader, ["acme/alpha"]), (alice, ["acme/alpha/backend"])):
        rf = ReadFilter.of(who, scopes, ["text"], query)
        where, params = where_sql(rf, embedded(svc).sync.applied_seq)
        from_index = svc.searcher.store.lexical.readable_ids(rf, "text")
        conn = embedded(svc).catalog.reader()
        assert from_index is not None
        assert from_index.tolist() == readable_ids(conn, where, params, "text").tolist()

    def found(mode: str) -> set[str]:
        out = svc.search(reader, {"q": "desert caravan", "mode": mode, "top_k": 50}, "acme/alpha")
        return {h["doc_id"] for h in out["hits"]}

    eng = {u["doc_id"] for u in units if u["acl_groups"] == ["eng"]}
    for mode in ("dense", "hybrid", "lexical"):
        assert found(mode) and found(mode) <= eng
    target = sorted(found("dense"))[0]
    svc.patch_doc(alice, target, {"acl_groups": ["ops"]}, None, "acme/alpha")
    for mode in ("dense", "hybrid", "lexical"):
        assert target not in found(mode), mode
    svc.patch_doc(alice, target, {"acl_groups": ["eng"]}, None, "acme/alpha")
    assert target in found("dense") and target in found("hybrid")


def test_dense_candidates_of_one_plane_from_a_mask_over_all(svc) -> None:
    """A search over several planes builds one mask (the lexical leg's) and narrows it to each
    plane at the readable ids: the same ids as the catalog's scan of that plane."""
    from superchargedb.storage.sqlite.candidates import readable_ids

    # In the groups it shares the Units with (a writer adds only groups it belongs to).
    alice = replace(svc.authenticate("Bearer aegis_sk_alice"), groups=frozenset({"eng", "ops"}))
    units = [
        {
            "text": f"Survey frame {i} of the {TOPICS[i % 4]}.",
            "doc_id": f"m{i}",
            "modality": "image" if i % 3 == 0 else "text",
            "acl_groups": ["eng"] if i % 2 else ["ops"],
        }
        for i in range(18)
    ]
    assert all(r["ok"] for r in svc.ingest(alice, {"units": units})["results"])
    conn = embedded(svc).catalog.reader()
    planes = ["text", "visual"]
    query = AegisQuery(q="survey frame")
    scopes = ["acme/alpha"]
    rf = ReadFilter.of(alice, scopes, planes, query)
    where, params = where_sql(rf, embedded(svc).sync.applied_seq)
    sizes = []
    for plane in planes:
        want = readable_ids(conn, where, params, plane).tolist()
        got = svc.searcher.store.lexical.readable_ids(rf, plane)
        assert got is not None and got.tolist() == want, plane
        sizes.append(len(want))
    assert sizes == [12, 6]  # images are on the visual plane


def test_a_stale_index_never_shows_what_the_catalog_hides(svc) -> None:
    """Hybrid takes both legs' ids from the derived index unchecked and re-checks the fused
    prefix once: a Unit the catalog no longer lets the caller read (a change the index has not
    seen) is in neither leg's answer, in any mode."""
    alice = svc.authenticate("Bearer aegis_sk_alice")
    units = [
        {"text": f"Caravan route {i} crosses the desert oasis.", "doc_id": f"c{i}"}
        for i in range(6)
    ]
    assert all(r["ok"] for r in svc.ingest(alice, {"units": units})["results"])
    with embedded(svc).catalog.write() as conn:  # behind the index's back: no outbox op
        conn.execute("UPDATE units SET scope = 'acme/zeta' WHERE doc_id = 'c3'")
    query = AegisQuery(q="caravan desert oasis route")
    rf = ReadFilter.of(alice, ["acme/alpha"], ["text"], query)
    stale = svc.searcher.store.lexical.readable_ids(rf, "text")
    hidden = (
        embedded(svc)
        .catalog.reader()
        .execute("SELECT id FROM units WHERE doc_id = 'c3'")
        .fetchone()
    )
    assert stale is not None and hidden[0] in stale.tolist()  # the index still says readable
    for mode in ("hybrid", "lexical", "dense"):
        out = svc.search(alice, {"q": query.q, "mode": mode, "top_k": 10}, "acme/alpha")
        docs = {h["doc_id"] for h in out["hits"]}
        assert docs == {f"c{i}" for i in range(6)} - {"c3"}, mode


def test_other_format_is_rebuilt(tmp_path: Path) -> None:
    cat, sync = open_dir(tmp_path)
    write(cat, sync, texts()[:120], 0, 10)
    with cat.write_lock():
        sync.checkpoint()
    cat.close()
    meta = tmp_path / "lexical" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": 99}))
    cat, sync = open_dir(tmp_path)
    assert sync.lexical is not None and sync.lexical.n_docs == 120
    assert_same_as_fts5(cat, sync)
    cat.close()


def test_term_ids_many_equals_term_ids(tmp_path: Path) -> None:
    """One oracle run for a query's unseen words gives each word's own term ids."""
    from superchargedb.storage.sqlite.sparse_search import SparseSearcher

    cat, sync = open_dir(tmp_path)
    write(cat, sync, texts(), 0, 9)
    assert sync.lexical is not None
    words = [w for q in queries() for w in query_terms(q)]
    words += ["err_7731", "unseenword", "running", "x_y_z", "café", "naïve"]
    fresh = SparseSearcher(sync.lexical)
    batch = fresh.term_ids_many(words)
    assert batch == [SparseSearcher(sync.lexical).term_ids(w) for w in words]
    cat.close()


def test_maxscore_pruning_equals_exhaustive_on_zipf_corpus(tmp_path: Path) -> None:
    """Long queries over a Zipf vocabulary: most phrases end up non-essential, looked up only
    for the candidates left after each step's pruning (the candidate set shrinks and theta
    rises step by step). The top k must stay the exhaustive ranking, ties included."""
    from superchargedb.storage.sqlite.sparse_search import SparseSearcher

    rng = random.Random(7)
    vocab = [f"w{i}x" for i in range(400)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    docs = [" ".join(rng.choices(vocab, weights, k=rng.randint(5, 60))) for _ in range(2400)]
    cat, sync = open_dir(tmp_path)
    write(cat, sync, docs[:1200], 0, 3)  # two applies: two segments
    write(cat, sync, docs[1200:], 5000, 4)
    assert sync.lexical is not None
    sp = SparseSearcher(sync.lexical)
    pruned = 0
    for _ in range(40):
        words = rng.sample(vocab[:40], 4) + rng.sample(vocab[40:], rng.randint(2, 10))
        tids = [sp.term_id(w) for w in words]
        for key, pred in (("all", lambda s: True), ("alpha", lambda s: s[0] == "acme/alpha")):
            with sync.lexical.rw.read():
                mask, full = sp.mask(key, pred)
                for k in (1, 10, 100):
                    want = sp.topk(tids, mask, k, exhaustive=True)
                    st: dict[str, int] = {}
                    assert sp.topk(tids, mask, k, full=full, stats=st) == want, (words, key, k)
                    pruned += st["phrases"] - st["essential"] >= 2
    assert pruned > 50  # the multi-step non-essential path ran
    cat.close()
