"""The object store over HTTP: scoped keys, immutability, Range, headers, authorization."""

from __future__ import annotations

import hashlib
import socket

import pytest

from conftest import ALICE, BOB, CAROL, add_principal, auth, stored_value

KEY = "acme/alpha/backend/runbooks/notes.txt"
BODY = b"0123456789" * 100


def put(client, key, body, headers=ALICE, **kw):
    return client.put(
        f"/v1/objects/{key}", headers={**headers, **kw.pop("h", {})}, content=body, **kw
    )


def test_put_and_get_with_etag_and_headers(client):
    r = put(client, KEY, BODY, h={"Content-Type": "text/plain"})
    assert r.status_code == 201, r.text
    sha = hashlib.sha256(BODY).hexdigest()
    assert r.json()["sha256"] == sha and r.json()["size"] == len(BODY)
    g = client.get(f"/v1/objects/{KEY}", headers=ALICE)
    assert g.status_code == 200 and g.content == BODY
    assert g.headers["etag"] == f'"{sha}"'
    assert g.headers["x-content-type-options"] == "nosniff"
    assert g.headers["content-security-policy"].startswith("sandbox")
    assert g.headers["accept-ranges"] == "bytes"
    assert (
        client.get(f"/v1/objects/{KEY}", headers={**ALICE, "If-None-Match": f'"{sha}"'}).status_code
        == 304
    )


def test_ranges(client):
    put(client, KEY, BODY)
    r = client.get(f"/v1/objects/{KEY}", headers={**ALICE, "Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == BODY[10:20]
    assert r.headers["content-range"] == f"bytes 10-19/{len(BODY)}"
    r = client.get(f"/v1/objects/{KEY}", headers={**ALICE, "Range": "bytes=-5"})
    assert r.status_code == 206 and r.content == BODY[-5:]
    r = client.get(f"/v1/objects/{KEY}", headers={**ALICE, "Range": "bytes=990-"})
    assert r.status_code == 206 and r.content == BODY[990:]
    r = client.get(f"/v1/objects/{KEY}", headers={**ALICE, "Range": "bytes=5000-6000"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{len(BODY)}"
    # Authorization is checked on every range request, too.
    r = client.get(f"/v1/objects/{KEY}", headers={**CAROL, "Range": "bytes=0-9"})
    assert r.status_code == 404 and BODY[:10] not in r.content


def test_object_acl(client, svc):
    put(client, KEY, BODY)  # groups default to alice's: eng-backend
    assert client.get(f"/v1/objects/{KEY}", headers=BOB).status_code == 200
    assert client.get(f"/v1/objects/{KEY}", headers=CAROL).status_code == 404
    other = auth(
        add_principal(svc, "dave", perms=["read"], scopes=["acme/alpha"], groups=["sales"])
    )
    assert client.get(f"/v1/objects/{KEY}", headers=other).status_code == 404
    key2 = "acme/alpha/backend/private.txt"
    put(client, key2, b"secret", params={"acl_groups": ""})
    assert client.get(f"/v1/objects/{key2}", headers=BOB).status_code == 404
    assert client.get(f"/v1/objects/{key2}", headers=ALICE).status_code == 200


def test_put_rules(client):
    assert put(client, KEY, BODY, headers=BOB).status_code == 403
    r = put(client, "acme/beta/x.txt", BODY)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_scope"
    assert put(client, KEY, BODY).status_code == 201
    r = put(client, KEY, b"changed")
    assert r.status_code == 409
    sha = hashlib.sha256(BODY).hexdigest()
    r = put(client, KEY, b"changed", h={"If-Match": f'"{sha}"'})
    assert r.status_code == 201
    assert client.get(f"/v1/objects/{KEY}", headers=ALICE).content == b"changed"


def raw_put(port: int, path: str) -> int:
    """Send the request line byte for byte: HTTP clients normalize '..' and '.' away."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"PUT " + path.encode("latin-1") + b" HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer aegis_sk_alice\r\nContent-Length: 1\r\n\r\nx"
        )
        status = sock.recv(4096).split(b" ", 2)[1]
    return int(status)


@pytest.mark.parametrize(
    "key",
    [
        "acme/alpha/backend/../beta/x",
        "acme/alpha/backend/./x",
        "acme/alpha/backend//x",
        "acme/alpha/backend/%2e%2e/x",
        "acme/alpha/backend/%2E%2E%2Fx",
        "acme/alpha/backend/a%00b",
        "acme/alpha/backend/a%5Cb",
        "acme/alpha/backend/%E2%80%A4%E2%80%A4/x",
        "acme/alpha/backend/..",
        "/etc/passwd",
        "acme/alpha/backend/%252e%252e/x",
    ],
)
def test_key_escapes_rejected(live, svc, key):
    status = raw_put(live.port, "/v1/objects/" + key)
    assert status in (403, 404, 422), status
    n = stored_value(svc, "SELECT COUNT(*) FROM objects")
    assert n == 0
    # Whatever the key, blob paths come from the sha256 alone.
    blobs = [p for p in (svc.settings.data_dir / "objects").rglob("*") if p.is_file()]
    assert all(len(p.name) == 64 for p in blobs)


def test_html_is_downloaded_not_rendered(client):
    key = "acme/alpha/backend/evil.html"
    put(client, key, b"<script>alert(1)</script>", h={"Content-Type": "text/html"})
    r = client.get(f"/v1/objects/{key}", headers=ALICE)
    assert r.headers["content-disposition"].startswith("attachment")
    assert r.headers["content-security-policy"].startswith("sandbox")


def test_object_size_limit(client, svc):
    svc.settings.max_object_bytes = 1000
    r = put(client, "acme/alpha/backend/big.bin", b"x" * 1001)
    assert r.status_code == 413
    n = stored_value(svc, "SELECT COUNT(*) FROM objects")
    assert n == 0


def test_text_object_ingested_as_text_units(client):
    text = "# Title\n\nA paragraph about the deploy freeze and ERR_4242.\n"
    put(client, "acme/alpha/backend/notes.md", text.encode(), h={"Content-Type": "text/markdown"})
    r = client.post(
        "/v1/ingest",
        headers=ALICE,
        json={"units": [{"source_uri": "acme/alpha/backend/notes.md", "mime": "text/markdown"}]},
    )
    assert r.status_code == 200, r.text
    res = r.json()["results"][0]
    assert res["ok"] and res["status"] == "created"
    unit = client.get(f"/v1/units/{res['unit_id']}", headers=ALICE).json()
    assert unit["text"] == text and unit["modality"] == "markdown"
    hits = client.post("/v1/search", headers=ALICE, json={"q": "ERR_4242"}).json()["hits"]
    assert hits[0]["unit_id"] == res["unit_id"]


def test_bad_media_fail_per_unit(client):
    put(client, "acme/alpha/backend/empty.wav", b"", h={"Content-Type": "audio/wav"})
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 100
    put(client, "acme/alpha/backend/fake.mp4", png, h={"Content-Type": "video/mp4"})
    wav = b"RIFF" + (100000).to_bytes(4, "little") + b"WAVEfmt " + b"\0" * 40
    put(client, "acme/alpha/backend/trunc.wav", wav, h={"Content-Type": "audio/wav"})
    put(
        client,
        "acme/alpha/backend/bad.pdf",
        b"%PDF-1.4\n garbage",
        h={"Content-Type": "application/pdf"},
    )
    units = [
        {"source_uri": "acme/alpha/backend/empty.wav", "mime": "audio/wav"},
        {"source_uri": "acme/alpha/backend/fake.mp4", "mime": "video/mp4"},
        {"source_uri": "acme/alpha/backend/trunc.wav", "mime": "audio/wav"},
        {"source_uri": "acme/alpha/backend/bad.pdf", "mime": "application/pdf"},
        {"source_uri": "acme/alpha/backend/missing.pdf", "mime": "application/pdf"},
        {"text": "this one is fine", "doc_id": "fine"},
    ]
    r = client.post("/v1/ingest", headers=ALICE, json={"units": units})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["ok"] for x in res] == [False] * 5 + [True]
    msgs = [x["error"]["message"] for x in res[:5]]
    assert "empty" in msgs[0]
    assert "image/png" in msgs[1]
    assert "truncated" in msgs[2]
    assert "PDF" in msgs[3]
    assert res[4]["error"]["code"] == "not_found"


def test_free_tier_gate_uses_sniffed_content(client):
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 100
    client.put(
        "/v1/objects/acme/beta/pic.png", headers={**CAROL, "Content-Type": "image/png"}, content=png
    )
    r = client.post(
        "/v1/ingest",
        headers=CAROL,
        json={"units": [{"source_uri": "acme/beta/pic.png", "mime": "image/png"}]},
    )
    assert r.status_code == 402 and r.json()["error"]["required_tier"] == "pro"
