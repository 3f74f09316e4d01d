"""Published test-split baselines of the evaluation datasets, shown beside our numbers."""

from __future__ import annotations

from typing import Any

# Published test-split baselines (the eval folder's README.md), by dataset folder name.
BASELINES: dict[str, list[dict[str, Any]]] = {
    "scifact": [
        {
            "system": "BM25 flat (Lucene, k1=0.9, b=0.4)",
            "compare_to": "lexical",
            "ndcg@10": 0.6789,
            "recall@100": 0.9253,
            "source": "Pyserini 2cr/beir.yaml",
        },
        {
            "system": "BM25 multifield (BEIR paper setup)",
            "compare_to": "lexical",
            "ndcg@10": 0.6647,
            "recall@100": 0.9076,
            "source": "Pyserini; BEIR paper (Thakur et al. 2021)",
        },
        {
            "system": "all-MiniLM-L6-v2 (dense)",
            "compare_to": "dense",
            "ndcg@10": 0.6451,
            "recall@100": 0.925,
            "source": "MTEB results",
        },
        {
            "system": "bge-small-en-v1.5 (dense)",
            "compare_to": "dense",
            "ndcg@10": 0.7127,
            "recall@100": 0.945,
            "source": "MTEB results",
        },
        {
            "system": "RRF(BM25 flat, bge-base-en-v1.5), k=60",
            "compare_to": "hybrid",
            "ndcg@10": 0.7420,
            "recall@100": 0.9767,
            "source": "Pyserini docs/experiments-beir-fusion.md",
        },
        {
            "system": "txtai hybrid (its published BEIR notebook)",
            "compare_to": "hybrid",
            "ndcg@10": 0.713,
            "recall@100": None,
            "source": "neuml/txtai examples/48",
        },
        {
            "system": "BM25 + ms-marco-MiniLM-L-6-v2 cross-encoder rerank top-100",
            "compare_to": "hybrid+rerank",
            "ndcg@10": 0.682,
            "recall@100": None,
            "source": "BEIR repo reranking README",
        },
    ],
}
