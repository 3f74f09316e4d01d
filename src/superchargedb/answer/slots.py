"""Slot swaps: a claim that keeps a cited sentence's frame but fills a slot of it with a word or
number taken from elsewhere in the cited text.

    cited: "The return rate for apparel was 18%, compared with 6% for electronics."
    claim: "The return rate for electronics was 18%."          (electronics in apparel's slot)
    cited: "A topic uses replication factor 3 with min.insync.replicas set to 2."
    claim: "Topics use replication factor 2 with min.insync.replicas set to 3."

Every word and number of such a claim occurs in the passage, so coverage, the number guard and
similarity all pass. The claim is aligned with the cited sentence it shares most with (longest
common subsequence of stems); a gap of the alignment bounded by matched tokens on both sides is
a slot. A slot is swapped when the claim fills it with 1-3 content tokens the sentence's slot
does not hold, at least one of which occurs elsewhere in the cited text, and (for words) none of
the sentence's own filler occurs anywhere in the claim: a filler that reappears elsewhere in the
claim means the claim reorders the sentence, which paraphrases do. Numbers are exempt from that
last test: two values traded between two slots are the classic swap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .claims import norm_word, stem
from .lexicon import ONES, STOP, TENS, TOKEN

__all__ = ["MAX_SLOT", "slot_swaps"]

MAX_SLOT = 3  # content tokens per side of a slot: longer gaps are rewordings, not slot fills
MIN_ANCHORS = 3  # the claim must share this many content tokens with the sentence to align
#: Share of the claim's tokens the alignment must match: a swap copies the sentence's frame
#: nearly verbatim, while a paraphrase rewords it (its gaps are rewordings, not slots).
MIN_COPIED = {"number": 0.6, "word": 0.75}
_NUM = re.compile(r"^\d[\d,]*(?:\.\d+)?$")

Token = tuple[str, bool, str]  # key (stem or "#number"), is content, surface


def _tokens(text: str) -> list[Token]:
    out: list[Token] = []
    for m in TOKEN.finditer(text):
        tok = m.group(0)
        if not tok[0].isalnum():
            continue
        if _NUM.match(tok):
            out.append(("#" + tok.replace(",", ""), True, tok))
            continue
        low = norm_word(tok)
        value = ONES.get(low, TENS.get(low))
        if value is not None:  # "five" and "5" fill a slot alike
            out.append((f"#{value}", True, tok))
            continue
        out.append((stem(low), low not in STOP and len(low) > 1, tok))
    return out


def _lcs(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs of one longest common subsequence of ``a`` and ``b``."""
    n, m = len(a), len(b)
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            dp[i][j] = dp[i + 1][j + 1] + 1 if a[i] == b[j] else max(dp[i + 1][j], dp[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif dp[i + 1][j] >= dp[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def slot_swaps(claim: str, sentences: Sequence[str], cited: str) -> list[str]:
    """A failure per swapped slot against the best-aligned cited sentence (empty when none)."""
    a = _tokens(claim)
    if not a:
        return []
    keys_a = [k for k, _, _ in a]
    best: tuple[int, list[Token], list[tuple[int, int]]] | None = None
    for s in sentences:
        b = _tokens(s)
        pairs = _lcs(keys_a, [k for k, _, _ in b])
        anchors = sum(1 for i, _ in pairs if a[i][1])
        if anchors >= MIN_ANCHORS and (best is None or anchors > best[0]):
            best = (anchors, b, pairs)
    if best is None:
        return []
    _, b, pairs = best
    copied = len(pairs) / len(a)
    elsewhere = {k for k, content, _ in _tokens(cited) if content}
    in_claim = set(keys_a)
    out: list[str] = []
    for (i0, j0), (i1, j1) in zip(pairs, pairs[1:], strict=False):
        mine = [t for t in a[i0 + 1 : i1] if t[1]]
        theirs = [t for t in b[j0 + 1 : j1] if t[1]]
        if not (0 < len(mine) <= MAX_SLOT and 0 < len(theirs) <= MAX_SLOT):
            continue
        x_keys, y_keys = {k for k, _, _ in mine}, {k for k, _, _ in theirs}
        if x_keys & y_keys or not x_keys & elsewhere:
            continue
        numbers = all(k.startswith("#") for k in x_keys | y_keys)
        if not numbers and any(k.startswith("#") for k in x_keys | y_keys):
            continue  # a number with its unit ("800 ms" for "0.8 seconds"): the number guard's
        if copied < MIN_COPIED["number" if numbers else "word"]:
            continue
        if not numbers and (y_keys & in_claim or len(mine) != len(theirs)):
            continue  # a reordering (the sentence's filler is elsewhere in the claim) or rewording
        out.append(
            f"slot swap: {' '.join(t[2] for t in mine)} in place of"
            f" {' '.join(t[2] for t in theirs)}"
        )
    return out
