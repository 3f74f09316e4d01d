"""Retrieval evaluation: BEIR loading and the trec_eval-convention metrics (D-70)."""

from .metrics import aggregate_docs, load_beir, mrr_at_k, ndcg_at_k, recall_at_k

__all__ = ["aggregate_docs", "load_beir", "mrr_at_k", "ndcg_at_k", "recall_at_k"]
