"""Lexical guards: what a claim asserts that similarity cannot check (D-36).

``guard_failures(claim, evidence)`` names every failed guard: numbers (with units, and bound to
the same words), dates, capitalised names (and not only after the supporting sentence),
identifiers, rates, and polarity (negation scopes, contrasts, ``un-``/``non-`` prefixes,
direction words). ``clause_coverage`` finds the least covered clause (an unsupported clause
appended to a true one).
"""

from __future__ import annotations

from dataclasses import dataclass

from .claims import Features, Number, norm_word
from .lexicon import CONTRAST, DIRECTIONS, NEG_PREFIXES
from .slots import slot_swaps

__all__ = ["CLAUSE_MIN_STEMS", "Evidence", "clause_coverage", "guard_failures", "is_year"]

#: Clauses with fewer content stems are not judged on their own coverage.
CLAUSE_MIN_STEMS = 3


def _same(n: Number, x: float) -> bool:
    """Whether the evidence value ``x`` (expressed at n's scale) reads as n's value."""
    if abs(n.value - x) <= 1e-9 * max(1.0, abs(x)):
        return True
    if abs(round(x, n.decimals) - n.value) <= 1e-9 * max(1.0, abs(x)):
        return True  # rounded in the sentence: "1.58 s" for "1,578 ms"
    return n.approx and abs(n.value - x) <= 0.05 * abs(x)


def _number_matches(n: Number, m: Number) -> bool:
    if n.dim is not None and m.dim == n.dim:
        return _same(n, m.base / (n.mult * n.factor))
    if n.dim is None or m.dim is None:
        return _same(n, m.raw / n.mult)
    return False


def _number_failures(claim: Features, evidence: Features) -> list[str]:
    pool = list(evidence.numbers)
    pool += [Number(str(p), float(p)) for d in evidence.dates for p in (d[1], d[3]) if p]
    out: list[str] = []
    for n in claim.numbers:
        hits = [m for m in pool if _number_matches(n, m)]
        if not hits:
            other = next((m for m in pool if abs(m.value - n.value) < 1e-9 and m.dim), None)
            if other is not None and n.dim:
                out.append(f"unit {n.unit} vs {other.unit}")
            else:
                out.append(
                    f"number {n.surface}{' ' + n.unit if n.unit else ''} not in cited passage"
                )
        elif not is_year(n) and not any(not m.context or claim.stems & m.context for m in hits):
            out.append(f"number {n.surface} bound to other words in cited passage")
    return out


def is_year(n: Number) -> bool:
    """Years head paragraphs and date lines, far from the words they bind: not bound."""
    return n.dim is None and n.decimals == 0 and 1000 <= n.value <= 2100


def _name_in(name: str, vocab: frozenset[str]) -> bool:
    low = norm_word(name)
    cands = {low, low + "s", low + "es", low.removesuffix("s"), low.removesuffix("es")}
    return bool(cands & vocab) or ("-" in low and all(p in vocab for p in low.split("-") if p))


def _polarity_failures(claim: Features, ev: Evidence) -> list[str]:
    out: list[str] = []
    soft = any(w in CONTRAST or w not in ev.cited.vocab for w in claim.soft_negation)
    if not claim.neg_scopes and not soft:  # an un- word the passage shares is no negation
        # The negations of the most similar sentence, and of any cited sentence the claim
        # draws on (shares two stems found in no other cited sentence: "It does not ...").
        for f in ev.sentences:
            if not f.neg_scopes:
                continue
            rest = frozenset().union(*(g.stems for g in ev.sentences if g is not f))
            if f is not ev.sentence and len(claim.stems & (f.stems - rest)) < 2:
                continue
            hits = [s & claim.stems for s in f.neg_scopes]
            if any(
                len(h) >= min(2, len(s)) and h - f.affirmed
                for h, s in zip(hits, f.neg_scopes, strict=True)
            ):
                hit = max(hits, key=len)
                out.append(f"negation mismatch: cited passage negates {' '.join(sorted(hit))}")
                break
    elif not ev.window.neg_scopes and any(cs & ev.window.stems for cs in claim.neg_scopes):
        out.append("negation mismatch: sentence negates what the cited passage affirms")
    rejected = frozenset().union(*ev.sentence.contrast_scopes)
    for cs in claim.contrast_scopes:  # "A rather than B" against "B rather than A"
        if rejected and cs & ev.sentence.stems and not cs & rejected:
            out.append(f"contrast mismatch: sentence rejects {' '.join(sorted(cs))}")
    vocab = ev.cited.vocab
    for w in sorted(claim.vocab):
        if len(w) < 4 or not w.isalpha() or w in vocab:
            continue
        for p in NEG_PREFIXES:
            base = w[len(p) :]
            if p + w in vocab or (w.startswith(p) and len(base) >= 4 and base in vocab):
                out.append(f"negation mismatch: {w} vs {p + w if p + w in vocab else base}")
                break
    for pair, _, _ in DIRECTIONS:
        mine = {(s, w) for p, s, w in claim.directions if p == pair}
        theirs = {(s, w) for p, s, w in ev.sentence.directions if p == pair}
        sides, their_sides = {s for s, _ in mine}, {s for s, _ in theirs}
        if len(sides) == 1 and their_sides and not sides & their_sides:
            out.append(
                f"direction mismatch: {min(w for _, w in mine)} vs {min(w for _, w in theirs)}"
            )
    return out


@dataclass(frozen=True)
class Evidence:
    """What a claim is compared with: all cited text, the most similar 1-2 sentence window and
    single sentence, the cited text up to the end of the window (for names), and each cited
    sentence."""

    cited: Features
    window: Features
    sentence: Features
    upto: Features
    sentences: tuple[Features, ...]  # every cited sentence


def guard_failures(claim: Features, ev: Evidence) -> list[str]:
    """Every lexical guard that fails (an empty list when all pass)."""
    out = _number_failures(claim, ev.cited)
    for surface, year, month, day in claim.dates:
        if not any(
            m == month and (year is None or y == year) and (day is None or d == day)
            for _, y, m, d in ev.cited.dates
        ):
            out.append(f"date {surface} not in cited passage")
    for n in claim.names:
        if not _name_in(n, ev.cited.vocab):
            out.append(f"name {n} not in cited passage")
        elif not _name_in(n, ev.upto.vocab):
            out.append(f"name {n} only after the supporting sentence")
    out += [
        f"identifier {i} not in cited passage"
        for i in claim.idents
        if norm_word(i) not in ev.cited.vocab
    ]
    out += [f"rate per {r} not in cited passage" for r in sorted(claim.rates - ev.cited.rates)]
    out += slot_swaps(claim.text, [s.text for s in ev.sentences], ev.cited.text)
    return out + _polarity_failures(claim, ev)


def clause_coverage(claim: Features, evidence: Features) -> tuple[float, str]:
    """The lowest coverage over the claim's clauses with >= CLAUSE_MIN_STEMS stems (1.0 when
    none has), and that clause's missing stems."""
    worst, missing = 1.0, ""
    for _, clause in claim.clauses:
        if len(clause) >= CLAUSE_MIN_STEMS:
            share = len(clause & evidence.stems) / len(clause)
            if share < worst:
                worst, missing = share, " ".join(sorted(clause - evidence.stems))
    return worst, missing
