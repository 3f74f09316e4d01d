"""``superchargedb migrate`` (D-275, D-276): a real embedded data dir holding text, PDF, audio and
video Units copied into a real PostgreSQL. Every table counted equal on both sides, each Unit's
columns and vector as stored, the same hits in the same order for lexical, dense and hybrid
searches before and after, the audit chain verified on PostgreSQL; a run interrupted mid-batch
and resumed ends identical to an uninterrupted one; a database holding another store, another
model's vectors, or a source a server holds are refused."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import pg_stack
from conftest import ALICE, BOB, CAROL, make_service
from superchargedb import console_sessions
from superchargedb.cli.main import app
from superchargedb.models.embedder import Embedder
from superchargedb.storage import migrate as migration
from superchargedb.storage.sqlite.objects import FileBlobStore

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

import psycopg  # noqa: E402

from superchargedb.storage.postgres import migrations as pg_migrations  # noqa: E402
from superchargedb.storage.postgres import units as pg_units  # noqa: E402

KEY = bytes.fromhex("11" * 32)  # conftest's SCDB_AUDIT_KEY: the source's chain key
SCOPE = "acme/alpha/backend"
QUERIES = [
    "failover cutover seconds",
    "rollback procedure",
    "quarterly revenue",
    "standup rehearse",
    "beta pricing",
    "on-call page",
]
MODES = ["lexical", "dense", "hybrid"]
TOOLS = ("espeak-ng", "ffmpeg", "tesseract")


def _embedded(tmp: Path, embedder: Embedder) -> Any:
    return make_service(tmp, embedder, database_url=None)  # the source: always embedded


def _pdf() -> bytes:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.setFont("Helvetica", 14)
    c.drawString(72, 700, "The failover drill promotes the standby database in 0.8 seconds.")
    c.showPage()
    c.drawString(72, 650, "Page two explains the rollback procedure for ERR_5150.")
    c.showPage()
    c.save()
    return buf.getvalue()


def _wav(d: Path) -> Path:
    out = d / "standup.wav"
    text = "The standup covered the failover drill. Next week we rehearse the rollback."
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(out), text], check=True)
    return out


def _mp4(d: Path, wav: Path) -> Path:
    """Two solid-colour shots over the standup speech."""
    out = d / "clip.mp4"
    argv = ["ffmpeg", "-v", "error", "-y"]
    for colour in ("red", "blue"):
        argv += ["-f", "lavfi", "-i", f"color=c={colour}:s=320x180:r=10:d=3"]
    argv += ["-i", str(wav), "-filter_complex", "[0:v][1:v]concat=n=2:v=1:a=0,format=yuv420p[v]"]
    argv += ["-map", "[v]", "-map", "2:a", "-t", "6", "-c:v", "libx264", "-preset", "veryfast"]
    subprocess.run([*argv, "-c:a", "aac", str(out)], check=True)
    return out


def _put_and_ingest(c: Any, key: str, data: bytes, mime: str, doc_id: str) -> str:
    r = c.put(f"/v1/objects/{key}", headers={**ALICE, "Content-Type": mime}, content=data)
    assert r.status_code == 201, r.text
    unit = {"source_uri": key, "mime": mime, "doc_id": doc_id, "acl_groups": ["eng-backend"]}
    r = c.post("/v1/ingest", headers=ALICE, params={"scope": SCOPE}, json={"units": [unit]})
    assert r.status_code == 200, r.text
    return str(r.json()["results"][0]["job_id"])


def _wait(c: Any, job_id: str, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = c.get(f"/v1/jobs/{job_id}", headers=ALICE).json()
        if j["state"] in ("done", "failed"):
            assert j["state"] == "done", j
            return
        time.sleep(0.3)
    raise TimeoutError(job_id)


def _searches(c: Any) -> dict[str, list[str]]:
    out = {}
    for who, h in (("alice", ALICE), ("bob", BOB), ("carol", CAROL)):
        for q in QUERIES:
            for mode in MODES:
                r = c.post("/v1/search", headers=h, json={"q": q, "mode": mode, "top_k": 8})
                assert r.status_code == 200, r.text
                out[f"{who}|{mode}|{q}"] = [x["unit_id"] for x in r.json()["hits"]]
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> dict[str, Any]:
    """The demo corpus and principals, a PDF, a WAV and an MP4 derived by the real engines, one
    Unit deleted (a hole in the catalog ids), searched before the server is stopped."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/setup.sh installs them)")
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app
    from superchargedb.demo import seed

    d = tmp_path_factory.mktemp("migrate-source")
    svc = _embedded(d / "data", embedder)
    try:
        seed(svc)
        with TestClient(create_app(svc), raise_server_exceptions=False) as c:
            wav = _wav(d)
            jobs = [
                _put_and_ingest(c, f"{SCOPE}/drill.pdf", _pdf(), "application/pdf", "drill"),
                _put_and_ingest(c, f"{SCOPE}/standup.wav", wav.read_bytes(), "audio/wav", "su"),
                _put_and_ingest(
                    c, f"{SCOPE}/clip.mp4", _mp4(d, wav).read_bytes(), "video/mp4", "v"
                ),
            ]
            for j in jobs:
                _wait(c, j)
            r = c.post(
                "/v1/ingest",
                headers=ALICE,
                json={"units": [{"text": "A note to delete again.", "doc_id": "gone"}]},
            )
            gone = r.json()["results"][0]["unit_id"]
            assert c.delete(f"/v1/units/{gone}", headers=ALICE).status_code == 200
            hits = _searches(c)
        alice = svc.authenticate(ALICE["Authorization"])
        session = console_sessions.create(svc.auth_store.sessions, alice, 3600)
    finally:
        svc.close()
    return {"dir": d / "data", "hits": hits, "session": session}


def _src_rows(data: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(data / "catalog.db") as conn:
        return [tuple(r) for r in conn.execute(sql)]


def _pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql.encode())]


def _cli(url: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["migrate", *args], env={"SCDB_DATABASE_URL": url})


@pytest.fixture(scope="module")
def migrated(source: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One uninterrupted run through the command line."""
    server = tmp_path_factory.mktemp("migrate-server") / "data"
    url = pg_stack.database(server)
    res = _cli(url, str(source["dir"]), "--data", str(server), "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout[res.stdout.index("{") :])
    # What it ends with, before a server over it records anything (usage, its anchor).
    return {"url": url, "server": server, "report": report, "dump": _dump(url)}


# What a table must hold, identically: PostgreSQL's own keys (units.id, jobs.seq, outbox.seq)
# replaced by the Unit id they stand for, or by the order they give.
DUMP = {
    "units": "SELECT unit_id, scope, doc_id, plane, modality, source_uri, mime, text, acl_owner,"
    " acl_groups, content_hash, chunk_idx, n_chunks, loc_kind, loc_start, loc_end, t_start_ms,"
    " t_end_ms, shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, created_at, event_at,"
    " object_key, object_sha, context, created_by, model_id, terms, dl, embedding::text"
    " FROM units ORDER BY unit_id",
    "postings": "SELECT p.term, u.unit_id, p.tf, p.pos FROM postings p JOIN units u"
    " ON u.id = p.unit ORDER BY 1, 2",
    "outbox": "SELECT o.op, o.plane, u.unit_id, o.d_docs, o.d_len, o.terms, o.d_df, o.applied"
    " FROM outbox o JOIN units u ON u.id = o.unit ORDER BY 3, 1",
    "lex": "SELECT n_docs, total, (SELECT count(*) FROM lex_terms),"
    " (SELECT sum(df) FROM lex_terms) FROM lex_stats",
    "lex_terms": "SELECT term, df FROM lex_terms ORDER BY term",
    "unit_words": "SELECT u.unit_id, w.idx, w.char_start, w.char_end, w.t_start_ms, w.t_end_ms,"
    " w.page, w.x0, w.y0, w.x1, w.y1, w.conf FROM unit_words w JOIN units u ON u.id = w.unit"
    " ORDER BY 1, 2",
    "unit_keyframes": "SELECT u.unit_id, k.mime, md5(k.data) FROM unit_keyframes k"
    " JOIN units u ON u.id = k.unit ORDER BY 1",
    "jobs": "SELECT id, kind, state, payload, principal, scope, acl_owner, acl_groups, attempts,"
    " max_attempts, dedupe_key, lease_token, lease_until, lease_owner, progress, result, error,"
    " created_at, updated_at FROM jobs ORDER BY seq",
    "principals": "SELECT * FROM principals ORDER BY id",
    "api_keys": "SELECT * FROM api_keys ORDER BY id",
    "console_sessions": "SELECT * FROM console_sessions ORDER BY token_hash",
    "docs": "SELECT * FROM docs ORDER BY 1, 2, 3",
    "objects": "SELECT * FROM objects ORDER BY 1, 2",
    "usage_daily": "SELECT * FROM usage_daily ORDER BY 1, 2, 3",
    "scope_gens": "SELECT * FROM scope_gens ORDER BY 1",
    "audit_log": "SELECT * FROM audit_log ORDER BY seq",
    "kv": "SELECT * FROM kv ORDER BY key",
}


def _dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    return {name: _pg_rows(url, sql) for name, sql in DUMP.items()}


@pytest.mark.slow  # the media derivation (OCR, ASR, video) and two servers: ~1-2 min on 2 cores
def test_a_migrated_store_holds_the_same_and_ranks_the_same(
    source: dict[str, Any], migrated: dict[str, Any], embedder: Embedder
) -> None:
    src, url, report = source["dir"], migrated["url"], migrated["report"]
    assert report["ok"] and not report["resumed"], report
    # Counted here, not only by the command: every table equal, none of them vacuous.
    for table, v in report["tables"].items():
        n = _src_rows(src, f"SELECT COUNT(*) FROM {table}")[0][0]
        assert _pg_rows(url, f"SELECT count(*) FROM {table}")[0][0] == n == v["target"], table
    nonempty = ("units", "principals", "api_keys", "console_sessions", "docs", "objects", "jobs")
    for table in (*nonempty, "usage_daily", "scope_gens", "audit_log"):
        assert report["tables"][table]["source"] > 0, table
    assert report["tables"]["unit_words"]["source"] > 0  # the speech and page words
    assert report["tables"]["unit_keyframes"]["source"] > 0  # the video's shots
    planes = {r[0] for r in _pg_rows(url, "SELECT DISTINCT plane FROM units")}
    assert {"text", "doc_visual", "audio", "visual"} <= planes, planes
    # Each Unit's columns and vector as the embedded catalog stores them.
    cols = (
        "unit_id, scope, doc_id, plane, modality, source_uri, mime, text, acl_owner,"
        " content_hash, chunk_idx, n_chunks, loc_kind, loc_start, loc_end, t_start_ms, t_end_ms,"
        " shot_idx, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, created_at, event_at, object_key,"
        " object_sha, context, created_by, model_id"
    )
    want = _src_rows(src, f"SELECT {cols}, acl_groups, embedding FROM units ORDER BY unit_id")
    got = _pg_rows(url, f"SELECT {cols}, acl_groups, embedding::text FROM units ORDER BY unit_id")
    assert [w[:-2] for w in want] == [g[:-2] for g in got]
    assert [sorted(json.loads(w[-2])) for w in want] == [sorted(g[-2]) for g in got]
    for w, g in zip(want, got, strict=True):
        stored = np.frombuffer(w[-1], dtype=np.float16)
        copied = np.array(json.loads(g[-1]), dtype=np.float32)
        assert np.array_equal(stored.astype(np.float32), copied), w[0]
    # The chain: the same records, verified on PostgreSQL with the same key.
    chain = "SELECT seq, prev_hash, hash, at, actor, action, record FROM audit_log ORDER BY seq"
    assert _src_rows(src, chain) == _pg_rows(url, chain)
    head = "SELECT value FROM kv WHERE key = 'audit_head'"
    assert _src_rows(src, head) == _pg_rows(url, head) != []
    assert report["audit"]["ok"] and report["audit"]["records"] == len(_src_rows(src, chain))
    # Every blob in the server's blob store, byte for byte.
    shas = {r[0] for r in _pg_rows(url, "SELECT sha256 FROM objects")}
    server_blobs, source_blobs = FileBlobStore(migrated["server"] / "objects"), src / "objects"
    for sha in shas:
        assert (
            server_blobs.path(sha).read_bytes()
            == (source_blobs / sha[:2] / sha[2:4] / sha).read_bytes()
        )
    # A server over the migrated database: the same principals' keys, the same rankings.
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app
    from superchargedb.auth.admin import OPERATOR

    svc = make_service(migrated["server"], embedder, database_url=url)
    try:
        assert svc.audit_verify(OPERATOR)["ok"]
        # A console session signed in on the embedded server goes on on the stack.
        p, _ = console_sessions.lookup(svc.auth_store.sessions, source["session"], 3600)
        assert p.name == "alice"
        with TestClient(create_app(svc), raise_server_exceptions=False) as c:
            after = _searches(c)
    finally:
        svc.close()
    before = source["hits"]
    assert after.keys() == before.keys()
    for k in before:
        assert after[k] == before[k], k
    assert sum(len(v) >= 2 for v in before.values()) >= 20  # orders to compare, not empty lists
    media = {r[0] for r in _pg_rows(url, "SELECT unit_id FROM units WHERE object_key IS NOT NULL")}
    assert media & {u for v in before.values() for u in v}  # media Units among the hits


@pytest.mark.slow
def test_an_interrupted_migration_resumes_to_the_same_end(
    source: dict[str, Any],
    migrated: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = pg_stack.database(tmp_path / "db")
    blobs = FileBlobStore(tmp_path / "server" / "objects")
    real, calls = pg_units.insert_new, []

    def dies_in_the_third_batch(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        got = real(*a, **kw)  # written in the batch's transaction, which then fails
        if len(calls) == 3:
            raise KeyboardInterrupt("killed mid-batch")
        return got

    monkeypatch.setattr(pg_units, "insert_new", dies_in_the_third_batch)
    with pytest.raises(KeyboardInterrupt):
        migration.migrate(source["dir"], url, blobs, KEY, batch=4)
    monkeypatch.undo()
    # Two whole batches and nothing of the third; no audit record yet (the chain comes last).
    assert _pg_rows(url, "SELECT count(*) FROM units")[0][0] == 8
    assert _pg_rows(url, "SELECT count(*) FROM audit_log")[0][0] == 0
    eighth = _src_rows(source["dir"], "SELECT id FROM units ORDER BY id LIMIT 1 OFFSET 7")
    assert _pg_rows(url, "SELECT value FROM kv WHERE key = 'migrate:after:units'") == [
        (str(eighth[0][0]),)
    ]
    sent: list[int] = []

    def counted(cur: Any, units: Any, *a: Any) -> Any:
        sent.append(len(units))
        return real(cur, units, *a)

    monkeypatch.setattr(pg_units, "insert_new", counted)
    report = migration.migrate(source["dir"], url, blobs, KEY, batch=4)
    monkeypatch.undo()
    assert report["ok"] and report["resumed"], report
    # It went on after the last committed batch: the stored Units were not read again.
    assert sum(sent) == report["tables"]["units"]["source"] - 8
    assert report["tables"] == migrated["report"]["tables"]
    assert _dump(url) == migrated["dump"]
    again = migration.migrate(source["dir"], url, blobs, KEY, batch=4)  # a third run: no-op
    assert again["ok"] and again["resumed"] and again["blobs_copied"] == 0
    assert _dump(url) == migrated["dump"]


# -- refusals: a small text-only store suffices --------------------------------------------


def _small(d: Path, embedder: Embedder, text: str = "A small store.") -> Path:
    from superchargedb.demo import seed_principals

    svc = _embedded(d, embedder)
    try:
        seed_principals(svc)
        alice = svc.authenticate(ALICE["Authorization"])
        out = svc.ingest(alice, {"units": [{"text": text, "doc_id": "one"}]}, SCOPE)
        assert out["results"][0]["ok"], out
    finally:
        svc.close()
    return d


def _units(url: str) -> int:
    return int(_pg_rows(url, "SELECT count(*) FROM units")[0][0])


def test_a_database_holding_another_store_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    from superchargedb.demo import seed_principals

    src = _small(tmp_path / "small", embedder)
    url = pg_stack.database(tmp_path / "db")
    svc = make_service(tmp_path / "server", embedder, database_url=url)
    try:
        seed_principals(svc)  # a deployment of its own, already in use
    finally:
        svc.close()
    res = _cli(url, str(src), "--data", str(tmp_path / "server"))
    assert res.exit_code == 1 and "not from this source (3 principals" in res.output, res.output
    assert _units(url) == 0


def test_a_second_source_is_refused_and_the_first_resumes(
    tmp_path: Path, embedder: Embedder
) -> None:
    first = _small(tmp_path / "first", embedder)
    second = _small(tmp_path / "second", embedder, "Another small store.")
    url, server = pg_stack.database(tmp_path / "db"), str(tmp_path / "server")
    res = _cli(url, str(first), "--data", server)
    assert res.exit_code == 0 and "migrate: OK" in res.output, res.output
    assert "audit chain on PostgreSQL:" in res.output and "verified" in res.output
    res = _cli(url, str(second), "--data", server)
    assert res.exit_code == 1 and "a migration of another store" in res.output, res.output
    assert _pg_rows(url, "SELECT text FROM units") == [("A small store.",)]
    res = _cli(url, str(first), "--data", server)  # the same source again: nothing to add
    assert res.exit_code == 0 and "migrate (resumed): OK" in res.output, res.output
    assert _units(url) == 1


def test_another_models_database_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    src = _small(tmp_path / "small", embedder)
    url = pg_stack.database(tmp_path / "db")
    with psycopg.connect(url, autocommit=True) as conn:
        pg_migrations.migrate(conn, 8, "another-model")
    res = _cli(url, str(src), "--data", str(tmp_path / "server"))
    assert res.exit_code == 1 and "8-d vectors of 'another-model'" in res.output, res.output
    assert _units(url) == 0


def test_a_source_a_server_holds_is_refused(tmp_path: Path, embedder: Embedder) -> None:
    src = _small(tmp_path / "small", embedder)
    url = pg_stack.database(tmp_path / "db")
    svc = _embedded(src, embedder)  # the server runs on the source
    try:
        res = _cli(url, str(src), "--data", str(tmp_path / "server"))
    finally:
        svc.close()
    assert res.exit_code == 1 and "owned by another process" in res.output, res.output
    assert _pg_rows(url, "SELECT to_regclass('units')") == [(None,)]  # nothing made
    res = _cli(url, str(src), "--data", str(tmp_path / "server"))  # stopped: it goes through
    assert res.exit_code == 0, res.output
