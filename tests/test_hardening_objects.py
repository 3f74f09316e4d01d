"""Objects hardening on a real server (uvicorn on a loopback port, httpx): identity by
(key, owner), no squatting, no overwrite by a group writer, no PUT existence oracle, storage caps
in /v1/usage, DELETE with 409 / cascade, blobs kept against a concurrent PUT, HEAD = GET."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    ALICE,
    BOB,
    LiveServer,
    add_principal,
    auth,
    make_service,
    stored_rows,
    stored_value,
)
from superchargedb.service import Service
from superchargedb.settings import Settings

FREE_CAP = 50_000
FREE_PAGES = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Any]:
    from superchargedb.demo import seed_principals

    svc = make_service(
        tmp_path_factory.mktemp("objects") / "data",
        embedder,
        free_object_bytes=FREE_CAP,
        free_media_pages=FREE_PAGES,
    )
    seed_principals(svc)
    keys = {
        # Shares alice's group and may write: a group writer.
        "gw": add_principal(
            svc, "gw", perms=["read", "write"], scopes=["acme/alpha"], groups=["eng-backend"]
        ),
        # May write in alice's scope, in none of her groups: the squatter.
        "mallory": add_principal(svc, "mallory", perms=["read", "write"], scopes=["acme/alpha"]),
        "frank": add_principal(
            svc, "frank", perms=["read", "write"], tier="free", scopes=["acme/alpha/frank"]
        ),
        "fiona": add_principal(
            svc, "fiona", perms=["read", "write"], tier="free", scopes=["acme/alpha/fiona"]
        ),
    }
    with LiveServer(svc) as live:
        yield svc, live, {k: auth(v) for k, v in keys.items()}
    svc.close()


@pytest.fixture
def http(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[1].url, timeout=30) as c:
        yield c


def put(
    c: httpx.Client, key: str, body: bytes, who: dict[str, str], **params: str
) -> httpx.Response:
    h = {**who, "Content-Type": "text/plain"}
    if "if_match" in params:
        h["If-Match"] = params.pop("if_match")
    return c.put(f"/v1/objects/{key}", headers=h, content=body, params=params)


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest() + '"'


def test_two_owners_one_key_each_get_their_own(server, http):
    svc, _, who = server
    key = "acme/alpha/backend/identity.txt"
    assert put(http, key, b"alice's own words", ALICE, acl_groups="").status_code == 201
    # Today: 403 "the key is taken" -- the key belonged to whoever wrote it first.
    r = put(http, key, b"mallory's words", who["mallory"], acl_groups="")
    assert r.status_code == 201, r.text
    assert http.get(f"/v1/objects/{key}", headers=ALICE).content == b"alice's own words"
    assert http.get(f"/v1/objects/{key}", headers=who["mallory"]).content == b"mallory's words"
    # source_uri resolves the same way: each ingest reads its caller's own object.
    for h, doc, text in ((ALICE, "id-a", "alice's own"), (who["mallory"], "id-m", "mallory's")):
        r = http.post(
            "/v1/ingest",
            headers=h,
            json={"units": [{"source_uri": key, "mime": "text/plain", "doc_id": doc}]},
        )
        res = r.json()["results"][0]
        assert res["ok"], r.text
        assert text in http.get(f"/v1/units/{res['unit_id']}", headers=h).json()["text"]


def test_read_resolves_to_the_newest_readable_when_the_caller_has_none(server, http):
    _, _, who = server
    key = "acme/alpha/backend/newest.txt"
    assert put(http, key, b"older, shared", ALICE).status_code == 201  # eng-backend
    assert put(http, key, b"newer, shared", who["gw"]).status_code == 201  # eng-backend
    assert http.get(f"/v1/objects/{key}", headers=BOB).content == b"newer, shared"
    assert http.get(f"/v1/objects/{key}", headers=ALICE).content == b"older, shared"


def test_squatter_blocks_nothing(server, http):
    _, _, who = server
    key = "acme/alpha/backend/squat.txt"
    assert put(http, key, b"squatted", who["mallory"], acl_groups="").status_code == 201
    # Today the owner of the scope can neither write (403) nor read (404) its own key.
    r = put(http, key, b"the owner's content", ALICE)
    assert r.status_code == 201, r.text
    assert http.get(f"/v1/objects/{key}", headers=ALICE).content == b"the owner's content"
    r = put(http, key, b"the owner's v2", ALICE, if_match=etag(b"the owner's content"))
    assert r.status_code == 201, r.text
    assert http.get(f"/v1/objects/{key}", headers=ALICE).content == b"the owner's v2"
    assert http.get(f"/v1/objects/{key}", headers=who["mallory"]).content == b"squatted"


def test_group_writer_cannot_overwrite_the_owners_object(server, http):
    _, _, who = server
    key = "acme/alpha/backend/shared-runbook.txt"
    assert put(http, key, b"the owner's runbook", ALICE).status_code == 201
    assert http.get(f"/v1/objects/{key}", headers=who["gw"]).content == b"the owner's runbook"
    # Today this replaces alice's object for everyone.
    r = put(http, key, b"rewritten by gw", who["gw"], if_match=etag(b"the owner's runbook"))
    assert r.status_code == 201, r.text
    assert http.get(f"/v1/objects/{key}", headers=ALICE).content == b"the owner's runbook"
    assert http.get(f"/v1/objects/{key}", headers=who["gw"]).content == b"rewritten by gw"


def test_put_on_an_unreadable_key_answers_like_a_free_key(server, http):
    _, _, who = server
    taken, free = "acme/alpha/backend/oracle-taken.txt", "acme/alpha/backend/oracle-free.txt"
    assert put(http, taken, b"private", ALICE, acl_groups="").status_code == 201
    a = put(http, taken, b"probe", who["mallory"])
    b = put(http, free, b"probe", who["mallory"])
    # Today: 403 for the taken key, 201 for the free one.
    assert a.status_code == b.status_code == 201, (a.text, b.text)
    assert set(a.headers) == set(b.headers)
    ja, jb = a.json(), b.json()
    assert ja.pop("key") == taken and jb.pop("key") == free
    assert ja == jb
    # And the 409 of an unconditional replace is about the caller's own object only.
    a = put(http, taken, b"probe 2", who["mallory"])
    b = put(http, free, b"probe 2", who["mallory"])
    assert a.status_code == b.status_code == 409
    assert a.json() == b.json()


def test_object_bytes_count_in_usage_and_against_the_tier_cap(server, http):
    svc, _, who = server
    frank = who["frank"]
    assert Settings().free_object_bytes < 2**30  # a free key cannot store 1 GiB by default
    u0 = http.get("/v1/usage", headers=frank).json()
    assert u0["object_bytes"] == {"used": 0, "cap": FREE_CAP}
    body = b"f" * 30_000
    assert put(http, "acme/alpha/frank/a.bin", body, frank).status_code == 201
    # The same content stored by someone else is de-duplicated on disk, never in usage.
    assert put(http, "acme/alpha/backend/same-as-frank.bin", body, ALICE).status_code == 201
    assert http.get("/v1/usage", headers=frank).json()["object_bytes"]["used"] == 30_000
    assert http.get("/v1/usage", headers=ALICE).json()["object_bytes"]["used"] >= 30_000
    r = put(http, "acme/alpha/frank/b.bin", b"g" * 30_000, frank)
    assert r.status_code == 402 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert r.json()["error"]["limit"] == FREE_CAP
    # Nothing of the refused upload is kept; usage did not move.
    assert http.get("/v1/objects/acme/alpha/frank/b.bin", headers=frank).status_code == 404
    assert http.get("/v1/usage", headers=frank).json()["object_bytes"]["used"] == 30_000
    assert not any((svc.blobs.root / "tmp").iterdir())
    # Replacing one's own object frees its old size first.
    r = put(http, "acme/alpha/frank/a.bin", b"h" * 45_000, frank, if_match=etag(body))
    assert r.status_code == 201, r.text
    assert http.get("/v1/usage", headers=frank).json()["object_bytes"]["used"] == 45_000


def audit_rows(svc: Service) -> list[dict[str, Any]]:
    rows = stored_rows(svc, "SELECT record FROM audit_log ORDER BY seq")
    return [json.loads(r[0]) for r in rows]


def ingest(http: httpx.Client, who: dict[str, str], key: str, doc: str, groups: Any) -> str:
    u: dict[str, Any] = {"source_uri": key, "mime": "text/plain", "doc_id": doc}
    if groups is not None:
        u["acl_groups"] = groups
    r = http.post("/v1/ingest", headers=who, json={"units": [u]})
    res = r.json()["results"][0]
    assert res["ok"], r.text
    return str(res["unit_id"])


def test_delete_in_use_names_only_readable_docs_then_cascades_in_one_record(server, http):
    svc, _, who = server
    key = "acme/alpha/backend/in-use.txt"
    body = b"A runbook paragraph about draining the eu-west queue before failover."
    assert put(http, key, body, ALICE).status_code == 201  # shared with eng-backend
    mine = ingest(http, ALICE, key, "inuse-alice", None)
    # gw derives a private Unit from alice's shared object: alice must not learn its doc_id.
    theirs = ingest(http, who["gw"], key, "inuse-gw-private", [])
    r = http.delete(f"/v1/objects/{key}", headers=ALICE)
    assert r.status_code == 409, r.text  # today: 405, there is no object delete
    err = r.json()["error"]
    assert err["code"] == "object_in_use" and err["doc_ids"] == ["inuse-alice"]
    assert http.get(f"/v1/objects/{key}", headers=ALICE).status_code == 200
    before = audit_rows(svc)
    r = http.delete(f"/v1/objects/{key}", headers=ALICE, params={"cascade": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["unit_ids"] == [mine] and r.json()["doc_ids"] == ["inuse-alice"]
    after = audit_rows(svc)
    assert len(after) == len(before) + 1
    assert after[-1]["action"] == "object.delete" and after[-1]["removed"] == [mine]
    assert http.get(f"/v1/units/{mine}", headers=ALICE).status_code == 404
    assert http.get(f"/v1/objects/{key}", headers=ALICE).status_code == 404
    # gw's Unit is untouched and still holds its blob (reference-counted, not collected).
    assert http.get(f"/v1/units/{theirs}", headers=who["gw"]).status_code == 200
    assert r.json()["blob_collected"] is False
    assert svc.blobs.exists(hashlib.sha256(body).hexdigest())
    # Another principal's object at a key is not the caller's to delete: a 404 like a free key.
    assert put(http, key, b"gw's own", who["gw"]).status_code == 201
    a = http.delete(f"/v1/objects/{key}", headers=ALICE)
    b = http.delete("/v1/objects/acme/alpha/backend/never-stored.txt", headers=ALICE)
    assert a.status_code == b.status_code == 404 and a.json() == b.json()
    assert http.get(f"/v1/objects/{key}", headers=who["gw"]).content == b"gw's own"


def test_units_keep_the_blob_they_were_derived_from(server, http):
    svc, _, _ = server
    key = "acme/alpha/backend/replaced.txt"
    v1 = b"First version of the note about the deploy freeze."
    assert put(http, key, v1, ALICE).status_code == 201
    uid = ingest(http, ALICE, key, "replaced-doc", None)
    v2 = b"Second version, nothing about freezes."
    assert put(http, key, v2, ALICE, if_match=etag(v1)).status_code == 201
    row = stored_rows(svc, "SELECT object_sha FROM units WHERE unit_id = ?", (uid,))[0]
    assert row[0] == hashlib.sha256(v1).hexdigest()
    assert svc.blobs.exists(row[0])  # the Unit still pins it after the replace
    # Once nothing references the old content, deleting the object collects its blob.
    r = http.delete(f"/v1/objects/{key}", headers=ALICE, params={"cascade": "true"})
    assert r.status_code == 200 and r.json()["units_deleted"] == 0  # the Unit cites v1, not v2
    assert r.json()["blob_collected"] is True
    assert not svc.blobs.exists(hashlib.sha256(v2).hexdigest())


def test_a_put_deduplicating_onto_a_blob_being_collected_keeps_its_bytes(server, http, monkeypatch):
    svc, live, who = server
    body = b"content both keys share, collected while a PUT of it is in flight"
    sha = hashlib.sha256(body).hexdigest()
    old = "acme/alpha/backend/collect-me.txt"
    assert put(http, old, body, ALICE).status_code == 201
    staged, go = threading.Event(), threading.Event()
    real_stage = svc.blobs.stage

    def stage(*a: Any, **kw: Any) -> Any:
        out = real_stage(*a, **kw)
        staged.set()  # the blob exists under its final name: a PUT decided here would dedupe
        assert go.wait(30)
        return out

    monkeypatch.setattr(svc.blobs, "stage", stage)
    result: dict[str, Any] = {}

    def concurrent_put() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as c:
            result["r"] = put(c, "acme/alpha/backend/dedupe-onto.txt", body, who["gw"])

    t = threading.Thread(target=concurrent_put)
    t.start()
    assert staged.wait(30)
    monkeypatch.setattr(svc.blobs, "stage", real_stage)
    r = http.delete(f"/v1/objects/{old}", headers=ALICE)
    assert r.status_code == 200 and r.json()["blob_collected"] is True, r.text
    assert not svc.blobs.exists(sha)
    go.set()
    t.join(60)
    assert result["r"].status_code == 201, result["r"].text
    got = http.get("/v1/objects/acme/alpha/backend/dedupe-onto.txt", headers=who["gw"])
    assert got.status_code == 200 and got.content == body
    assert Path(svc.blobs.path(sha)).read_bytes() == body


def test_head_answers_like_get_without_the_body(server, http):
    _, _, who = server
    key = "acme/alpha/backend/head.txt"
    body = b"0123456789" * 50
    assert put(http, key, body, ALICE).status_code == 201
    for hdr, status in (({}, 200), ({"Range": "bytes=10-19"}, 206), ({"Range": "bytes=900-"}, 416)):
        g = http.get(f"/v1/objects/{key}", headers={**ALICE, **hdr})
        h = http.head(f"/v1/objects/{key}", headers={**ALICE, **hdr})
        assert h.status_code == g.status_code == status, (hdr, h.status_code)  # today: 405
        assert h.content == b""
        assert stable(h.headers) == stable(g.headers), hdr
    g = http.get(f"/v1/objects/{key}", headers=ALICE)
    assert g.headers["etag"] == etag(body) and g.headers["content-length"] == str(len(body))
    h = http.head(f"/v1/objects/{key}", headers={**ALICE, "If-None-Match": etag(body)})
    assert h.status_code == 304
    # What the caller cannot read is a 404 exactly like a key nobody stored.
    assert put(http, "acme/alpha/backend/head-private.txt", b"x", ALICE, acl_groups="").is_success
    a = http.head("/v1/objects/acme/alpha/backend/head-private.txt", headers=who["mallory"])
    b = http.head("/v1/objects/acme/alpha/backend/head-nothing.txt", headers=who["mallory"])
    assert a.status_code == b.status_code == 404
    assert stable(a.headers) == stable(b.headers)


def stable(headers: httpx.Headers) -> dict[str, str]:
    """Response headers less the per-response ones (date, request id)."""
    return {k: v for k, v in headers.items() if k not in ("date", "x-request-id")}


def test_pages_cap_and_units_keep_their_blob_for_previews(server, http):
    from test_media_ingest import make_pdf, wait_job

    _, _, who = server
    fiona = who["fiona"]
    pdf = make_pdf()  # two pages
    key = "acme/alpha/fiona/runbook.pdf"
    h = {**fiona, "Content-Type": "application/pdf"}
    assert http.put(f"/v1/objects/{key}", headers=h, content=pdf).status_code == 201
    r = http.post(
        "/v1/ingest",
        headers=fiona,
        json={"units": [{"source_uri": key, "mime": "application/pdf"}]},
    )
    job = wait_job(http, fiona, r.json()["results"][0]["job_id"])
    assert job["state"] == "done", job
    assert http.get("/v1/usage", headers=fiona).json()["media_pages"] == {
        "used": 2,
        "cap": FREE_PAGES,
    }
    # The allowance is used up: the next object ingest is refused as a whole, nothing queued.
    key2 = "acme/alpha/fiona/second.pdf"
    assert http.put(f"/v1/objects/{key2}", headers=h, content=pdf + b"\n").status_code == 201
    r = http.post(
        "/v1/ingest",
        headers=fiona,
        json={"units": [{"source_uri": key2, "mime": "application/pdf"}]},
    )
    assert r.status_code == 402 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert [j["job_id"] for j in http.get("/v1/jobs", headers=fiona).json()["jobs"]] == [
        job["job_id"]
    ]
    # Replacing the object does not change what its Units were derived from: still a preview.
    uid = job["unit_ids"][0]
    r = http.put(
        f"/v1/objects/{key}",
        headers={**fiona, "Content-Type": "text/plain", "If-Match": etag(pdf)},
        content=b"no longer a PDF",
    )
    assert r.status_code == 201, r.text
    p = http.get(f"/v1/units/{uid}/preview", headers=fiona)
    assert p.status_code == 200 and p.content.startswith(b"\x89PNG"), p.text[:200]


def test_an_ingest_racing_the_delete_of_its_object_stores_nothing(server, http, monkeypatch):
    svc, live, _ = server
    key = "acme/alpha/backend/deleted-mid-ingest.txt"
    body = b"A note whose object is deleted while it is being ingested."
    assert put(http, key, body, ALICE).status_code == 201
    resolved, go = threading.Event(), threading.Event()
    real = svc.ingestor._chunk_and_embed

    def embed(prepared: Any) -> None:  # after the object was resolved, before the write lock
        resolved.set()
        assert go.wait(30)
        real(prepared)

    monkeypatch.setattr(svc.ingestor, "_chunk_and_embed", embed)
    result: dict[str, Any] = {}

    def concurrent_ingest() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as c:
            result["r"] = c.post(
                "/v1/ingest",
                headers=ALICE,
                json={"units": [{"source_uri": key, "mime": "text/plain", "doc_id": "racing"}]},
            )

    t = threading.Thread(target=concurrent_ingest)
    t.start()
    assert resolved.wait(30)
    monkeypatch.setattr(svc.ingestor, "_chunk_and_embed", real)
    r = http.delete(f"/v1/objects/{key}", headers=ALICE)
    assert r.status_code == 200 and r.json()["blob_collected"] is True, r.text
    go.set()
    t.join(60)
    assert result["r"].status_code == 409, result["r"].text
    n = stored_value(svc, "SELECT COUNT(*) FROM units WHERE doc_id = 'racing'")
    assert n == 0
    assert svc.doctor()["objects"]["missing_blobs"] == []


def test_migration_keeps_existing_objects_and_pins_their_units(tmp_path):
    import sqlite3

    from superchargedb.storage.sqlite import migrations as m

    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    before = m.MIGRATIONS[: [n for n, _ in m.MIGRATIONS].index("m007_object_owner")]
    for _, sql in before:
        for stmt in m._statements(sql):
            conn.execute(stmt)
    conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER)")
    conn.executemany("INSERT INTO schema_migrations VALUES (?, 0)", [(n,) for n, _ in before])
    conn.execute(
        "INSERT INTO objects VALUES ('acme/alpha/x.txt', ?, 3, 'text/plain', 'acme/alpha',"
        " 'alice', '[]', 'alice', 1)",
        ("ab" * 32,),
    )
    cols = {r[1] for r in conn.execute("PRAGMA table_info(units)")}
    assert "object_sha" not in cols
    conn.execute(
        "INSERT INTO units(unit_id, scope, doc_id, modality, plane, source_uri, mime, text,"
        " acl_owner, acl_groups, acl, content_hash, chunk_idx, n_chunks, created_at,"
        " event_at, t_bucket, created_by, model_id, embedding, seq, object_key) VALUES"
        " ('u1', 'acme/alpha', 'd', 'text', 'text', 'acme/alpha/x.txt', 'text/plain',"
        " 'abc', 'alice', '[]', '', 'h', 0, 1, 1, 1, 0, 'alice', 'm', x'', 1,"
        " 'acme/alpha/x.txt')"
    )
    assert m.migrate(conn) == [
        "m007_object_owner",
        *[n for n, _ in m.MIGRATIONS][len(before) + 1 :],
    ]
    row = conn.execute("SELECT * FROM objects").fetchone()
    assert (row["key"], row["acl_owner"], row["sha256"]) == ("acme/alpha/x.txt", "alice", "ab" * 32)
    unit = conn.execute("SELECT object_sha FROM units WHERE unit_id = 'u1'").fetchone()
    assert unit[0] == "ab" * 32
    # The same key by another owner is a second object, not a conflict.
    conn.execute(
        "INSERT INTO objects(key, acl_owner, sha256, size, content_type, scope, acl_groups,"
        " created_by, created_at) VALUES ('acme/alpha/x.txt', 'mallory', ?, 1, 'text/plain',"
        " 'acme/alpha', '[]', 'mallory', 2)",
        ("cd" * 32,),
    )
