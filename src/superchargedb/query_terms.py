"""The searchable terms of a query: distinct lower-cased ``\\w+`` tokens minus stopwords.

One analysis for every leg and backend (the lexical index, the answer's term overlap), so a
term that ranks a hit is the term the answer localizer looks for.
"""

from __future__ import annotations

import re

# Lucene's English stopword set (what the published BM25 baselines use).
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
_TOKEN = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 64


def query_terms(q: str) -> list[str]:
    """Distinct lower-cased ``\\w+`` tokens of ``q`` minus stopwords, in order."""
    seen: dict[str, None] = {}
    for t in _TOKEN.findall(q.lower()):
        if t not in STOPWORDS and t not in seen:
            seen[t] = None
    return list(seen)[:MAX_TERMS]
