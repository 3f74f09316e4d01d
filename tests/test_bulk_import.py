"""Bulk import: the same catalog/outbox/index invariants as ingest, at batch scale."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import embedded, make_service, stored_rows, stored_value
from corpus import DISTRACTORS
from superchargedb.auth.admin import OPERATOR
from superchargedb.cli.main import app
from superchargedb.errors import ValidationError
from superchargedb.ingest.bulk_import import import_batches
from superchargedb.service import Service
from superchargedb.settings import Settings
from superchargedb.wiring import open_service

SCOPES = ["acme/alpha", "acme/alpha/backend", "acme/beta"]


def records(n: int, start: int = 0) -> list[dict[str, object]]:
    return [
        {
            "doc_id": f"imp{start + i}",
            "text": f"{DISTRACTORS[(start + i) % len(DISTRACTORS)]} Record number {start + i}.",
            "scope": SCOPES[(start + i) % len(SCOPES)],
            "acl_owner": "alice",
            "acl_groups": ["eng"] if i % 2 else [],
        }
        for i in range(n)
    ]


def random_vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, 384)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)


def count(svc: Service, table: str, where: str = "1 = 1") -> int:
    return int(stored_value(svc, f"SELECT COUNT(*) FROM {table} WHERE {where}"))


def indexed(svc: Service) -> tuple[set[int], set[int], set[int] | None]:
    """The catalog's Unit ids, and the ids the text plane's vector index and the lexical
    index hold (None: no lexical index)."""
    b = embedded(svc)
    ids = {r[0] for r in b.catalog.reader().execute("SELECT id FROM units")}
    lex = b.sync.lexical
    vectors = set(b.sync.store.keys("text").tolist())
    return ids, vectors, None if lex is None else set(lex.keys().tolist())


def batches(recs: list, vecs: np.ndarray, size: int):
    for i in range(0, len(recs), size):
        yield recs[i : i + size], vecs[i : i + size]


def test_import_keeps_catalog_index_and_audit_in_lockstep(svc: Service) -> None:
    recs = records(150)
    # Three Units with the model's own embeddings: the dense leg must find them.
    real = [
        "Lighthouse keepers log the foghorn schedule every evening.",
        "The glacier survey measured ice thickness with radar.",
        "Violin makers season spruce for a decade before carving.",
    ]
    recs += [
        {"doc_id": f"real{i}", "text": t, "scope": "acme/alpha", "acl_owner": "alice"}
        for i, t in enumerate(real)
    ]
    vecs = np.concatenate([random_vectors(150), svc.embedder.embed(real).astype(np.float16)])
    audit_before = count(svc, "audit_log", "action = 'import'")
    out = import_batches(svc, batches(recs, vecs, 64))
    assert out["created"] == 153 and out["unchanged"] == 0 and out["batches"] == 3
    assert count(svc, "units") == 153
    assert count(svc, "audit_log", "action = 'import'") == audit_before + 3
    if svc.settings.database_url:  # all applied, each kept for the processes' lexical tails
        assert count(svc, "outbox", "NOT applied") == 0 and count(svc, "outbox") == 153
    else:
        assert count(svc, "outbox") == 0  # checkpointed at the end, then compacted
    report = svc.doctor()
    assert report["ok"], report
    if svc.settings.database_url:  # one database: a Unit's vector is its row's own column
        ids = {r[0] for r in stored_rows(svc, "SELECT id FROM units")}
        assert {r[0] for r in stored_rows(svc, "SELECT DISTINCT unit FROM postings")} == ids
    else:  # the embedded catalog's separate vector and lexical indexes, in step with it
        ids, vectors, lexical = indexed(svc)
        assert vectors == ids
        assert lexical == ids
    assert svc.audit_verify(OPERATOR)["ok"]
    alice = svc.authenticate("Bearer aegis_sk_alice")
    for i, text in enumerate(real):
        hits = svc.search(alice, {"q": text, "mode": "dense", "top_k": 3}, query_scope="acme/alpha")
        assert hits["hits"][0]["doc_id"] == f"real{i}"
    lex = svc.search(alice, {"q": "Record number 76", "mode": "lexical"}, query_scope="acme")
    assert lex["hits"] and any(h["doc_id"] == "imp76" for h in lex["hits"])
    # Importing the same records again changes nothing (idempotency keys).
    again = import_batches(svc, batches(recs, vecs, 100))
    assert again["created"] == 0 and again["unchanged"] == 153
    assert count(svc, "units") == 153


def test_bad_records_fail_their_batch_whole(svc: Service) -> None:
    recs = records(10)
    recs[4]["scope"] = "Bad Scope"
    with pytest.raises(ValidationError, match="record 4"):
        import_batches(svc, batches(recs, random_vectors(10), 10))
    assert count(svc, "units") == 0
    vecs = random_vectors(10)
    vecs[3] = 0
    with pytest.raises(ValidationError, match="record 3"):
        import_batches(svc, batches(records(10), vecs, 10))
    with pytest.raises(ValidationError, match="shape"):
        import_batches(svc, batches(records(10), random_vectors(10)[:, :100], 10))
    no_owner = records(2)
    del no_owner[1]["acl_owner"]
    with pytest.raises(ValidationError, match="record 1"):
        import_batches(svc, batches(no_owner, random_vectors(2), 2))
    assert count(svc, "units") == 0 and count(svc, "outbox") == 0


def test_import_survives_restart(tmp_path: Path, embedder) -> None:
    s = make_service(tmp_path / "d", embedder)
    import_batches(s, batches(records(120), random_vectors(120), 50))
    s.close()
    s = make_service(tmp_path / "d", embedder)
    try:
        assert count(s, "units") == 120
        assert s.doctor()["ok"]
        if s.settings.database_url:  # the BM25 statistics are a row of the database
            assert stored_value(s, "SELECT n_docs FROM lex_stats") == 120
        else:
            lexical = embedded(s).sync.lexical
            assert lexical is not None and lexical.n_docs == 120
    finally:
        s.close()


def test_cli_import(tmp_path: Path, embedder) -> None:
    src = tmp_path / "in"
    src.mkdir()
    recs = records(30)
    (src / "units.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    np.save(src / "vectors.npy", random_vectors(30))
    data = tmp_path / "data"
    runner = CliRunner()
    args = ["import", str(src / "units.jsonl"), "--vectors", str(src / "vectors.npy")]
    res = runner.invoke(app, [*args, "--data", str(data), "--batch", "8"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.rindex("{") :])  # after the progress bars
    assert out["created"] == 30 and out["batches"] == 4
    # A bad line anywhere: nothing of the file is imported.
    recs2 = records(5, start=100)
    recs2[3]["modality"] = "clip"
    (src / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs2))
    np.save(src / "bad.npy", random_vectors(5))
    res = runner.invoke(
        app,
        ["import", str(src / "bad.jsonl"), "--vectors", str(src / "bad.npy"), "--data", str(data)],
    )
    assert res.exit_code == 1 and "record 3" in res.output
    res = runner.invoke(app, [*args, "--data", str(data), "--model-id", "some-other-model@256"])
    assert res.exit_code == 1
    s = open_service(Settings(data_dir=data), embedder=embedder)  # the session's model
    try:
        assert count(s, "units") == 30
    finally:
        s.close()


def test_pipelined_import_matches_indexes_derived_from_the_catalog(
    tmp_path: Path, embedder
) -> None:
    """The vector add of one batch overlaps the next batch's write: the indexes must still hold
    exactly what a rebuild from the catalog gives, and a writer between batches must wait."""
    from superchargedb.demo import seed_principals

    s = make_service(tmp_path / "d", embedder)
    seed_principals(s)
    alice = s.authenticate("Bearer aegis_sk_alice")
    recs, vecs = records(240), random_vectors(240, seed=3)
    real = ["Beekeepers smoke the hive before lifting its frames.", "Tidal mills ground grain."]
    recs += [
        {"doc_id": f"r{i}", "text": t, "scope": "acme/alpha", "acl_owner": "alice"}
        for i, t in enumerate(real)
    ]
    vecs = np.concatenate([vecs, embedder.embed(real).astype(np.float16)])
    seen: list[tuple[int, int]] = []

    def interleaved():
        for i, part in enumerate(batches(recs, vecs, 60)):
            if i == 2:
                # Another writer while a batch's vector add may be in flight.
                s.ingest(alice, {"units": [{"text": "Interleaved note on glassblowing."}]})
                sync = embedded(s).sync
                seen.append((sync.applied_seq, len(sync.store.keys("text"))))
            yield part

    out = import_batches(s, interleaved())
    assert out["created"] == 242 and out["batches"] == 5
    ids, vectors, _ = indexed(s)
    top = int(embedded(s).catalog.reader().execute("SELECT MAX(seq) FROM units").fetchone()[0])
    assert embedded(s).sync.applied_seq >= top
    # The ingest between batches applied (and waited for) everything committed before it.
    assert seen[0] == (121, 121)
    assert vectors == ids
    queries = ["Record number 17", "beekeepers hive frames", "glassblowing", "tidal mill grain"]

    def results(svc: Service) -> list[list[tuple[str, float]]]:
        return [
            [
                (h["doc_id"], round(h["score"], 6))
                for h in svc.search(alice, {"q": q, "mode": m, "top_k": 10}, query_scope="acme")[
                    "hits"
                ]
            ]
            for q in queries
            for m in ("lexical", "dense", "hybrid")
        ]

    before = results(s)
    assert before[3][0][0] == "r0" and before[4][0][0] == "r0"  # dense and hybrid find it
    s.close()
    # Drop every derived index file and the outbox's history: the restart rebuilds both
    # indexes from the catalog alone.
    for f in (tmp_path / "d").rglob("*"):
        if f.is_file() and (f.suffix == ".usearch" or f.name.startswith("state.")):
            f.unlink()
    s = make_service(tmp_path / "d", embedder)
    try:
        assert indexed(s)[1] == ids
        assert results(s) == before
    finally:
        s.close()


@pytest.mark.parametrize("point", ["vectors.apply.before_add:2", "sync.after_apply:2"])
def test_import_killed_during_a_background_vector_add_recovers(
    tmp_path: Path, point: str, embedder
) -> None:
    """SIGKILL while a batch's HNSW add runs in its thread (the next batch being written): the
    restart replays the committed batches, and running the import again completes it."""
    import os
    import signal
    import subprocess
    import sys

    src = tmp_path / "in"
    src.mkdir()
    recs = records(240)
    (src / "units.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    np.save(src / "vectors.npy", random_vectors(240, seed=5))
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "superchargedb.cli.main", "import", str(src / "units.jsonl")]
    cmd += ["--vectors", str(src / "vectors.npy"), "--data", str(data), "--batch", "60"]
    env = {**os.environ, "SCDB_CRASH_AT": point}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    s = open_service(Settings(data_dir=data), embedder=embedder)  # the session's model
    try:
        ids, vectors, lexical = indexed(s)
        assert 60 <= len(ids) < 240 and len(ids) % 60 == 0  # whole batches only
        assert vectors == ids
        assert lexical == ids
        assert s.doctor()["ok"] and s.audit_verify(OPERATOR)["ok"]
    finally:
        s.close()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout[p.stdout.rindex("{") :])
    assert out["created"] == 240 - len(ids) and out["unchanged"] == len(ids)
    s = open_service(Settings(data_dir=data), embedder=embedder)  # the session's model
    try:
        assert count(s, "units") == 240 and s.doctor()["ok"]
        assert len(embedded(s).sync.store.keys("text")) == 240
    finally:
        s.close()
