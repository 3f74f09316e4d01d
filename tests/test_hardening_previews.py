"""Previews cannot starve other tenants and never skip authorization (issue 16, class 1).

One real server (uvicorn on a loopback port) for the module, with a large image ingested by
alice into a Unit that bob (read-only, in its ACL group) may read and dave (same tenant, not
in the group) may not. The renderer is wrapped from the test to count renders and how many run
at once; it still renders for real in its subprocess.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image, ImageDraw

from conftest import ALICE, BOB, CAROL, LiveServer, add_principal, auth, make_service
from superchargedb import preview as preview_mod
from superchargedb.demo import seed_principals
from superchargedb.errors import OverloadedError
from superchargedb.preview_cache import RenderCache
from superchargedb.preview_gate import RenderGate

FLOOD = 16  # concurrent previews from one key, as in the report


def big_png(side: int = 4000) -> bytes:
    """A large but compressible image: decoding and scaling it takes ~1 s of CPU."""
    img = Image.new("RGB", (side, side), (250, 250, 245))
    draw = ImageDraw.Draw(img)
    for y in range(0, side, 160):
        draw.line((0, y, side, y), fill=(30, 60, 200), width=4)
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


class Renders:
    """Counts real renders and the most that ran at once."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.lock = threading.Lock()
        self.count = 0
        self.running = 0
        self.max_running = 0
        self.started = threading.Event()

    def __call__(self, *args: Any, **kw: Any) -> bytes:
        with self.lock:
            self.count += 1
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        self.started.set()
        try:
            return bytes(self.real(*args, **kw))
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    svc = make_service(tmp_path_factory.mktemp("previews") / "data", embedder)
    seed_principals(svc)
    dave = auth(add_principal(svc, "dave", perms=["read"], scopes=["acme/alpha"]))
    try:
        with LiveServer(svc) as live, httpx.Client(base_url=live.url, timeout=120) as c:
            key = "acme/alpha/backend/site-plan.png"
            r = c.put(
                f"/v1/objects/{key}",
                headers={**ALICE, "Content-Type": "image/png"},
                content=big_png(),
            )
            assert r.status_code == 201, r.text
            unit = {"source_uri": key, "mime": "image/png", "acl_groups": ["eng-backend"]}
            res = c.post("/v1/ingest", headers=ALICE, json={"units": [unit]}).json()
            job_id = res["results"][0]["job_id"]
            deadline = time.monotonic() + 300
            while (job := c.get(f"/v1/jobs/{job_id}", headers=ALICE).json())["state"] not in (
                "done",
                "failed",
            ):
                assert time.monotonic() < deadline, job
                time.sleep(0.2)
            assert job["state"] == "done", job
            (unit_id,) = job["unit_ids"]
            yield {"live": live, "unit": unit_id, "dave": dave}
    finally:
        svc.close()


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Renders:
    r = Renders(preview_mod.render_preview)
    monkeypatch.setattr(preview_mod, "render_preview", r)
    return r


def test_a_preview_flood_from_one_key_leaves_other_tenants_alone(
    world: dict[str, Any], renders: Renders
) -> None:
    """16 concurrent previews of a large image from bob's read-only key: carol (another tenant)
    lists her documents all along, each at once and with 200, and bob's renders run one at a
    time (his share); his extra requests wait briefly or get 503 `overloaded`, never a 500.
    Before the fix every render ran at once, filled the shared request class, and carol's
    requests queued for 2 s and got 503."""
    url = world["live"].url
    attacker: list[httpx.Response] = []
    lock = threading.Lock()

    def flood() -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            r = c.get(f"/v1/units/{world['unit']}/preview", headers=BOB)
        with lock:
            attacker.append(r)

    threads = [threading.Thread(target=flood) for _ in range(FLOOD)]
    for t in threads:
        t.start()
    victim: list[tuple[int, float]] = []
    try:
        assert renders.started.wait(60), "no preview started rendering"
        with httpx.Client(base_url=url, timeout=30) as c:
            deadline = time.monotonic() + 120
            while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
                t0 = time.monotonic()
                r = c.get("/v1/docs", headers=CAROL)
                victim.append((r.status_code, time.monotonic() - t0))
    finally:
        for t in threads:
            t.join(120)
    assert victim, "the flood ended before carol could ask"
    assert [s for s, _ in victim] == [200] * len(victim), victim
    assert max(ms for _, ms in victim) < 1.5, victim  # did not wait for bob's renders
    codes = sorted(r.status_code for r in attacker)
    assert len(codes) == FLOOD and set(codes) <= {200, 503} and 200 in codes, codes
    for r in attacker:
        if r.status_code == 503:
            assert r.json()["error"]["code"] == "overloaded" and r.headers["Retry-After"]
    assert renders.max_running == 1  # SCDB_PREVIEW_RENDERS_PER_PRINCIPAL


def test_a_cached_rendering_is_served_only_after_authorization(
    world: dict[str, Any], renders: Renders
) -> None:
    """The rendering is cached (a repeat is served without rendering, byte-identical, to every
    principal who may read the Unit), but a principal who may not read it gets the same 404 as
    for a missing id, with the rendering in the cache, and the cache is not even asked."""
    url, uid = world["live"].url, world["unit"]
    with httpx.Client(base_url=url, timeout=120) as c:
        first = c.get(f"/v1/units/{uid}/preview", headers=BOB)
        assert first.status_code == 200 and first.content.startswith(b"\x89PNG")
        n = renders.count
        again = c.get(f"/v1/units/{uid}/preview", headers=BOB)
        owner = c.get(f"/v1/units/{uid}/preview", headers=ALICE)
        assert renders.count == n  # both from the cache
        assert again.content == first.content == owner.content
        for r in (first, again, owner):
            cc = r.headers["Cache-Control"]
            assert "private" in cc and "public" not in cc, cc
            assert "Authorization" in r.headers["Vary"]

        cache: RenderCache = world["live"].server.config.app.state.previews.cache
        asked = cache.hits + cache.misses
        missing = c.get("/v1/units/0190f0f0-0000-7000-8000-000000000000/preview", headers=BOB)
        assert missing.status_code == 404
        for who in (world["dave"], CAROL):  # same tenant outside the ACL; another tenant
            r = c.get(f"/v1/units/{uid}/preview", headers=who)
            assert (r.status_code, r.json()) == (404, missing.json())
            assert r.headers["Cache-Control"] == "no-store"
        assert cache.hits + cache.misses == asked  # denied before the cache was looked at
        assert renders.count == n


def test_the_rendering_cache_is_bounded_in_bytes() -> None:
    cache = RenderCache(1000)
    for i in range(10):
        cache.put(("sha", i), bytes(200))
        assert cache.nbytes <= 1000
    assert len(cache) == 5 and cache.get(("sha", 0)) is None and cache.get(("sha", 9))
    cache.put(("sha", "huge"), bytes(251))  # over a quarter of the bound: not kept
    assert cache.get(("sha", "huge")) is None
    off = RenderCache(0)
    off.put(("sha", 1), b"x")
    assert len(off) == 0


def test_a_freed_render_slot_goes_to_the_principal_with_fewest_renders() -> None:
    """Two slots; bob holds both and has two more waiting; carol asks last but renders next."""

    async def scenario() -> list[str]:
        gate = RenderGate(total=2, per_principal=2, queue=2, wait_s=30)
        release = asyncio.Event()
        order: list[str] = []  # who was handed a slot, in order
        start = gate._start

        def started(who: str) -> None:
            order.append(who)
            start(who)

        gate._start = started  # type: ignore[method-assign]

        def work(who: str) -> Any:
            return lambda: who

        async def hold(who: str) -> str:
            await gate._acquire(who)
            await release.wait()
            gate._release(who)
            return who

        holders = [asyncio.create_task(hold("bob")) for _ in range(2)]
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(gate.run("bob", work("bob"))) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(OverloadedError):  # bob's queue is full: refused at once
            await gate.run("bob", work("bob"))
        carol = asyncio.create_task(gate.run("carol", work("carol")))
        await asyncio.sleep(0)
        assert gate.inflight == 2 and order == ["bob", "bob"]
        release.set()
        await asyncio.gather(*holders, *waiting, carol)
        return order

    assert asyncio.run(scenario()) == ["bob", "bob", "carol", "bob", "bob"]


def test_a_waiting_render_gives_up_after_wait_s() -> None:
    async def scenario() -> None:
        gate = RenderGate(total=1, per_principal=1, queue=4, wait_s=0.05)
        await gate._acquire("bob")
        with pytest.raises(OverloadedError):
            await gate.run("carol", lambda: None)
        assert gate.inflight == 1 and not gate.waiting
        gate._release("bob")
        assert gate.inflight == 0 and not gate.running

    asyncio.run(scenario())
