"""Evaluation datasets (BEIR layout) and how the benchmarks turn them into Units and scopes."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

BASE_SCOPE = "acme/alpha/bench"  # alice's grant is acme/alpha
FILTERS = ("100%", "10%", "1%")


def load_dataset(path: Path, split: str = "test") -> tuple[dict[str, Any], dict[str, str], Any]:
    from superchargedb.evaluation import load_beir

    return load_beir(path, split)


def select(
    corpus: dict[str, dict[str, str]],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    limit_docs: int | None,
    limit_queries: int | None,
    relevant_first: bool = True,
) -> tuple[list[str], list[str]]:
    """(doc ids to ingest, query ids to score).

    With ``limit_docs``, the selected queries' relevant documents come first (unless
    ``relevant_first`` is false), the budget is filled with other documents in file order, and
    only queries whose relevant documents were all ingested are scored.
    """
    qids = [q for q in qrels if q in queries and any(g > 0 for g in qrels[q].values())]
    if limit_queries is not None:
        qids = qids[:limit_queries]
    if limit_docs is None:
        docs = list(corpus)
    else:
        order: dict[str, None] = {}
        for q in qids if relevant_first else ():
            for d, g in qrels[q].items():
                if g > 0 and d in corpus:
                    order[d] = None
        for d in corpus:
            order[d] = None
        docs = list(order)[:limit_docs]
    ingested = set(docs)
    qids = [q for q in qids if all(d in ingested for d, g in qrels[q].items() if g > 0)]
    return docs, qids


def unit_text(doc: dict[str, str]) -> str:
    """SciFact Units are ``title + "\\n" + text`` (D-71); the same for every set."""
    return (doc.get("title") or "") + "\n" + (doc.get("text") or "")


def bucket(doc_id: str) -> int:
    """A stable 0..99 bucket per document: the unit of the 10 % / 1 % scope filters."""
    return zlib.crc32(doc_id.encode("utf-8")) % 100


def doc_scope(doc_id: str) -> str:
    b = bucket(doc_id)
    return f"{BASE_SCOPE}/t{b // 10}/u{b:02d}"


def filter_scope(level: str, u: int) -> str:
    """The query scope that selects ~``level`` of the corpus (``u`` picks the bucket)."""
    if level == "100%":
        return BASE_SCOPE
    if level == "10%":
        return f"{BASE_SCOPE}/t{u // 10}"
    if level == "1%":
        return f"{BASE_SCOPE}/t{u // 10}/u{u:02d}"
    raise ValueError(level)
