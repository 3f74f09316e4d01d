"""What a synthesis model reads: whole passages, or each passage cut to its best sentences.

A small local model on 2 cores reads its prompt at ~10-25 tokens/s, so five whole XQuAD
paragraphs (~1,000 tokens) cost a minute or more before the first word; given whole paragraphs
the 1.5B model also tended to copy them out without any ``[n]`` marker (12 of 32 answers
rejected in bench/answers.py --local). Given only each passage's best-scoring sentences
(the localizer's scores), it read ~400 tokens and cited on every rejected question we
retried. Verification still checks every sentence against the *whole* passage, so the cut
only changes what the model sees, never what counts as support.
"""

from __future__ import annotations

from collections.abc import Sequence

from .localize import Candidate, Evidence
from .providers import Passage

GAP = "..."  # marks sentences left out between two kept ones
MIN_PASSAGE_WORDS = 40  # every passage keeps at least this much (or its best sentence)


def passages_for(evidence: Sequence[Evidence], words: int | None) -> list[Passage]:
    """Numbered passages for a provider: whole when ``words`` is None or <= 0, else cut to
    about ``words`` words in all (at least ``MIN_PASSAGE_WORDS`` per passage)."""
    if not words or words <= 0:
        return [Passage(ev.n, ev.hit["text"]) for ev in evidence]
    per = max(MIN_PASSAGE_WORDS, words // max(1, len(evidence)))
    return [Passage(ev.n, cut(ev, per)) for ev in evidence]


def cut(ev: Evidence, words: int) -> str:
    """The passage's best sentences by localizer score, up to ``words`` words (always the best
    one), in their original order, with ``...`` where sentences were left out."""
    if not ev.candidates:
        return str(ev.hit["text"])
    ranked = sorted(ev.candidates, key=lambda c: (-c.score, c.start))
    kept: list[Candidate] = []
    used = 0
    for c in ranked:
        n = len(c.text.split())
        if kept and used + n > words:
            break
        kept.append(c)
        used += n
    kept.sort(key=lambda c: c.start)
    text = ev.hit["text"]
    out: list[str] = []
    prev_end: int | None = None
    first_start = min(c.start for c in ev.candidates)
    for c in kept:
        skipped = text[prev_end : c.start] if prev_end is not None else text[first_start : c.start]
        if skipped.strip():
            out.append(GAP)
        out.append(c.text)
        prev_end = c.end
    last_end = max(c.end for c in ev.candidates)
    if prev_end is not None and text[prev_end:last_end].strip():
        out.append(GAP)
    return " ".join(out)
