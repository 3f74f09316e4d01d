"""Issue 16, class 9: deployment-wide figures are the operator's; a tenant admin sees its own.

One real server for the module, two tenants with different data: ``acme`` and ``globex``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import LiveServer, add_principal, auth, make_service, stored_value
from superchargedb.service import Service

TOKEN = "metrics-token-for-tests-0123456789"


def one_page_pdf() -> bytes:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.drawString(72, 700, "The globex quarterly plan.")
    c.showPage()
    c.save()
    return buf.getvalue()


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Service]:
    # No job workers: queued jobs stay queued, so the figures are exact.
    s = make_service(
        tmp_path_factory.mktemp("hard-figures") / "data",
        embedder,
        metrics_token=TOKEN,
        job_workers=0,
    )
    rwa = ["read", "write", "admin"]
    add_principal(s, "aa", perms=rwa, tier="pro", scopes=["acme"])
    add_principal(s, "ar", perms=["read", "write"], tier="pro", scopes=["acme"])
    add_principal(s, "ga", perms=rwa, tier="pro", scopes=["globex"])
    add_principal(s, "sub", perms=rwa, tier="pro", scopes=["acme/beta"])
    yield s
    s.close()


@pytest.fixture(scope="module")
def srv(svc: Service) -> Iterator[httpx.Client]:
    with LiveServer(svc) as live, httpx.Client(base_url=live.url, timeout=60) as c:

        def ingest(who: str, scope: str, units: list[dict[str, Any]]) -> None:
            r = c.post(
                "/v1/ingest",
                headers={**auth(f"aegis_sk_test_{who}"), "X-Aegis-Scope": scope},
                json={"units": units, "mode": "append"},
            )
            assert r.status_code == 200 and all(x["ok"] for x in r.json()["results"]), r.text

        def put(who: str, key: str, body: bytes, ctype: str) -> None:
            r = c.put(
                f"/v1/objects/{key}",
                headers={**auth(f"aegis_sk_test_{who}"), "Content-Type": ctype},
                content=body,
            )
            assert r.status_code == 201, r.text

        # acme: 3 text Units in 2 documents (one in acme/beta), 1 object of 7 bytes.
        ingest("ar", "acme/alpha", [{"text": "alpha one", "doc_id": "a1"}])
        ingest("ar", "acme/alpha", [{"text": "alpha two", "doc_id": "a1"}])
        ingest("aa", "acme/beta", [{"text": "beta one", "doc_id": "b1"}])
        put("ar", "acme/alpha/notes.txt", b"7 bytes", "text/plain")
        # globex: 4 text Units in 4 documents, a PDF object and one queued PDF job.
        ingest("ga", "globex", [{"text": f"globex {i}", "doc_id": f"g{i}"} for i in range(4)])
        pdf = one_page_pdf()
        put("ga", "globex/plan.pdf", pdf, "application/pdf")
        ingest("ga", "globex", [{"source_uri": "globex/plan.pdf", "mime": "application/pdf"}])
        c.pdf_size = len(pdf)  # type: ignore[attr-defined]
        yield c


def stats(c: httpx.Client, who: str) -> dict[str, Any]:
    r = c.get("/v1/stats", headers=auth(f"aegis_sk_test_{who}"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_stats_count_only_the_callers_tenant(srv):
    acme = stats(srv, "aa")
    assert acme["scopes"] == ["acme"]
    assert acme["units"] == {
        "total": 3,
        "by_plane": {"text": 3, "visual": 0, "audio": 0, "doc_visual": 0},
    }
    assert acme["documents"] == 2
    assert acme["jobs"] == {"queued": 0, "running": 0, "done": 0, "failed": 0}
    assert acme["objects"] == {"count": 1, "bytes": 7}
    assert acme["outbox_lag"] == 0  # every acknowledged Unit is searchable
    globex = stats(srv, "ga")
    # The queued job's document is reserved when it is queued (quota), so it counts already.
    assert globex["units"]["total"] == 4 and globex["documents"] == 5
    assert globex["jobs"]["queued"] == 1
    assert globex["objects"] == {"count": 1, "bytes": srv.pdf_size}


def test_stats_of_a_sub_scope_admin_stay_within_its_grants(srv):
    sub = stats(srv, "sub")
    assert sub["scopes"] == ["acme/beta"]
    assert sub["units"]["total"] == 1 and sub["documents"] == 1
    assert sub["objects"] == {"count": 0, "bytes": 0}


def test_stats_are_for_admins_only(srv):
    r = srv.get("/v1/stats", headers=auth("aegis_sk_test_ar"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert srv.get("/v1/stats").status_code == 401


def test_metrics_need_the_token(srv, svc, monkeypatch):
    assert srv.get("/metrics").status_code == 401
    r = srv.get("/metrics", headers=auth("aegis_sk_test_aa"))  # an API key is not the token
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert srv.get("/metrics", headers=auth(TOKEN + "x")).status_code == 401
    r = srv.get("/metrics", headers=auth(TOKEN))
    assert r.status_code == 200 and 'scdb_index_vectors{plane="text"} 7' in r.text
    # No token configured: there is no /metrics at all.
    monkeypatch.setattr(svc.settings, "metrics_token", None)
    r = srv.get("/metrics", headers=auth(TOKEN))
    assert r.status_code == 404 and r.json()["error"]["code"] == "route_not_found"


def test_a_job_records_the_key_that_queued_it(srv, svc):
    # Run the queued PDF job here, in this thread (the module has no job workers).
    from superchargedb.auth.principals import hash_key
    from superchargedb.ingest.derive import MediaLimits
    from superchargedb.ingest.jobs_runner import JobRunner

    assert JobRunner(svc.ingestor, svc.writes.jobs, MediaLimits()).run_once()
    kid = stored_value(
        svc, "SELECT id FROM api_keys WHERE key_hash = ?", (hash_key("aegis_sk_test_ga"),)
    )
    rec = json.loads(stored_value(svc, "SELECT record FROM audit_log ORDER BY seq DESC LIMIT 1"))
    assert rec["action"] == "ingest.derived" and rec["actor"] == "ga"
    assert rec["actor_key_id"] == kid
    globex = stats(srv, "ga")
    assert globex["jobs"]["queued"] == 0 and globex["jobs"]["done"] == 1
    assert globex["units"]["by_plane"]["doc_visual"] >= 1
    assert stats(srv, "aa")["jobs"]["done"] == 0  # still nothing of globex in acme's figures
