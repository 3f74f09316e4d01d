"""The micro-batching embedding executor (D-42) over the real default model."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.common import evaldir
from superchargedb.errors import OverloadedError, UnavailableError
from superchargedb.models.embedder import Embedder
from superchargedb.models.executor import EmbedExecutor

NO_SCIFACT = evaldir.skip_reason("scifact")


def _scifact() -> Path:
    if NO_SCIFACT:
        pytest.skip(NO_SCIFACT)
    return evaldir.dataset("scifact")


def _lines(name: str, n: int) -> list[str]:
    out = []
    with open(_scifact() / name) as f:
        for line in f:
            d = json.loads(line)
            out.append((d.get("title", "") + "\n" + d["text"]).strip())
            if len(out) == n:
                break
    return out


@pytest.fixture(scope="module")
def queries() -> list[str]:
    return _lines("queries.jsonl", 24)


@pytest.fixture(scope="module")
def abstracts() -> list[str]:
    return _lines("corpus.jsonl", 40)


def _threads(fn: Any, args: list[Any]) -> tuple[list[Any], list[BaseException | None]]:
    res: list[Any] = [None] * len(args)
    err: list[BaseException | None] = [None] * len(args)
    start = threading.Barrier(len(args))

    def run(i: int) -> None:
        start.wait()
        try:
            res[i] = fn(args[i])
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            err[i] = e

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(args))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return res, err


def test_concurrent_queries_are_batched_and_equal_direct(
    embedder: Embedder, queries: list[str]
) -> None:
    ex = EmbedExecutor(embedder, cache_size=0)
    try:
        got, err = _threads(ex.embed_query, queries[:16])
        assert err == [None] * 16
        direct = np.stack([embedder.embed([q])[0] for q in queries[:16]])
        np.testing.assert_allclose(np.stack(got), direct, atol=1e-5)
        # 16 concurrent callers, far fewer model runs: the worker gathered them.
        assert ex.batches < 16
    finally:
        ex.close()


def test_bulk_request_keeps_order_and_equals_the_model(
    embedder: Embedder, abstracts: list[str]
) -> None:
    texts = abstracts[:12] + ["short", "a second short text"] + abstracts[12:20]
    ex = EmbedExecutor(embedder, max_batch=8, cache_size=0)
    try:
        out = ex.embed(texts)
        assert out.shape == (len(texts), embedder.dim)
        # Sliced the way the model sorts and batches itself: the same rows, in input order.
        np.testing.assert_allclose(out, embedder.embed(texts), atol=1e-5)
        assert ex.batches == 3
        assert ex.embed([]).shape == (0, embedder.dim)
    finally:
        ex.close()


def test_queries_overtake_a_bulk_request(embedder: Embedder, abstracts: list[str]) -> None:
    ex = EmbedExecutor(embedder, max_batch=2, cache_size=0)
    done: dict[str, float] = {}
    try:
        bulk = threading.Thread(target=lambda: (ex.embed(abstracts[:24]), done.update(bulk=1)))
        bulk.start()
        while ex.batches == 0:  # the first slice is running
            time.sleep(0.005)
        v = ex.embed_query("thermal stability of proteins")
        assert "bulk" not in done  # 12 slices: the query waited for at most one
        bulk.join(300)
        assert done == {"bulk": 1}
        np.testing.assert_allclose(v, embedder.embed(["thermal stability of proteins"])[0], 1e-5)
    finally:
        ex.close()


def test_an_error_reaches_only_its_request(embedder: Embedder, abstracts: list[str]) -> None:
    ex = EmbedExecutor(embedder, cache_size=0, wait_ms=50)
    try:
        blocker = threading.Thread(target=ex.embed, args=(abstracts[:4],))
        blocker.start()
        while ex.batches == 0:
            time.sleep(0.002)
        # These queue up behind the running batch and are taken together.
        inputs: list[Any] = [["first query"], [12345], ["second query"]]
        got, err = _threads(ex.embed, inputs)
        blocker.join(120)
        assert err[0] is None and err[2] is None
        assert err[1] is not None and not isinstance(err[1], UnavailableError)
        np.testing.assert_allclose(got[0][0], embedder.embed(["first query"])[0], atol=1e-5)
        np.testing.assert_allclose(got[2][0], embedder.embed(["second query"])[0], atol=1e-5)
        assert ex.embed(["still serving"]).shape == (1, embedder.dim)
    finally:
        ex.close()


def test_full_queue_is_503_overloaded(embedder: Embedder, abstracts: list[str]) -> None:
    ex = EmbedExecutor(embedder, max_queue=1, cache_size=0)
    try:
        t = threading.Thread(target=ex.embed, args=(abstracts[:8],))
        t.start()
        while ex.batches == 0:
            time.sleep(0.002)
        with pytest.raises(OverloadedError) as e:
            ex.embed(["no room"])
        assert e.value.http_status == 503
        t.join(120)
        assert ex.embed(["room again"]).shape == (1, embedder.dim)
    finally:
        ex.close()


def test_close_fails_waiting_requests_and_refuses_new_ones(
    embedder: Embedder, abstracts: list[str]
) -> None:
    ex = EmbedExecutor(embedder, max_batch=2, cache_size=0)
    errors: list[BaseException] = []

    def bulk() -> None:
        try:
            ex.embed(abstracts[:20])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=bulk)
    t.start()
    while ex.batches == 0:
        time.sleep(0.002)
    ex.close()
    t.join(60)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], UnavailableError)
    assert ex.batches < 10  # it stopped after the slice in flight
    with pytest.raises(UnavailableError):
        ex.embed_query("after close")
    assert not ex._thread.is_alive()


def test_query_cache_is_bounded_and_read_only(embedder: Embedder) -> None:
    ex = EmbedExecutor(embedder, cache_size=2)
    try:
        a = ex.embed_query("alpha")
        assert ex.embed_query("alpha") is a and not a.flags.writeable
        ex.embed_query("beta")
        ex.embed_query("gamma")
        runs = ex.batches
        ex.embed_query("alpha")  # evicted by beta and gamma: embedded again
        assert ex.batches == runs + 1
    finally:
        ex.close()


def test_service_embeds_through_one_executor(svc: Any) -> None:
    assert isinstance(svc.embedder, EmbedExecutor)
    assert svc.embedder.model_id == svc.embedder.inner.model_id
