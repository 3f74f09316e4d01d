"""Ranking metrics over *documents* and a BEIR-layout loader.

Conventions (trec_eval / pytrec_eval, which BEIR and Pyserini report):

* ``qrels`` maps doc id -> graded relevance; a grade ``<= 0`` is not relevant.
* nDCG@k uses gain = rel (not ``2**rel - 1``) and discount ``log2(rank + 1)``; the ideal DCG is
  computed from the qrels, so relevant documents that were never retrieved still count against it.
* Recall@k divides by the number of relevant documents in the qrels (not ``min(k, R)``).
* MRR@k is ``1 / rank`` of the first relevant document within the top k, else 0.

A ranking must be over documents: aggregate chunk hits first (:func:`aggregate_docs`). A doc id that
repeats in ``ranked`` counts once, at its first (best) rank. A query with no relevant document has
no defined nDCG or recall; callers skip it, and these functions raise ``ValueError`` for it.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

Qrels = Mapping[str, int]


def _dedupe(ranked: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def _relevant(qrels: Qrels) -> dict[str, int]:
    rel = {d: int(g) for d, g in qrels.items() if int(g) > 0}
    if not rel:
        raise ValueError("the query has no relevant document in its qrels; skip it")
    return rel


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def ndcg_at_k(ranked_doc_ids: Sequence[str], qrels: Qrels, k: int) -> float:
    """nDCG@k with graded gains ``rel`` and ``log2(rank + 1)`` discount (trec_eval ``ndcg_cut``)."""
    _check_k(k)
    rel = _relevant(qrels)
    top = _dedupe(ranked_doc_ids)[:k]
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(top))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall_at_k(ranked_doc_ids: Sequence[str], qrels: Qrels, k: int) -> float:
    """Share of the relevant documents found in the top k."""
    _check_k(k)
    rel = _relevant(qrels)
    top = _dedupe(ranked_doc_ids)[:k]
    return sum(1 for d in top if d in rel) / len(rel)


def mrr_at_k(ranked_doc_ids: Sequence[str], qrels: Qrels, k: int) -> float:
    """Reciprocal rank of the first relevant document within the top k, else 0."""
    _check_k(k)
    rel = _relevant(qrels)
    for i, d in enumerate(_dedupe(ranked_doc_ids)[:k]):
        if d in rel:
            return 1.0 / (i + 1)
    return 0.0


def aggregate_docs(hits: Iterable[Mapping[str, Any]]) -> list[str]:
    """Doc ids of chunk-level ``hits`` in first-occurrence (best-rank) order.

    Hits without a ``doc_id`` cannot be scored against document qrels and are dropped.
    """
    seen: dict[str, None] = {}
    for h in hits:
        d = h.get("doc_id")
        if d is not None and d not in seen:
            seen[str(d)] = None
    return list(seen)


def load_beir(
    folder: str | Path, split: str = "test"
) -> tuple[dict[str, dict[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    """Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

    Returns ``(corpus, queries, qrels)``. As in BEIR's ``GenericDataLoader``, only the queries that
    have qrels in ``split`` are returned. The qrels TSV has a header line
    (``query-id  corpus-id  score``).
    """
    root = Path(folder)
    corpus: dict[str, dict[str, str]] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                corpus[str(d["_id"])] = {"title": d.get("title") or "", "text": d.get("text") or ""}
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or header[0].strip().lower() not in ("query-id", "query_id", "qid"):
            raise ValueError(f"{f.name}: expected a header line 'query-id corpus-id score'")
        for row in reader:
            if not row or not "".join(row).strip():
                continue
            qid, did, score = row[0].strip(), row[1].strip(), int(row[2])
            qrels.setdefault(qid, {})[did] = score
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                qid = str(q["_id"])
                if qid in qrels:
                    queries[qid] = q["text"]
    missing = set(qrels) - set(queries)
    if missing:
        raise ValueError(f"{len(missing)} qrels query ids have no query text, e.g. {min(missing)}")
    return corpus, queries, qrels
