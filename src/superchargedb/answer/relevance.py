"""Which of a model sentence's citations answer the question (after the support check).

The support check asks whether a sentence is true of the passages it cites, not whether those
passages answer the question. The local 1.5B model, on REPORT questions, cited an off-topic
passage for a sentence true of it, or cited sibling paragraphs ``[1][2][3]`` for one fact: 7 of
99 answers lost citation precision that way (docs/answers.md). Two rules, applied to every
model's sentences:

1. **Relevance.** A passage's relevance is its best sentence's localizer score minus the best
   passage's (0 for the passage that answers best). A citation below ``RELEVANCE_CUT`` does not
   answer the question and is removed; a sentence left with none is dropped.
2. **One source when one suffices.** When several cited passages each support the sentence on
   their own, only the most relevant of them is kept. A sentence that needs two passages
   together (no single one supports it) keeps all its relevant citations, rechecked together.

``RELEVANCE_CUT`` was chosen on the CALIBRATION half (``bench/answers_relevance.py``): the
highest cut that removes at most 0.5 % of the gold passages found in the top 5 (citation recall
has no room to lose more): 0.43 % of them, and 92 % of the non-gold passages, fall below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .localize import Evidence
from .support import EntailmentChecker, Support

RELEVANCE_CUT = -0.23


def relevance(evidence: Sequence[Evidence]) -> dict[int, float]:
    """Passage number -> best sentence score minus the best passage's (<= 0)."""
    best = {ev.n: ev.best.score for ev in evidence if ev.best is not None}
    top = max(best.values(), default=0.0)
    return {n: s - top for n, s in best.items()}


@dataclass
class Focus:
    """What a supported model sentence keeps: ``passages`` (empty: drop the sentence), the
    support of what is kept, and why anything was removed ("" when nothing was)."""

    passages: list[int]
    support: Support | None
    reason: str = ""


def focus(
    sentence: str,
    cited: list[int],
    support: Support,
    texts: dict[int, str],
    rel: dict[int, float],
    checker: EntailmentChecker,
    cut: float = RELEVANCE_CUT,
) -> Focus:
    """Apply both rules to a sentence whose citations ``cited`` already support it."""

    # What the sentence does not cite. A cited sibling that says the same must not count as
    # evidence against its twin, so checks of a subset still leave every cited passage out.
    uncited = [t for n, t in texts.items() if n not in cited]

    def marks(ns: Sequence[int]) -> str:
        return "".join(f"[{n}]" for n in ns)

    relevant = [n for n in cited if rel.get(n, float("-inf")) >= cut]
    off = [n for n in cited if n not in relevant]
    if not relevant:
        best = max(rel.get(n, float("-inf")) for n in cited)
        return Focus(
            [],
            None,
            f"cites {marks(off)}, which does not answer the question "
            f"(relevance {best:.2f} < {cut:.2f})",
        )
    notes = []
    if off:
        notes.append(f"{marks(off)} removed: does not answer the question")
    if len(relevant) > 1:
        alone = [(n, checker.check(sentence, [texts[n]], uncited)) for n in relevant]
        ok = [(n, s) for n, s in alone if s.supported]
        if ok:
            n, s = max(ok, key=lambda p: rel[p[0]])  # first of equals: the model's order
            extra = [m for m in relevant if m != n]
            notes.append(f"{marks(extra)} removed: {marks([n])} supports the sentence alone")
            return Focus([n], s, "; ".join(notes))
    if off:
        # The removed passage may have carried part of the claim: recheck what is left.
        support = checker.check(sentence, [texts[n] for n in relevant], uncited)
        if not support.supported:
            reason = f"{notes[0]}; the rest does not support it: " + "; ".join(support.reasons)
            return Focus([], None, reason)
    return Focus(relevant, support, "; ".join(notes))
