"""Disk full on a real filesystem: a small tmpfs under the data dir, filled through the API.

A real server runs on a 24 MB tmpfs (the model lives in the package, not the data dir). Objects
fill the disk until an upload fails, then text ingests, a delete and an ACL change run against
the full disk. Every failure must be a clean 507 (or 503) JSON error with a stable code, never a
500; reads keep working; after the filler file is removed, ingest works again; and offline the
catalog passes ``PRAGMA integrity_check``, the audit chain verifies and the doctor finds the
catalog and the vector index in agreement.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import ALICE

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

CLEAN = {507: "insufficient_storage", 503: "unavailable"}


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root (running as uid {os.geteuid()})")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)


def text(i: int, j: int) -> str:
    return f"diskfull{i}x{j} " + "the quarterly storage report lists every volume. " * 40


def is_clean_error(r: httpx.Response) -> bool:
    try:
        code = r.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return False
    return CLEAN.get(r.status_code) == code


def test_disk_full_gives_507_and_no_corruption(small_fs: Path, tmp_path: Path) -> None:
    from bench import crash_points

    data = small_fs / "data"
    env = {**crash_points.base_env(tmp_path / "config"), "SCDB_CHECKPOINT_EVERY": "4"}
    seed = crash_points.Proc(data, env, tmp_path / "seed.log", "serve", "--demo")
    assert seed.ready(180), seed.tail()
    assert seed.terminate() == 0, seed.tail()
    filler = small_fs / "filler.bin"
    filler.write_bytes(os.urandom(4 * 1024 * 1024))

    srv = crash_points.Proc(data, env, tmp_path / "server.log")
    try:
        assert srv.ready(120), srv.tail()
        c = httpx.Client(base_url=srv.url, headers=ALICE, timeout=120)
        acked: dict[str, str] = {}
        statuses: list[tuple[str, int, str]] = []

        def ingest(i: int, n: int) -> httpx.Response:
            units = [{"text": text(i, j), "doc_id": f"df-{i}-{j}"} for j in range(n)]
            r = c.post("/v1/ingest", json={"units": units})
            statuses.append(("ingest", r.status_code, r.text[:200]))
            if r.status_code == 200:
                for u, res in zip(units, r.json()["results"], strict=True):
                    assert res["ok"], res
                    acked[res["unit_id"]] = u["text"]
            return r

        for i in range(3):
            assert ingest(i, 5).status_code == 200
        victim, keep = list(acked)[:2]

        # Fill the disk with objects until an upload fails.
        failed_put = None
        for k in range(40):
            r = c.put(
                f"/v1/objects/acme/alpha/backend/fill/{k}.bin",
                content=os.urandom(1024 * 1024),
                headers={"Content-Type": "application/octet-stream"},
            )
            statuses.append(("object", r.status_code, r.text[:200]))
            if r.status_code != 201:
                failed_put = r
                break
        assert failed_put is not None, "the tmpfs never filled up"
        assert is_clean_error(failed_put), (failed_put.status_code, failed_put.text)
        # The server answered before reading the whole upload, so it resets that connection
        # (as any HTTP server does with an unread body): continue on a fresh one.
        c.close()
        c = httpx.Client(base_url=srv.url, headers=ALICE, timeout=120)

        # Writes against the full disk: ingest until one fails, then a delete and an ACL change.
        failed_ingest = None
        for i in range(3, 60):
            r = ingest(i, 20)
            if r.status_code != 200:
                failed_ingest = r
                break
        assert failed_ingest is not None, "ingest never hit the full disk"
        r = c.delete(f"/v1/units/{victim}")
        statuses.append(("delete", r.status_code, r.text[:200]))
        deleted = r.status_code == 200
        r = c.patch("/v1/docs/df-0-1", json={"acl_groups": []})  # a write: removing a group
        statuses.append(("patch", r.status_code, r.text[:200]))

        bad = [s for s in statuses if s[1] not in (200, 201) and s[1] not in CLEAN]
        assert not bad, bad  # no 500s, no other surprises
        for kind, status, body in statuses:
            if status in CLEAN:
                assert f'"code":"{CLEAN[status]}"' in body.replace(" ", ""), (kind, body)

        # Reads keep working on the full disk.
        for uid in acked:
            r = c.get(f"/v1/units/{uid}")
            if uid == victim and deleted:
                assert r.status_code == 404
                continue
            assert r.status_code == 200, (uid, r.status_code)
        tok = acked[keep].split()[0]
        hits = c.post("/v1/search", json={"q": tok, "mode": "lexical"}).json()["hits"]
        assert keep in [h["unit_id"] for h in hits]

        # Free the space: writes work again and are searchable by both legs.
        filler.unlink()
        r = ingest(100, 2)
        assert r.status_code == 200, r.text
        new = r.json()["results"][0]["unit_id"]
        lex = c.post("/v1/search", json={"q": "diskfull100x0", "mode": "lexical"}).json()
        dense = c.post("/v1/search", json={"q": acked[new], "mode": "dense", "top_k": 3}).json()
        assert new in [h["unit_id"] for h in lex["hits"]]
        assert new in [h["unit_id"] for h in dense["hits"]]
        c.close()
        assert srv.terminate() == 0, srv.tail()
    finally:
        srv.kill()

    # Offline: SQLite integrity, the audit chain, catalog vs index.
    conn = sqlite3.connect(f"file:{data / 'catalog.db'}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    present = {r[0] for r in conn.execute("SELECT unit_id FROM units")}
    conn.close()
    assert set(acked) - {victim} <= present
    for cmd in (["audit", "verify"], ["doctor"]):
        p = subprocess.run(
            [sys.executable, "-m", "superchargedb.cli.main", *cmd, "--data", str(data)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, (cmd, p.stdout[-2000:], p.stderr[-2000:])
