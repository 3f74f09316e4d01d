"""The outermost middleware (api/observe.py, D-284): every answer, refusals included, carries the
request id and the security headers and is counted; a bad X-Read-After is a 422 that runs
nothing; a streamed answer gets its headers at its start."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from conftest import ALICE, auth, make_service
from superchargedb.api.app import create_app
from superchargedb.api.observe import SECURITY_HEADERS

SECURE = {k.lower(): v for k, v in SECURITY_HEADERS.items()}


def secured(headers) -> bool:
    got = {k: headers.get(k) for k in SECURE}
    return got == SECURE and len(headers.get("x-request-id", "")) == 16


@pytest.fixture
def app_client(tmp_path, embedder):
    from superchargedb.demo import seed_principals

    svc = make_service(
        tmp_path / "d", embedder, rate_key_rps=1.0, rate_key_burst=1, metrics_token="t0ken"
    )
    seed_principals(svc)
    with TestClient(create_app(svc), raise_server_exceptions=False) as c:
        yield c
    svc.close()


def test_every_kind_of_answer_is_observed(app_client) -> None:
    c = app_client
    answers = {
        "ok": c.post("/v1/search", headers=ALICE, json={"q": "x"}),
        "refused by admission": c.post("/v1/search", headers=ALICE, json={"q": "x"}),
        "bad key": c.get("/v1/docs", headers=auth("aegis_sk_nobody")),
        "no route": c.get("/v1/nowhere", headers=auth("aegis_sk_bob")),
        "probe": c.get("/healthz"),
    }
    assert [r.status_code for r in answers.values()] == [200, 429, 401, 404, 200]
    assert all(secured(r.headers) for r in answers.values()), {
        k: dict(r.headers) for k, r in answers.items() if not secured(r.headers)
    }
    ids = {r.headers["x-request-id"] for r in answers.values()}
    assert len(ids) == len(answers)  # one id per request
    text = c.get("/metrics", headers={"Authorization": "Bearer t0ken"}).text
    assert 'scdb_requests_total{route="/v1/search",status="200"} 1' in text
    assert 'scdb_requests_total{route="unmatched",status="429"} 1' in text  # refused pre-route
    assert 'scdb_requests_total{route="/healthz",status="200"} 1' in text


def test_a_bad_read_after_is_a_422_that_runs_nothing(app_client) -> None:
    c = app_client
    r = c.post("/v1/search", headers={**ALICE, "X-Read-After": "not/a/position"}, json={"q": "x"})
    assert r.status_code == 422 and secured(r.headers)
    err = r.json()["error"]
    assert err["code"] == "validation_error" and "commit position" in err["message"], err
    # It spent nothing of the key's bucket (burst 1): the next search is answered.
    assert c.post("/v1/search", headers=ALICE, json={"q": "x"}).status_code == 200


def test_a_streamed_answer_carries_the_headers_at_its_start(app_client) -> None:
    with app_client.stream(
        "POST", "/v1/answer", headers=ALICE, json={"q": "failover", "stream": True}
    ) as r:
        assert r.status_code == 200 and secured(r.headers)
        assert r.headers["content-type"].startswith("text/event-stream")
        assert b"".join(r.iter_bytes())
