"""Admission starvation (issue: hardening, class 1), on a real server with raw sockets.

One server for the module, with small slot counts and short client deadlines. ``mallory`` (tenant
``evil``, a valid read/write key) attacks; ``alice`` (tenant ``acme``) is the victim. Before the
fix a slot was taken before the body was read and held until the response was sent, so stalled
bodies and stalled readers held every slot, and the victim got 503.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench import flood
from conftest import ALICE, LiveServer, add_principal, auth, make_service

SETTINGS: dict[str, Any] = {
    "metrics_token": "tok",  # the tests read the admission gauges
    "inflight_search": 2,
    "inflight_answer": 1,
    "inflight_ingest": 1,
    "inflight_other": 2,
    "queue_search": 8,
    "queue_answer": 8,
    "queue_ingest": 8,
    "queue_other": 8,
    "queue_wait_s": 1.0,
    "body_timeout_s": 1.0,
    "body_min_bytes_per_s": 1000.0,
    "header_timeout_s": 1.0,
    "write_timeout_s": 1.0,
}
BIG = 16 * 1024 * 1024  # larger than every socket buffer between the server and a reader


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    from superchargedb.demo import seed

    svc = make_service(tmp_path_factory.mktemp("adm") / "data", embedder, **SETTINGS)
    seed(svc)
    key = add_principal(
        svc, "mallory", perms=["read", "write"], scopes=["evil"], active="evil", tier="pro"
    )
    try:
        with LiveServer(svc) as srv:
            r = httpx.put(
                srv.url + "/v1/objects/evil/big.bin", headers=auth(key), content=b"x" * BIG
            )
            assert r.status_code == 201, r.text
            # The document the "other" flood PATCHes.
            r = httpx.post(
                srv.url + "/v1/ingest",
                headers=auth(key),
                json={"units": [{"doc_id": "flood-0", "text": "flood note"}]},
            )
            assert r.status_code == 200, r.text
            yield {"svc": svc, "srv": srv, "key": key}
    finally:
        svc.close()


def gauge(url: str) -> dict[tuple[str, str], float]:
    text = httpx.get(url + "/metrics", headers={"Authorization": "Bearer tok"}).text
    pat = r'scdb_admission\{class="(\w+)",state="(\w+)"\} ([0-9.e+-]+)'
    return {(c, s): float(v) for c, s, v in re.findall(pat, text)}


def wait_until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def victim_round(url: str) -> list[tuple[str, int]]:
    """The victim tenant searches, answers, ingests and lists documents once each."""
    with httpx.Client(base_url=url, headers=ALICE, timeout=30) as c:
        return [
            ("search", c.post("/v1/search", json={"q": "failover"}).status_code),
            ("answer", c.post("/v1/answer", json={"q": "how does failover work?"}).status_code),
            (
                "ingest",
                c.post(
                    "/v1/ingest", json={"units": [{"doc_id": "victim-note", "text": "victim note"}]}
                ).status_code,
            ),
            ("other", c.get("/v1/docs").status_code),
        ]


def stall(port: int, key: str, method: str, path: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(flood.head(method, path, key, 1000) + b"{")
    return s


def test_stalled_bodies_do_not_starve_another_tenant(world):
    srv, key = world["srv"], world["key"]
    # Every class, and streamed object uploads (ingest class) too.
    targets = flood.standard_targets("evil")
    targets.append(flood.Target("ingest", "PUT", "/v1/objects/evil/slow.bin"))
    socks = [stall(srv.port, key, t.method, t.path) for t in targets for _ in range(8)]
    try:
        # Every stalled request is in the server: reading its body (or, before the fix,
        # holding a slot or queued behind the ones that do).
        def seen() -> bool:
            g = gauge(srv.url)
            return all(
                g.get((c, "reading"), 0) + g[(c, "inflight")] + g[(c, "queued")]
                >= min(
                    8 * sum(t.cls == c for t in targets),
                    SETTINGS[f"inflight_{c}"] + SETTINGS[f"queue_{c}"],  # the old ceiling
                )
                for c in ("search", "answer", "ingest", "other")
            )

        wait_until(seen)
        started = time.monotonic()
        assert victim_round(srv.url) == [
            ("search", 200),
            ("answer", 200),
            ("ingest", 200),
            ("other", 200),
        ]
        # The stalled bodies are cut off after body_timeout_s with a 408 and a closed connection.
        for s in socks:
            s.settimeout(10)
            raw = b""
            while chunk := s.recv(4096):  # to the end: the server closes the connection
                raw += chunk
            assert raw.startswith(b"HTTP/1.1 408"), raw[:200]
            assert b'"code":"request_timeout"' in raw and b"connection: close" in raw.lower()
        assert time.monotonic() - started < 8
    finally:
        for s in socks:
            s.close()


def test_a_slow_but_steady_body_is_accepted(world):
    """The minimum rate, not a fixed deadline: a body sent at twice the minimum rate for longer
    than body_timeout_s still arrives (and the request holds no slot while it does)."""
    srv = world["srv"]
    body = b'{"q": "failover' + b" " * 3000 + b'"}'
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(flood.head("POST", "/v1/search", "aegis_sk_alice", len(body)))
        step = 200
        for i in range(0, len(body), step):  # 2,000 bytes/s for ~1.5 s
            s.sendall(body[i : i + step])
            time.sleep(step / 2000)
        raw = s.recv(65536)
        assert raw.startswith(b"HTTP/1.1 200"), raw[:300]
    finally:
        s.close()


def test_stalled_readers_hold_no_slot_and_are_cut_off(world):
    srv, key = world["srv"], world["key"]
    readers = flood.StalledReader(srv.port, key, "/v1/objects/evil/big.bin", 8)
    try:
        assert "200" in readers.statuses, readers.statuses  # responses are being sent
        assert gauge(srv.url)[("other", "inflight")] == 0
        assert victim_round(srv.url)[-1] == ("other", 200)
        for _ in range(3):
            with httpx.Client(base_url=srv.url, headers=ALICE, timeout=30) as c:
                assert c.get("/v1/docs").status_code == 200
        # Nobody reads: after write_timeout_s the server aborts the connections.
        conns = srv.server.server_state.connections
        wait_until(lambda: len(conns) == 0, timeout=15)
        assert all(n < BIG for n in readers.drain())
    finally:
        readers.close()


def test_one_tenant_flooding_every_class_does_not_503_another(world):
    """64 connections per class from one key (half stalled, half back-to-back) while another
    tenant searches, answers, ingests and lists: the victim is never refused."""
    srv, key = world["srv"], world["key"]
    statuses: list[tuple[str, int]] = []
    with flood.Flood(srv.port, key, flood.standard_targets("evil")) as f:
        wait_until(
            lambda: sum(n for (_, k, _), n in f.snapshot().items() if k == "back_to_back") > 20
        )
        statuses += victim_round(srv.url)
        counts = f.snapshot()
    assert statuses and all(code == 200 for _, code in statuses), statuses
    # The flood was real: its back-to-back requests ran, and some were refused.
    served = {c for (c, kind, code), n in counts.items() if kind == "back_to_back" and code == 200}
    assert served == {"search", "answer", "ingest", "other"}, counts


LONG_SETTINGS: dict[str, Any] = {
    "metrics_token": "tok",
    "inflight_ingest": 2,
    "queue_ingest": 8,
    "queue_wait_s": 1.0,
    "latency_target_ingest_s": 0.5,
    "chunk_tokens": 32,
    "chunk_overlap_tokens": 0,
    "ingest_max_chunks": 8,
}


def long_text(seed: int) -> str:
    words = [f"w{seed}x{i} replication failover quorum" for i in range(160)]
    return ". ".join(" ".join(words[i : i + 6]) for i in range(0, 160, 6))


def test_long_units_do_not_collapse_the_ingest_limit_for_others(tmp_path, embedder):
    """One writer's long Units are embedded by jobs (status queued) and judged per token, so
    another tenant's small ingests keep their slots: no 503, and the limit stays up."""
    import threading

    from superchargedb.demo import seed_principals

    svc = make_service(tmp_path / "d", embedder, **LONG_SETTINGS)
    seed_principals(svc)
    key = add_principal(svc, "writer", perms=["read", "write"], scopes=["evil"], active="evil")
    try:
        with LiveServer(svc) as srv:
            stop = threading.Event()
            writer_results: list[dict[str, Any]] = []

            def writer(n: int) -> None:
                with httpx.Client(base_url=srv.url, headers=auth(key), timeout=60) as c:
                    i = 0
                    while not stop.is_set():
                        i += 1
                        units = [
                            {
                                "doc_id": f"long-{n}-{i}-{j}",
                                "text": long_text(n * 1000 + i * 10 + j),
                            }
                            for j in range(2)
                        ]
                        r = c.post("/v1/ingest", json={"units": units})
                        if r.status_code == 200:
                            writer_results.extend(r.json()["results"])

            threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
            for t in threads:
                t.start()
            codes = []
            try:
                wait_until(lambda: len(writer_results) >= 2, timeout=30)
                with httpx.Client(base_url=srv.url, headers=ALICE, timeout=60) as c:
                    for i in range(5):
                        r = c.post(
                            "/v1/ingest",
                            json={"units": [{"doc_id": f"small-{i}", "text": f"small note {i}"}]},
                        )
                        codes.append(r.status_code)
            finally:
                stop.set()
                for t in threads:
                    t.join()
            assert codes == [200] * 5, codes
            assert gauge(srv.url)[("ingest", "limit")] >= 2 * 0.9
            # The long Units were queued as jobs, which store them.
            assert writer_results and all(r["status"] == "queued" for r in writer_results)
            job = writer_results[0]["job_id"]
            with httpx.Client(base_url=srv.url, headers=auth(key), timeout=30) as c:
                wait_until(lambda: c.get(f"/v1/jobs/{job}").json()["state"] == "done", 120)
                docs = c.get("/v1/docs").json()
            assert any(d["doc_id"].startswith("long-") for d in docs["docs"]), docs
    finally:
        svc.close()


def test_the_chunk_budget_puts_off_whole_documents_largest_first():
    from superchargedb.ingest.deferred import split
    from superchargedb.ingest.prepare import Prepared

    def unit(i: int, doc: str, chunks: int) -> Prepared:
        p = Prepared(
            i, "acme", doc, "text", "text", "", None, None, "alice", [], f"h{i}", "t", None
        )
        p.chunks = [("t", None)] * chunks
        return p

    units = [
        unit(0, "a", 3),
        unit(1, "big", 6),
        unit(2, "b", 2),
        unit(3, "big", 1),
        unit(4, "c", 0),
    ]
    now, later = split(units, 6)
    # "big" (7 chunks in two Units) goes whole; the rest (5) fits and keeps its order.
    assert [p.index for p in now] == [0, 2, 4] and [[p.index for p in d] for d in later] == [[1, 3]]
    assert split(units, 12) == (units, [])
