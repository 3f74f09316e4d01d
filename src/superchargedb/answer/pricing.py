"""The price table behind ``trace.est_cost_usd`` (documented in docs/answers.md).

Remote chat models are priced per million tokens (prompt, completion); a local model is priced
by the compute seconds it used at ``SCDB_LOCAL_COMPUTE_USD_PER_S``. Unknown models cost 0 and
say so in the trace rather than inventing a price.
"""

from __future__ import annotations

# USD per 1M tokens: (prompt, completion). Public list prices; edit with the provider's.
CHAT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1": (2.00, 8.00),
}
# Embedding the query locally: compute seconds like any local model.


def chat_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    price = CHAT_PRICES.get(model)
    if price is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def compute_cost(seconds: float, usd_per_s: float) -> float:
    return max(0.0, seconds) * usd_per_s
