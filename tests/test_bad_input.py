"""Bad input, hand-written: every case gets a clear JSON error with a stable ``error.code`` (never
a 500) and leaves the logical state exactly as it was (tests/statedump.py: every catalog table,
the vector and lexical index ids, the object listing with hashes).

Three kinds of outcome:

- rejected: a 4xx with the expected code; state unchanged.
- per-Unit rejection: ``POST /v1/ingest`` reports a bad Unit in ``results[i]`` of a 200 by
  contract (seed 002: per-Unit failures), ``ingested == 0``; state unchanged.
- accepted as data: FTS5 syntax or SQL text where a field legitimately holds any string (a query,
  a Unit's text, doc_id, source_uri, groups) is plain data: a read answers 200 and changes
  nothing; a write stores exactly that string (read back) and modifies no earlier row.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from bad_input_cases import (
    ADMIN,
    CASES,
    FIELDS,
    GROUPER,
    ING,
    MATRIX,
    PAYLOADS,
    SCOPE,
    SEARCH,
    Case,
    unit,
)
from conftest import (
    ALICE,
    LiveServer,
    add_principal,
    as_list,
    auth,
    embedded,
    make_service,
    stored_rows,
    stored_value,
)
from statedump import diff, state_dump
from superchargedb.api.app import create_app
from superchargedb.auth import principals as principals_mod

# Tables a legitimate write updates in place (counters and heads); every other table's earlier
# rows must survive an accepted write untouched.
MUTABLE = {"scope_gens", "kv", "sqlite_sequence"}
# On PostgreSQL an accepted write's index side is rows too: its outbox row (applied history is
# pruned to the newest) and the BM25 statistics it moves.
MUTABLE_PG = {"outbox", "lex_stats", "lex_terms"}


@dataclass
class Env:
    svc: Any
    c: TestClient
    keys: dict[str, str] = field(default_factory=dict)
    port: int = 0


@pytest.fixture(scope="module")
def env(tmp_path_factory, embedder) -> Iterator[Env]:
    from superchargedb.demo import seed

    svc = make_service(
        tmp_path_factory.mktemp("bad") / "data",
        embedder,
        job_workers=0,
        rate_auth_fail_per_min=0,  # the brute-force limit has its own test; here, every 401
        max_object_bytes=64 * 1024,
    )
    seed(svc)  # the demo principals and documents: state worth protecting
    groups = [*PAYLOADS.values(), "eng-backend"]
    add_principal(
        svc, "grouper", perms=["read", "write", "admin"], scopes=["acme/alpha"], groups=groups
    )
    with svc.auth_store.write() as tx:
        alice_state = tx.principals.named("alice")
        assert alice_state is not None
        alice_id = alice_state.principal.id
        revoked_id, revoked = principals_mod.add_key(
            tx.principals, alice_id, "aegis_sk_revoked_alice"
        )
        principals_mod.add_key(tx.principals, alice_id, "aegis_sk_expired_alice", expires_at=1)
    alice = svc.authenticate("Bearer aegis_sk_alice")
    svc.admin_revoke_key(alice, revoked_id)
    with TestClient(create_app(svc), raise_server_exceptions=False) as c, LiveServer(svc) as live:
        r = c.put(
            f"/v1/objects/{SCOPE}/notes.txt",
            headers={**ALICE, "Content-Type": "text/plain"},
            content=b"Object notes about the failover drill.",
        )
        assert r.status_code == 201, r.text
        keys = {"revoked": revoked, "expired": "aegis_sk_expired_alice"}
        yield Env(svc, c, keys, live.port)
    svc.close()


class RawResponse:
    def __init__(self, data: bytes) -> None:
        head, _, self.content = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_code = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        self.text = self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def raw_http(port: int, case: Case) -> RawResponse:
    body = case.content if isinstance(case.content, bytes) else json.dumps(case.json).encode()
    head = [f"{case.method} {case.url} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    head += [f"{k}: {v}" for k, v in case.headers.items()]
    head.append(f"Content-Length: {len(body)}")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return RawResponse(data)


def send(env: Env, case: Case) -> Any:
    if case.raw:
        return raw_http(env.port, case)
    kw: dict[str, Any] = {"headers": case.headers}
    if case.json is not None:
        kw["json"] = case.json
    elif case.content is not None:
        kw["content"] = case.content
    return env.c.request(case.method, case.url, **kw)


def check_rejected(env: Env, case: Case) -> None:
    before = state_dump(env.svc)
    r = send(env, case)
    assert r.status_code == case.status, (r.status_code, r.text[:400])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    if case.unit_error is not None:
        assert body["ingested"] == 0, body
        for res in body["results"]:
            assert res["ok"] is False and res["error"]["code"] == case.unit_error, body
            assert res["error"]["message"], body
    else:
        assert body["error"]["code"] == case.code, body
        assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert not diff(before, state_dump(env.svc)), diff(before, state_dump(env.svc))


@pytest.mark.parametrize("name", sorted(CASES))
def test_rejected(env, name):
    case = CASES[name]
    auth_value = case.headers.get("Authorization")
    if auth_value in ("revoked", "expired"):
        case = Case(**{**case.__dict__, "headers": auth(env.keys[auth_value])})
    check_rejected(env, case)


def check_read(env: Env, case: Case, column: str | None, value: str) -> None:
    """A 200 that changes nothing; a filter on ``column`` matches ``value`` exactly (never as a
    pattern), and finds the Unit that holds it."""
    if column is not None and column != "modality":  # no Unit can hold an unknown modality
        spec = {"doc_id": value} if column == "doc_id" else {}
        if column == "acl_owner":
            spec = {"acl_owner": value, "acl_groups": ["eng-backend"]}
        who = ALICE
        if column == "acl_groups":  # alice's, shared by an admin in that group
            spec = {"acl_groups": [value], "acl_owner": "alice", "scope": SCOPE}
            who = GROUPER
        r = env.c.post(ING, json=unit(text=f"Failover holder {column}", **spec), headers=who)
        assert r.status_code == 200 and r.json()["results"][0]["ok"], r.text
    before = state_dump(env.svc)
    r = send(env, case)
    assert r.status_code == 200, (r.status_code, r.text[:400])
    if column is not None:
        body = r.json()
        ids = [x["unit_id"] for x in body.get("hits", body.get("units", []))]
        assert ids or column == "modality", body
        for uid in ids:
            got = stored_value(env.svc, f"SELECT {column} FROM units WHERE unit_id = ?", (uid,))
            assert (value in as_list(got)) if column == "acl_groups" else got == value, got
    assert not diff(before, state_dump(env.svc)), diff(before, state_dump(env.svc))


def check_written(env: Env, case: Case, fieldname: str, value: str, n: int) -> None:
    """Stored verbatim, readable back, and no earlier row changed or vanished."""
    before = state_dump(env.svc)
    body = case.json["units"][0]
    body["text"] = f"{body['text']} #{n}"  # a new Unit each time (idempotency key)
    r = send(env, case)
    assert r.status_code == 200, (r.status_code, r.text[:400])
    res = r.json()["results"][0]
    assert res["ok"], res
    after = state_dump(env.svc)
    mutable = MUTABLE | (MUTABLE_PG if env.svc.settings.database_url else set())
    for table, rows in before["tables"].items():
        if table in mutable:
            continue
        kept = {json.dumps(x, default=str) for x in after["tables"].get(table, [])}
        lost = [x for x in rows if json.dumps(x, default=str) not in kept]
        assert not lost, (table, lost[:3])
    cols = ("text", "doc_id", "source_uri", "mime", "acl_owner", "acl_groups")
    row = stored_rows(
        env.svc, f"SELECT {', '.join(cols)} FROM units WHERE unit_id = ?", (res["unit_id"],)
    )[0]
    stored = dict(zip(cols, row, strict=True))
    want = value if fieldname != "text" else body["text"]
    got = as_list(stored["acl_groups"]) if fieldname == "acl_groups" else stored[fieldname]
    assert got == ([value] if fieldname == "acl_groups" else want), (stored, value)
    if fieldname == "text":  # and it is searchable as plain text
        r = env.c.post(
            SEARCH, json={"q": body["text"], "mode": "lexical", "top_k": 100}, headers=ALICE
        )
        assert r.status_code == 200 and res["unit_id"] in {h["unit_id"] for h in r.json()["hits"]}


def check_stored(env: Env, case: Case, kind: str, value: str) -> None:
    """An accepted write of an odd string: stored verbatim; no unrelated row changed."""
    before = state_dump(env.svc)
    r = send(env, case)
    assert r.status_code in (200, 201), (r.status_code, r.text[:400])
    after = state_dump(env.svc)
    # The PATCH rewrites its own document's Units and their group rows, and nothing else.
    changed = {"units", "unit_groups", "postings"} if kind == "patch" else set()
    if env.svc.settings.database_url:
        changed |= MUTABLE_PG
    for table, rows in before["tables"].items():
        if table in MUTABLE | changed:
            continue
        kept = {json.dumps(x, default=str) for x in after["tables"].get(table, [])}
        lost = [x for x in rows if json.dumps(x, default=str) not in kept]
        assert not lost, (table, lost[:3])
    if kind == "object":
        key = r.json()["key"]
        got = stored_value(env.svc, "SELECT acl_groups FROM objects WHERE key = ?", (key,))
        assert as_list(got) == [value], got
    elif kind == "patch":
        rows = stored_rows(env.svc, "SELECT acl_groups FROM units WHERE doc_id = 'api-style'")
        assert rows and all(as_list(g[0]) == sorted({value, "eng-backend"}) for g in rows)
        assert len(after["tables"]["units"]) == len(before["tables"]["units"])  # none added
    else:
        name = case.json["name"]
        r = env.c.get("/v1/admin/principals/" + quote(name, safe=""), headers=ALICE)
        assert r.status_code == 200 and r.json()["name"] == name, r.text


@pytest.mark.parametrize("fieldname,payload", MATRIX)
def test_fts_and_sql_in_every_field(env, fieldname, payload):
    build, outcome = FIELDS[fieldname]
    value = PAYLOADS[payload]
    case = build(value)
    if outcome == "reject":
        check_rejected(env, case)
    elif outcome == "read":
        check_read(env, case, None, value)
    elif outcome.startswith("exact:"):
        check_read(env, case, outcome.split(":", 1)[1], value)
    elif outcome.startswith("stored:"):
        check_stored(env, case, outcome.split(":", 1)[1], value)
    else:
        check_written(
            env, case, outcome.split(":", 1)[1], value, MATRIX.index((fieldname, payload))
        )


def test_principal_with_the_most_scopes_can_read(env):
    """256 grants (the cap) still make valid SQL for every read; 12k once made every read a 500
    (SQLite's expression depth limit), now creating such a principal is a 422."""
    scopes = [f"acme/alpha/s{i}" for i in range(256)]
    r = env.c.post(
        "/v1/admin/principals", json={**ADMIN, "name": "many", "scopes": scopes}, headers=ALICE
    )
    assert r.status_code == 201, r.text
    many = auth(r.json()["key"])
    r = env.c.post(SEARCH + "?scope=acme/alpha", json={"q": "failover"}, headers=many)
    assert r.status_code == 200 and len(r.json()["context"]["effective_scopes"]) == 256
    assert env.c.get("/v1/docs?scope=acme/alpha", headers=many).status_code == 200
    r = env.c.get("/v1/units/0190f1a4-0000-7000-8000-000000000000", headers=many)
    assert r.status_code == 404


def test_state_dump_sees_every_kind_of_change(svc):
    """The dump is not blind: a write shows in the tables, the vector ids and the lexical ids;
    a stray temp file in the object store shows; and the FTS5 ids are read from the index
    itself (a row dropped from the index alone shows, though the units table is unchanged)."""
    before = state_dump(svc)
    alice = svc.authenticate("Bearer aegis_sk_alice")
    res = svc.ingest(alice, {"units": [{"text": "A dump canary about failover."}]})
    after = state_dump(svc)
    if svc.settings.database_url:  # one database: the vectors and postings are its rows
        for table in ("units", "audit_log"):
            assert len(after["tables"][table]) == len(before["tables"][table]) + 1, table
        assert after["tables"]["postings"] != before["tables"]["postings"]
        (svc.blobs.root / "tmp" / "partial").write_bytes(b"half an upload")
        assert state_dump(svc)["objects"] != after["objects"]
        (svc.blobs.root / "tmp" / "partial").unlink()
        assert diff(before, after)
        return
    assert before["vectors"]["text"] != after["vectors"]["text"]
    assert before["lexical"]["fts5"] != after["lexical"]["fts5"]
    assert len(after["tables"]["units"]) == len(before["tables"]["units"]) + 1
    assert len(after["tables"]["audit_log"]) == len(before["tables"]["audit_log"]) + 1
    (svc.blobs.root / "tmp" / "partial").write_bytes(b"half an upload")
    assert state_dump(svc)["objects"] != after["objects"]
    (svc.blobs.root / "tmp" / "partial").unlink()
    uid = res["results"][0]["unit_id"]
    with embedded(svc).catalog.write() as w:
        row = w.execute(
            "SELECT id, text, context, acl FROM units WHERE unit_id = ?", (uid,)
        ).fetchone()
        w.execute(
            "INSERT INTO units_fts(units_fts, rowid, text, context, acl)"
            " VALUES ('delete', ?, ?, ?, ?)",
            tuple(row),
        )
    drifted = state_dump(svc)
    assert drifted["tables"]["units"] == after["tables"]["units"]
    assert drifted["lexical"]["fts5"] == before["lexical"]["fts5"]
    assert diff(after, drifted)
