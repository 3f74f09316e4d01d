"""The optional rerank stage against a small local HTTP rerank server (the network boundary).

The fake scores a passage by how often it contains the word the test chose, so the expected
order is known; what it received shows exactly which texts left the server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import ALICE, make_service

WORDS = ["alpha", "bravo", "charlie", "delta", "echo"]
SECRET = "zebra quartz ledger entry: the vault code is 7741"


class FakeRerank:
    def __init__(self) -> None:
        self.word = "echo"
        self.status = 200
        self.delay_s = 0.0
        self.malformed = False
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                time.sleep(outer.delay_s)
                texts = body.get("documents") or body.get("texts") or []
                scored = [
                    {"index": i, "score": float(t.lower().count(outer.word))}
                    for i, t in enumerate(texts)
                ]
                if outer.malformed:
                    scored = scored[:1]
                out: Any
                if "documents" in body:  # Cohere style
                    out = {
                        "results": [
                            {"index": d["index"], "relevance_score": d["score"]} for d in scored
                        ]
                    }
                else:  # TEI style
                    out = scored
                data = json.dumps(out).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/rerank"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def texts_seen(self) -> list[str]:
        return [
            t for r in self.requests for t in r["body"].get("documents", r["body"].get("texts", []))
        ]


@pytest.fixture
def fake() -> Iterator[FakeRerank]:
    f = FakeRerank()
    yield f
    f.httpd.shutdown()


def _svc(tmp_path, embedder, fake: FakeRerank | None, api: str = "cohere", **kw: Any):
    from superchargedb.demo import seed_principals

    extra = {"rerank_url": fake.url, "rerank_api": api, "rerank_timeout_s": 1.0} if fake else {}
    s = make_service(tmp_path / "d", embedder, **extra, **kw)
    seed_principals(s)
    alice = s.authenticate("Bearer aegis_sk_alice")
    # Five readable Units about deployments; the word that decides the fake's order differs.
    units = [
        {
            "text": f"Deployment note {w}: the deploy pipeline rolled out build {i} "
            + (w + " ") * i,
            "doc_id": f"d-{w}",
            "acl_groups": ["eng-backend"],
        }
        for i, w in enumerate(WORDS, 1)
    ]
    # Owner-only Unit of another principal in the same scope: alice must never send it out.
    units.append(
        {
            "text": "Deployment note: " + SECRET,
            "doc_id": "secret",
            "acl_owner": "dave",
            "acl_groups": [],
        }
    )
    res = s.ingest(alice, {"units": units})
    assert all(r["ok"] for r in res["results"]), res
    return s, alice


def _client(s):
    from fastapi.testclient import TestClient

    from superchargedb.api.app import create_app

    return TestClient(create_app(s), raise_server_exceptions=False)


def _search(c, **extra: Any) -> dict[str, Any]:
    r = c.post(
        "/v1/search",
        headers=ALICE,
        json={"q": "deployment pipeline build", "top_k": 5, "rerank": True, **extra},
    )
    assert r.status_code == 200, r.text
    return r.json()


def _stage(out: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in out["trace"]["stages"] if s["stage"] == "rerank")


@pytest.mark.parametrize("api", ["cohere", "tei"])
def test_rerank_reorders_by_the_endpoint_scores(tmp_path, embedder, fake, api):
    s, _ = _svc(tmp_path, embedder, fake, api=api)
    with _client(s) as c:
        for word in ("echo", "alpha"):
            fake.word = word
            out = _search(c, q=f"deployment pipeline build {word}")
            assert out["hits"][0]["doc_id"] == f"d-{word}"
            assert out["hits"][0]["ranks"]["rerank"] == 1
            assert [h["ranks"]["rerank"] for h in out["hits"]] == list(range(1, 6))
            scores = [h["score"] for h in out["hits"]]
            assert scores == sorted(scores, reverse=True)
            st = _stage(out)
            assert "skipped" not in st and st["detail"].startswith("http:")
        body = fake.requests[-1]["body"]
        assert ("documents" in body) == (api == "cohere")
        assert fake.requests[-1]["path"] == "/v1/rerank"
    s.close()


def test_rerank_never_sends_unreadable_text(tmp_path, embedder, fake):
    s, _ = _svc(tmp_path, embedder, fake)
    with _client(s) as c:
        _search(c, q="vault code ledger entry zebra quartz deployment note")
    assert fake.requests, "the reranker was not called"
    assert not any("zebra" in t or "7741" in t for t in fake.texts_seen())
    s.close()


@pytest.mark.parametrize("fault", ["status", "timeout", "malformed"])
def test_rerank_failure_keeps_the_fused_order_and_says_why(tmp_path, embedder, fake, fault):
    s, _ = _svc(tmp_path, embedder, fake)
    with _client(s) as c:
        base = c.post(
            "/v1/search", headers=ALICE, json={"q": "deployment pipeline build", "top_k": 5}
        ).json()
        if fault == "status":
            fake.status = 500
        elif fault == "timeout":
            fake.delay_s = 1.5
        else:
            fake.malformed = True
        out = _search(c)
    assert [h["unit_id"] for h in out["hits"]] == [h["unit_id"] for h in base["hits"]]
    assert all("rerank" not in h["ranks"] for h in out["hits"])
    reason = {"status": "HTTP 500", "timeout": "timeout", "malformed": "did not score"}[fault]
    assert reason in _stage(out)["skipped"]
    # A degraded result is not cached: once the endpoint recovers, the same query is reranked.
    fake.status, fake.delay_s, fake.malformed = 200, 0.0, False
    with _client(s) as c:
        again = _search(c)
    assert again["trace"].get("cache") != "hit"
    assert "skipped" not in _stage(again) and again["hits"][0]["ranks"]["rerank"] == 1
    s.close()


def test_rerank_without_a_reranker_is_traced_skipped(tmp_path, embedder):
    s, _ = _svc(tmp_path, embedder, None)
    with _client(s) as c:
        out = _search(c)
    assert _stage(out)["skipped"] == "no reranker configured"
    assert all("rerank" not in h["ranks"] for h in out["hits"])
    s.close()
