"""The Python client (sync and async) against a real uvicorn server over a real Service.

Status codes the server cannot be made to produce on demand (429, a non-JSON 5xx) and the
not-yet-shipped ``/v1/answer`` wire format are checked over ``httpx.MockTransport``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from conftest import embedded
from superchargedb.client import (
    Answer,
    AnswerEvent,
    APIError,
    AsyncClient,
    Client,
    Conflict,
    DocRecord,
    Forbidden,
    Hit,
    IngestResult,
    Locator,
    NotFound,
    Page,
    PayloadTooLarge,
    PaymentRequired,
    QuotaExceeded,
    RateLimited,
    SearchResult,
    Unauthorized,
    Unavailable,
    UnitRecord,
    UpgradeRequired,
    ValidationFailed,
    build_list_units,
    build_search,
)

ALICE, BOB, CAROL = "aegis_sk_alice", "aegis_sk_bob", "aegis_sk_carol"
RUNBOOK = (
    "Failover runbook: promote the standby replica when the primary database stops answering "
    "health checks, then repoint the connection pooler."
)
UNITS = [
    {
        "text": RUNBOOK,
        "doc_id": "runbook",
        "source_uri": "https://wiki.example/runbook",
        "locator": {"kind": "char_span", "start": 0, "end": len(RUNBOOK)},
    },
    {
        "text": "Quarterly forecast: backend renewals are expected to close early in Q4.",
        "doc_id": "forecast",
        "locator": {"kind": "line_range", "start": 3, "end": 4},
    },
]


def test_sync_round_trip_with_typed_results(live):
    with Client(live.url, api_key=ALICE) as c:
        assert c.health() == {"status": "ok"}
        assert c.ready() == {"status": "ready"}
        res = c.ingest(UNITS)
        assert isinstance(res, IngestResult) and res.ingested == 2 and res.failed == []
        assert [r.status for r in res.results] == ["created", "created"]
        assert res.results[0].unit_ids == (res.unit_ids[0],)
        unit = c.get_unit(res.unit_ids[0])
        assert isinstance(unit, UnitRecord)
        assert (unit.text, unit.doc_id, unit.scope) == (RUNBOOK, "runbook", "acme/alpha/backend")
        assert unit.acl_owner == "alice" and unit.acl_groups == ("eng-backend",)
        assert unit.locator == Locator(kind="char_span", start=0, end=len(RUNBOOK))
        assert unit.chunk == {"index": 0, "count": 1} and unit.raw["unit_id"] == unit.unit_id
        again = c.ingest(UNITS)  # idempotent: same content, nothing new
        assert again.ingested == 0 and {r.status for r in again.results} == {"unchanged"}

        found = c.search("promote the standby replica during failover", top_k=5)
        assert isinstance(found, SearchResult) and found.answer is None
        assert found.effective_scopes == ["acme/alpha/backend"]
        assert [s["stage"] for s in found.trace["stages"]][:2] == ["embed", "vectorize"]
        top = found.hits[0]
        assert isinstance(top, Hit) and top.unit_id == unit.unit_id and top.doc_id == "runbook"
        assert set(top.ranks) == {"dense", "lexical"} and top.ranks["dense"] == 1
        assert top.locator is not None and top.locator.kind == "char_span"
        assert top.source_uri == "https://wiki.example/runbook" and "<mark>" in top.snippet
        line = c.search("renewals forecast", mode="lexical", top_k=3).hits[0]
        assert line.doc_id == "forecast" and line.ranks["dense"] is None
        assert line.locator == Locator(kind="line_range", start=3, end=4)
        only = c.search("renewals", filters={"doc_id": "runbook"}, planes="text")
        assert {h.doc_id for h in only.hits} == {"runbook"}


def test_env_key_and_default_scope(live, monkeypatch):
    monkeypatch.setenv("SCDB_API_KEY", ALICE)
    with Client(live.url, scope="acme/alpha/frontend") as c:
        uid = c.ingest([{"text": "Frontend style guide: prefer CSS grid.", "doc_id": "ui"}])
        assert c.get_unit(uid.unit_ids[0]).scope == "acme/alpha/frontend"
        assert c.search("css grid").effective_scopes == ["acme/alpha/frontend"]
        assert c.search("css grid", scope="acme/alpha").effective_scopes == ["acme/alpha"]
        assert [d.doc_id for d in c.iter_docs()] == ["ui"]
        assert [d.doc_id for d in c.iter_docs(scope="acme/alpha/backend")] == []


def test_every_error_class_for_its_real_case(live, svc, monkeypatch):
    monkeypatch.delenv("SCDB_API_KEY", raising=False)
    with Client(live.url, api_key="aegis_sk_nobody") as c, pytest.raises(Unauthorized) as e:
        c.search("x")
    assert (e.value.status, e.value.code) == (401, "unauthorized") and e.value.request_id
    with Client(live.url) as anonymous, pytest.raises(Unauthorized):
        anonymous.list_docs()

    alice, bob = Client(live.url, api_key=ALICE), Client(live.url, api_key=BOB)
    carol = Client(live.url, api_key=CAROL)
    with alice, bob, carol:
        with pytest.raises(Forbidden) as f:
            bob.ingest(UNITS)
        assert (f.value.status, f.value.code) == (403, "forbidden")
        with pytest.raises(Forbidden) as f:
            alice.ingest(UNITS, scope="acme/beta")
        assert f.value.code == "forbidden_scope"
        with pytest.raises(Forbidden) as f:
            alice.create_principal("eve", perms=["read"], tier="enterprise", scopes=["acme/alpha"])
        assert f.value.code == "privilege_escalation"

        with pytest.raises(UpgradeRequired) as up:
            carol.search("pricing", planes=["audio"])
        assert isinstance(up.value, PaymentRequired) and up.value.status == 402
        assert up.value.required_tier == "pro" and up.value.extra["plane"] == "audio"

        made = alice.create_principal(
            "quota1", perms=["read", "write"], tier="free", scopes=["acme/alpha/q"], doc_quota=1
        )
        with Client(live.url, api_key=made["key"]) as q:
            with pytest.raises(QuotaExceeded) as qe:
                q.ingest([{"text": "one", "doc_id": "a"}, {"text": "two", "doc_id": "b"}])
            assert (qe.value.limit, qe.value.used, qe.value.requested) == (1, 0, 2)
            assert q.ingest([{"text": "one", "doc_id": "a"}]).ingested == 1
            with pytest.raises(QuotaExceeded) as qe:
                q.ingest([{"text": "two", "doc_id": "b"}])
            assert (qe.value.used, qe.value.requested) == (1, 1)

        with pytest.raises(NotFound) as nf:
            alice.get_unit("01900000-0000-7000-8000-000000000000")
        assert nf.value.message == "unit not found"
        for call in (lambda: alice.delete_doc("nope"), lambda: alice.get_principal("nobody")):
            with pytest.raises(NotFound):
                call()
        with pytest.raises(Conflict):
            alice.create_principal("bob", perms=["read"], tier="pro", scopes=["acme/alpha"])

        with pytest.raises(ValidationFailed) as v:
            alice.search("x", top_k=0)
        assert v.value.status == 422 and v.value.message.startswith("top_k")
        for bad in (
            lambda: alice.search("x", mode="fuzzy"),
            lambda: alice.list_docs(cursor="!!"),
            lambda: alice.ingest(UNITS, mode="merge"),
        ):
            with pytest.raises(ValidationFailed):
                bad()

        n = svc.settings.max_batch_units + 1
        with pytest.raises(PayloadTooLarge) as big:
            alice.ingest([{"text": f"unit {i}"} for i in range(n)])
        assert big.value.status == 413 and big.value.extra["limit"] == n - 1

        with monkeypatch.context() as m:
            if svc.settings.database_url:  # never loading on PostgreSQL: as if it were
                m.setattr(type(svc.parts.backend), "ready", property(lambda _: False))
            else:
                m.setattr(embedded(svc).sync, "ready", False)  # as in the replay at startup
            with pytest.raises(Unavailable) as un:
                alice.ready()
            assert un.value.status == 503
        assert alice.ready() == {"status": "ready"}


def _mock(status: int, body: bytes | str, headers: dict[str, str] | None = None) -> Client:
    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers=headers)

    return Client("http://scdb.test", api_key="k", transport=httpx.MockTransport(handler))


def test_status_mapping_without_an_api_body():
    """429 (the server does not rate-limit yet) and bodies from proxies, not the API."""
    err = json.dumps({"error": {"code": "rate_limited", "message": "slow down"}})
    headers = {"Retry-After": "7", "Content-Type": "application/json"}
    with _mock(429, err, headers) as c, pytest.raises(RateLimited) as rl:
        c.health()
    assert rl.value.retry_after == 7.0 and rl.value.message == "slow down"
    later = (datetime.now(UTC) + timedelta(seconds=120)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    with _mock(429, "", {"Retry-After": later}) as c, pytest.raises(RateLimited) as rl:
        c.health()
    assert rl.value.retry_after is not None and 100 < rl.value.retry_after <= 120
    # Admission control's 503 says when to come back too.
    err = json.dumps({"error": {"code": "overloaded", "message": "busy", "retry_after": 2}})
    with _mock(503, err, {"Retry-After": "2"}) as c, pytest.raises(Unavailable) as un:
        c.health()
    assert un.value.code == "overloaded" and un.value.retry_after == 2.0
    cases = [
        (503, "<html>upstream down</html>", Unavailable, "unavailable"),
        (401, "", Unauthorized, "unauthorized"),
        (402, "pay", PaymentRequired, "payment_required"),
        (502, "bad gateway", APIError, "error"),
    ]
    for status, body, cls, code in cases:
        with _mock(status, body) as c, pytest.raises(cls) as exc:
            c.metrics()
        assert type(exc.value) is cls and (exc.value.status, exc.value.code) == (status, code)
        assert exc.value.message


def test_cursor_iteration_over_docs_and_units(live):
    units = [
        {"text": f"Document {i} about caches and queues.", "doc_id": f"doc{i:02d}"}
        for i in range(7)
    ]
    units.append({"text": "A second unit of doc00.", "doc_id": "doc00"})
    with Client(live.url, api_key=ALICE) as c:
        assert c.ingest(units).ingested == 8
        page = c.list_docs(limit=3)
        assert isinstance(page, Page) and len(page) == 3 and page.next_cursor
        assert all(isinstance(d, DocRecord) for d in page)
        nxt = c.list_docs(limit=3, cursor=page.next_cursor)
        assert [d.doc_id for d in nxt] == ["doc03", "doc04", "doc05"]
        docs = list(c.iter_docs(limit=3))
        assert [d.doc_id for d in docs] == [f"doc{i:02d}" for i in range(7)]
        assert docs[0].units == 2 and docs[0].planes == ("text",)
        assert list(c.iter_docs(plane="audio")) == []
        assert len(list(c.iter_units(limit=2))) == 8
        pieces = list(c.iter_units("doc00", limit=1))
        assert len(pieces) == 2 and {u.doc_id for u in pieces} == {"doc00"}
        assert len(c.list_units(modality="text", limit=500)) == 8
        past, future = datetime(2000, 1, 1), datetime.now(UTC) + timedelta(hours=1)
        assert len(c.list_units(from_=past, to=future)) == 8
        assert (
            len(c.list_units(from_=future)) == 0 and len(c.list_docs(to="2001-01-01T00:00Z")) == 0
        )


def test_document_operations_and_usage(live):
    with Client(live.url, api_key=ALICE) as c:
        res = c.ingest(UNITS)
        acl = c.set_doc_acl("runbook", [])  # alice may remove groups, add only her own
        assert acl == {"doc_id": "runbook", "updated": 1, "acl_groups": []}
        assert c.get_unit(res.unit_ids[0]).acl_groups == ()
        put = c.replace_doc("runbook", [{"text": "Failover runbook v2: use the automation."}])
        assert put.ingested == 1
        (only,) = c.iter_units("runbook")
        assert only.text.startswith("Failover runbook v2") and only.unit_id == put.unit_ids[0]
        with pytest.raises(NotFound):
            c.get_unit(res.unit_ids[0])
        assert c.delete_unit(only.unit_id) == {"deleted": 1, "unit_ids": [only.unit_id]}
        gone = c.delete_doc("forecast")
        assert gone == {"deleted": 1, "unit_ids": [res.unit_ids[1]]}
        assert list(c.iter_docs()) == []
        use = c.usage()
        assert use["principal"] == "alice" and use["requests"]["POST /v1/ingest"] >= 1
        day = c.usage(from_=datetime.now(UTC) - timedelta(days=1), to=datetime.now(UTC))
        assert day["documents"]["used"] == 0  # deleting a document's Units frees its quota
        assert day["requests"]["DELETE /v1/docs/{doc_id:path}"] == 1


def test_admin_principal_and_key_flow(live):
    def works(key: str) -> bool:
        with Client(live.url, api_key=key) as who:
            try:
                who.list_docs()
                return True
            except Unauthorized:
                return False

    with Client(live.url, api_key=ALICE) as admin:
        made = admin.create_principal(
            "dave",
            perms=["read", "write"],
            tier="pro",
            scopes=["acme/alpha/dave"],
            groups=["eng-backend"],
        )
        assert made["principal"]["scopes"] == ["acme/alpha/dave"] and made["key"]
        with Client(live.url, api_key=made["key"]) as dave:
            unit = dave.get_unit(dave.ingest([{"text": "dave's notes"}]).unit_ids[0])
            assert unit.scope == "acme/alpha/dave" and unit.acl_owner == "dave"
        names = {p["name"] for p in admin.list_principals()}
        assert {"alice", "bob", "dave"} <= names and "carol" not in names  # carol is acme/beta
        assert admin.get_principal("dave")["groups"] == ["eng-backend"]
        assert admin.update_principal("dave", perms=["read"])["perms"] == ["read"]
        with Client(live.url, api_key=made["key"]) as dave, pytest.raises(Forbidden):
            dave.ingest([{"text": "more notes"}])

        expires = datetime.now(UTC) + timedelta(days=1)
        second = admin.create_key("dave", expires_at=expires)
        assert second["expires_at"] == int(expires.timestamp() * 1000) and works(second["key"])
        assert {k["key_id"] for k in admin.list_keys("dave")} == {made["key_id"], second["key_id"]}
        rotated = admin.rotate_key(second["key_id"])  # no overlap: the old key dies at once
        assert rotated["old_key_id"] == second["key_id"] and rotated["overlap_s"] == 0
        assert not works(second["key"]) and works(rotated["key"])
        overlapped = admin.rotate_key(rotated["key_id"], overlap_s=3600)
        assert works(rotated["key"]) and works(overlapped["key"])
        assert admin.revoke_key(overlapped["key_id"]) == {"revoked": overlapped["key_id"]}
        assert not works(overlapped["key"])
        with pytest.raises(ValidationFailed):
            admin.rotate_key(overlapped["key_id"])  # revoked keys cannot rotate
        with pytest.raises(NotFound):
            admin.revoke_key("k_missing")
        audit = admin.audit_verify()
        assert audit["ok"] is True and audit["records"] >= 6
    with Client(live.url, api_key=BOB) as bob, pytest.raises(Forbidden):
        bob.list_principals()


def test_async_client_round_trip(live):
    async def main() -> None:
        async with AsyncClient(live.url, api_key=ALICE) as c:
            assert await c.health() == {"status": "ok"}
            assert (await c.ready())["status"] == "ready"
            res = await c.ingest(UNITS)
            assert res.ingested == 2
            unit = await c.get_unit(res.unit_ids[0])
            assert unit.text == RUNBOOK and unit.locator is not None
            found = await c.search("promote the standby replica", top_k=3)
            assert found.hits[0].unit_id == unit.unit_id and found.hits[0].ranks["dense"] == 1
            assert [d.doc_id async for d in c.iter_docs(limit=1)] == ["forecast", "runbook"]
            assert len([u async for u in c.iter_units(limit=1)]) == 2
            assert len(await c.list_units("runbook")) == 1
            assert (await c.set_doc_acl("runbook", []))["updated"] == 1  # removing is free
            with pytest.raises(NotFound):
                await c.get_unit("01900000-0000-7000-8000-000000000000")
            with pytest.raises(ValidationFailed):
                await c.search("x", top_k=0)
            made = await c.create_principal(
                "erin", perms=["read"], tier="pro", scopes=["acme/alpha/erin"]
            )
            assert len(await c.list_keys("erin")) == 1
            new = await c.rotate_key(made["key_id"])
            assert (await c.revoke_key(new["key_id"]))["revoked"] == new["key_id"]
            assert (await c.stats())["units"]["total"] >= 1
            assert (await c.delete_doc("runbook"))["deleted"] == 1
        async with AsyncClient(live.url, api_key=BOB) as bob:
            with pytest.raises(Forbidden):
                await bob.ingest(UNITS)

    asyncio.run(main())


def test_metrics_text(live, svc, monkeypatch):
    monkeypatch.setattr(svc.settings, "metrics_token", "tok")
    with Client(live.url, api_key=ALICE) as c:
        c.health()
        text = c.metrics(token="tok")
        with pytest.raises(Unauthorized):
            c.metrics()  # the API key is not the metrics token
        assert c.stats()["scopes"] == ["acme/alpha"]
    assert "scdb_requests_total" in text and 'route="/healthz"' in text


def test_request_builders():
    r = build_search("q", {"scope": "acme/alpha", "planes": ("text",), "top_k": 3})
    assert (r.method, r.path, r.headers) == ("POST", "/v1/search", {"X-Aegis-Scope": "acme/alpha"})
    assert r.json == {"q": "q", "top_k": 3, "rerank": False, "mode": "hybrid", "planes": ["text"]}
    assert build_search("q", {"snippets": False}).json["snippets"] is False  # type: ignore[index]
    r = build_list_units("a/b", None, {"from_": datetime(2024, 5, 1, 12), "limit": 5})
    assert r.params == {"doc_id": "a/b", "limit": 5, "from": "2024-05-01T12:00:00Z"}
    typo: dict[str, Any] = {"topk": 3}
    with Client("http://scdb.test") as c, pytest.raises(TypeError, match="top"):
        c.search("x", **typo)  # mypy flags a literal typo statically; this is the runtime check


SSE = (
    b'event: sentence\ndata: {"index": 0, "text": "Promote the standby."}\n\n'
    b": keep-alive\n\n"
    b'event: citation\ndata: {"index": 1, "unit_id": "u1", "source_uri": "s",\n'
    b'data:  "locator": {"kind": "char_span", "start": 0, "end": 5}}\n\n'
    b'event: final\ndata: {"hits": [], "trace": {}, "context": {}, "answer": {"text": "Promote'
    b' the standby. [1]", "citations": [], "extractive": true, "refused": false}}\n\n'
)
ANSWER = {
    "hits": [],
    "trace": {"stages": []},
    "context": {"effective_scopes": ["acme/alpha"]},
    "answer": {
        "text": "Promote the standby replica [1].",
        "citations": [
            {
                "index": 1,
                "unit_id": "u1",
                "source_uri": "s",
                "locator": {"kind": "bbox", "box": [1, 2, 3, 4], "page": 2},
            }
        ],
        "nli_faithfulness": 0.93,
        "extractive": False,
        "sentences": [
            {
                "text": "Promote the standby replica [1].",
                "citations": [1],
                "supported": True,
                "answers_question": True,
            }
        ],
        "dropped": 0,
        "refused": False,
        "question": {"type": "other", "focus": ""},
    },
}


def _answer_transport(seen: list[httpx.Request], error: bool = False) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        if body.get("stream"):
            tail = b'event: error\ndata: {"code": "unavailable", "message": "llm down"}\n\n'
            content = SSE.replace(SSE[SSE.index(b"event: final") :], tail) if error else SSE
            return httpx.Response(
                200, content=content, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=ANSWER)

    return httpx.MockTransport(handler)


def test_answer_and_stream_wire_format_over_a_mock():
    seen: list[httpx.Request] = []
    with Client(
        "http://scdb.test", api_key="k", scope="acme/alpha", transport=_answer_transport(seen)
    ) as c:
        res = c.answer("how to fail over?", top_k=4)
        assert isinstance(res.answer, Answer) and res.answer.nli_faithfulness == 0.93
        cite = res.answer.citations[0]
        assert (cite.index, cite.unit_id) == (1, "u1") and cite.locator is not None
        assert cite.locator.box == (1, 2, 3, 4) and cite.locator.page == 2
        s0 = res.answer.sentences[0]
        assert s0.answers_question is True and s0.supported and s0.citations == (1,)
        assert res.answer.question is not None and res.answer.question.type == "other"
        assert res.answer.refusal_code is None and res.answer.unanswered_parts == ()
        events = list(c.answer_stream("how to fail over?"))
    assert [e.event for e in events] == ["sentence", "citation", "final"]
    assert events[1].data["locator"]["kind"] == "char_span"  # a data field split over two lines
    final = events[2].result
    assert final is not None and final.answer is not None and final.answer.extractive
    plain, streamed = (json.loads(r.content) for r in seen)
    assert plain["answer"] is True and "stream" not in plain and "scope" not in plain
    assert streamed["stream"] is True and seen[1].headers["accept"] == "text/event-stream"
    assert seen[1].headers["x-aegis-scope"] == "acme/alpha"

    failing = Client("http://scdb.test", transport=_answer_transport([], error=True))
    with failing, pytest.raises(Unavailable, match="llm down"):
        list(failing.answer_stream("q"))
    with Client("http://scdb.test", transport=_answer_transport([], error=True)) as c:
        events = list(c.answer_stream("q", raise_errors=False))
    assert events[-1] == AnswerEvent("error", {"code": "unavailable", "message": "llm down"})

    async def async_stream() -> list[AnswerEvent]:
        async with AsyncClient("http://scdb.test", transport=_answer_transport([])) as ac:
            assert (await ac.answer("q")).answer is not None
            return [e async for e in ac.answer_stream("q")]

    assert [e.event for e in asyncio.run(async_stream())] == ["sentence", "citation", "final"]


def test_answer_against_the_live_server(live):
    if "/v1/answer" not in httpx.get(live.url + "/openapi.json").json()["paths"]:
        pytest.skip("POST /v1/answer is not served yet (absent from /openapi.json)")
    with Client(live.url, api_key=ALICE) as c:
        c.ingest(UNITS)
        res = c.answer("How do I fail over the database?", top_k=5)
        assert res.hits and res.answer is not None
        assert all(cite.unit_id for cite in res.answer.citations)
        events = list(c.answer_stream("How do I fail over the database?", top_k=5))
    assert events and events[-1].event == "final"


def test_admin_lockout_refusals_map_to_their_classes(live):
    with Client(live.url, api_key=ALICE) as c:
        with pytest.raises(Forbidden) as forbidden:
            c.update_principal("alice", disabled=True)
        assert forbidden.value.code == "self_lockout"
        with pytest.raises(Conflict) as conflict:  # alice is acme's only admin
            c.update_principal("alice", perms=["read", "write"])
        assert conflict.value.code == "last_admin" and conflict.value.extra["tenants"] == ["acme"]
        with pytest.raises(Forbidden) as esc:
            c.update_principal("alice", tier="enterprise")
        assert esc.value.code == "privilege_escalation"
