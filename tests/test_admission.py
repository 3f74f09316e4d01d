"""Admission control: bounded slots and queue per class, 503 `overloaded` with Retry-After."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from conftest import ALICE, LiveServer, make_service
from superchargedb.admission import Admission, Share, classify
from superchargedb.errors import OverloadedError

ME = Share("acme", "p1")


def run(coro):
    return asyncio.run(coro)


def test_classes():
    assert classify("POST", "/v1/ingest") == "ingest"
    assert classify("PUT", "/v1/objects/a/b.pdf") == "ingest"
    assert classify("POST", "/v1/search") == "search"
    assert classify("POST", "/v1/answer") == "answer"
    assert classify("GET", "/v1/docs") == "other"
    assert classify("GET", "/nope") == "other"
    for probe in ("/healthz", "/readyz", "/metrics"):
        assert classify("GET", probe) is None


def test_slots_queue_and_refusal():
    async def scenario():
        adm = Admission(
            {"ingest": (1, 1), "search": (2, 1), "answer": (1, 0), "other": (0, 0)}, 0.2
        )
        t1 = await adm.acquire("search", ME)
        t2 = await adm.acquire("search", ME)
        waiter = asyncio.create_task(adm.acquire("search", ME))  # third: queued
        await asyncio.sleep(0.01)
        assert adm.snapshot()["search"]["queued"] == 1
        with pytest.raises(OverloadedError) as exc:  # fourth: the queue is full
            await adm.acquire("search", ME)
        assert exc.value.code == "overloaded" and exc.value.extra["retry_after"] == 1
        adm.release(t1)  # hands the slot to the waiter
        t3 = await waiter
        snap = adm.snapshot()["search"]
        assert snap == {"inflight": 2, "limit": 2, "queued": 0, "admitted": 3, "rejected": 1}
        # A waiter whose tenant holds slots and is not served within wait_s is refused, and
        # leaves the queue.
        with pytest.raises(OverloadedError):
            await adm.acquire("search", ME)
        assert adm.snapshot()["search"]["queued"] == 0
        adm.release(t2)
        adm.release(t3)
        assert adm.snapshot()["search"]["inflight"] == 0
        # Classes are independent; 0 slots means unlimited.
        await adm.acquire("answer", ME)
        with pytest.raises(OverloadedError):
            await adm.acquire("answer", ME)
        for _ in range(50):
            await adm.acquire("other", ME)
        assert adm.snapshot()["other"]["inflight"] == 50

    run(scenario())


def test_limit_adapts_to_latency_and_never_starves():
    async def scenario():
        adm = Admission(
            {n: (8, 8) for n in ("ingest", "search", "answer", "other")}, 0.2, {"search": 0.02}
        )
        st = adm.classes["search"]

        async def one(seconds: float) -> None:
            ticket = await adm.acquire("search", ME)
            await asyncio.sleep(seconds)
            adm.release(ticket)

        await asyncio.gather(*(one(0.04) for _ in range(8)))  # one slow generation, over target
        assert adm.snapshot()["search"]["limit"] == pytest.approx(7.2)  # cut once, not 8 times
        for _ in range(30):  # each later slow request ran under the cut limit: cut again
            await one(0.04)
        assert st.limit == 1.0  # one slot at least, never zero
        first = await adm.acquire("search", ME)
        with pytest.raises(OverloadedError):  # the one slot is taken: the queue times out
            await adm.acquire("search", ME)
        adm.release(first)
        for _ in range(60):  # fast requests raise it again, by 1/limit each
            await one(0)
        assert 8 >= st.limit > 8 * 0.9**3
        # A class without a target keeps its fixed limit.
        ticket = await adm.acquire("answer", ME)
        await asyncio.sleep(0.04)
        adm.release(ticket)
        assert adm.classes["answer"].limit == 8

    run(scenario())


def test_cancelled_waiter_gives_its_slot_back():
    async def scenario():
        adm = Admission({n: (1, 4) for n in ("ingest", "search", "answer", "other")}, 5.0)
        first = await adm.acquire("ingest", ME)
        w1 = asyncio.create_task(adm.acquire("ingest", ME))
        w2 = asyncio.create_task(adm.acquire("ingest", ME))
        await asyncio.sleep(0.01)
        w1.cancel()  # the client went away while queued
        await asyncio.sleep(0.01)
        adm.release(first)
        second = await asyncio.wait_for(w2, 1.0)  # the slot skips the cancelled waiter
        adm.release(second)
        assert adm.snapshot()["ingest"]["inflight"] == 0
        assert adm.snapshot()["ingest"]["queued"] == 0

    run(scenario())


def test_http_overload_is_503_with_retry_after(tmp_path, embedder):
    from superchargedb.demo import seed

    s = make_service(
        tmp_path / "d", embedder, inflight_search=1, queue_search=0, metrics_token="tok"
    )
    seed(s)
    try:
        with LiveServer(s) as srv:
            results: list[httpx.Response] = []
            lock = threading.Lock()
            gate = threading.Barrier(12)

            def one(i: int) -> None:
                with httpx.Client(timeout=30) as c:
                    gate.wait()
                    r = c.post(
                        srv.url + "/v1/search", headers=ALICE, json={"q": f"failover step {i}"}
                    )
                with lock:
                    results.append(r)

            threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            codes = sorted(r.status_code for r in results)
            assert set(codes) <= {200, 503} and 200 in codes and 503 in codes, codes
            for r in results:
                if r.status_code == 503:
                    assert r.json()["error"]["code"] == "overloaded"
                    assert int(r.headers["Retry-After"]) >= 1
                    assert r.headers["X-Request-Id"]  # the outer middlewares still ran
            # Probes are never refused, and the gauge reports the refusals.
            m = httpx.get(srv.url + "/metrics", headers={"Authorization": "Bearer tok"}).text
            assert 'scdb_admission{class="search",state="rejected"}' in m
            assert httpx.get(srv.url + "/healthz").status_code == 200
    finally:
        s.close()


def test_ingest_latency_is_judged_per_embedded_token():
    async def scenario():
        adm = Admission(
            {n: (4, 4) for n in ("ingest", "search", "answer", "other")},
            0.2,
            {"ingest": 0.02},
            {"ingest": 0.001},
        )

        async def one(seconds: float, tokens: int) -> None:
            ticket = await adm.acquire("ingest", ME)
            await asyncio.sleep(seconds)
            adm.release(ticket, tokens)

        await one(0.05, 100)  # 50 ms for 100 tokens: within 20 ms + 100 x 1 ms
        assert adm.classes["ingest"].limit == 4
        await one(0.05, 10)  # the same time for 10 tokens is slow
        assert adm.classes["ingest"].limit == pytest.approx(3.6)

    run(scenario())


def test_the_next_slot_goes_to_the_tenant_with_the_fewest_in_flight():
    async def scenario():
        adm = Admission({n: (2, 8) for n in ("ingest", "search", "answer", "other")}, 5.0)
        flood = Share("evil", "mallory")
        held = [await adm.acquire("search", flood), await adm.acquire("search", flood)]
        queued = [asyncio.create_task(adm.acquire("search", flood)) for _ in range(3)]
        await asyncio.sleep(0)
        victim = asyncio.create_task(adm.acquire("search", ME))  # arrives last
        await asyncio.sleep(0)
        adm.release(held.pop())
        mine = await asyncio.wait_for(victim, 1.0)  # served before the earlier flood waiters
        assert not any(t.done() for t in queued)
        # A full queue makes room for a lighter share by refusing the heaviest's newest.
        more = [asyncio.create_task(adm.acquire("search", flood)) for _ in range(5)]
        await asyncio.sleep(0)
        other = asyncio.create_task(adm.acquire("search", Share("globex", "g1")))
        await asyncio.wait([more[-1]], timeout=1.0)
        assert more[-1].done() and isinstance(more[-1].exception(), OverloadedError)
        adm.release(mine)
        assert (await asyncio.wait_for(other, 1.0)).share.tenant == "globex"
        for t in queued + more[:-1]:
            t.cancel()
        await asyncio.gather(*queued, *more, return_exceptions=True)

    run(scenario())
