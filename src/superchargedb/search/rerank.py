"""The optional ``rerank`` stage (D-92, D-30).

No cross-encoder ships in any installable package here, so the default is "none" and a request
with ``rerank: true`` is traced ``skipped: no reranker configured``. An HTTP rerank endpoint can
be configured (``SCDB_RERANK_URL``): the Cohere-style body ``{model, query, documents, top_n}``
answered by ``{"results": [{"index", "relevance_score"}]}`` (Cohere, Jina, vLLM, Infinity), or
the TEI body ``{query, texts}`` answered by ``[{"index", "score"}]``.

Only hits the caller may read reach this stage (every leg filtered first), so the endpoint never
sees another principal's text. A failure (timeout, 5xx, malformed body) keeps the fused order and
says why in the trace: reranking is an improvement, never a reason to fail a search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import httpx

from ..types import Stage


class RerankFailed(Exception):
    pass


class Reranker(Protocol):
    name: str

    def scores(self, query: str, texts: Sequence[str], timeout_s: float) -> list[float]:
        """One relevance score per text, same order (higher is more relevant)."""


class HttpReranker:
    def __init__(self, url: str, api: str, model: str, api_key: str | None = None) -> None:
        self.url, self.api, self.model = url, api, model
        self.name = f"http:{model}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _body(self, query: str, texts: Sequence[str]) -> dict[str, Any]:
        if self.api == "tei":
            return {"query": query, "texts": list(texts), "truncate": True}
        return {"model": self.model, "query": query, "documents": list(texts), "top_n": len(texts)}

    def scores(self, query: str, texts: Sequence[str], timeout_s: float) -> list[float]:
        try:
            r = httpx.post(
                self.url, json=self._body(query, texts), headers=self._headers, timeout=timeout_s
            )
        except httpx.TimeoutException as e:
            raise RerankFailed("timeout") from e
        except httpx.HTTPError as e:
            raise RerankFailed(f"unreachable ({type(e).__name__})") from e
        if r.status_code != 200:
            raise RerankFailed(f"HTTP {r.status_code}")
        try:
            body = r.json()
            items = body if isinstance(body, list) else body["results"]
            out = [math.nan] * len(texts)
            for it in items:
                i = int(it["index"])
                score = float(it["relevance_score"] if "relevance_score" in it else it["score"])
                if not 0 <= i < len(texts) or not math.isfinite(score):
                    raise ValueError("index or score out of range")
                out[i] = score
        except (ValueError, KeyError, TypeError) as e:
            raise RerankFailed(f"malformed response ({e})") from e
        if any(math.isnan(x) for x in out):
            raise RerankFailed("response did not score every passage")
        return out


def make_reranker(settings: Any) -> Reranker | None:
    if not settings.rerank_url:
        return None
    return HttpReranker(
        settings.rerank_url, settings.rerank_api, settings.rerank_model, settings.rerank_api_key
    )


def rerank_stage(
    reranker: Reranker | None,
    query: str,
    fused: list[tuple[int, float]],
    texts_of: Callable[[list[int]], Mapping[int, str]],
    depth: int,
    timeout_s: float,
) -> tuple[list[tuple[int, float]], Stage, dict[int, int]]:
    """Reorder the first ``depth`` fused hits by the reranker's scores.

    Returns the new (key, score) list (reranked head, then the untouched tail), the trace stage
    and each reranked key's 1-based rerank rank. Reranked hits carry the reranker's score.
    """
    if reranker is None:
        return fused, Stage("rerank", 0.0, skipped="no reranker configured"), {}
    t0 = time.perf_counter()
    head, tail = fused[:depth], fused[depth:]
    texts = texts_of([k for k, _ in head])
    head = [(k, s) for k, s in head if k in texts]  # deleted meanwhile: drop
    if not head:
        return fused, Stage("rerank", 0.0, skipped="no hits"), {}
    try:
        scores = reranker.scores(query, [texts[k] for k, _ in head], timeout_s)
    except RerankFailed as e:
        ms = (time.perf_counter() - t0) * 1000
        return fused, Stage("rerank", ms, skipped=f"{reranker.name} failed: {e}", degraded=True), {}
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    reranked = [(head[i][0], scores[i]) for i in order]
    ranks = {k: n for n, (k, _) in enumerate(reranked, 1)}
    ms = (time.perf_counter() - t0) * 1000
    return reranked + tail, Stage("rerank", ms, detail=f"{reranker.name} n={len(head)}"), ranks
