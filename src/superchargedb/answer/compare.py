"""Comparison and yes/no questions over two named sides (D-163).

"Which was established first, A or B?" and "Are A and B both American?" need one fact per side.
Each side's best sentence is looked up in the retrieved evidence (a sentence, or its passage,
naming the side) and, when absent, retrieved for (the side + the question's other terms)
through the pipeline's own search. The answer is a templated lead sentence naming the choice
(or opening with Yes / No) and citing both sides, then each side's sentence, quoted and cited.

The choice: by the comparative the question uses (first / earlier / older: the smaller year;
later / more recent: the larger; more / larger / longer ...: the larger number; fewer /
smaller ...: the smaller), else the side whose sentence holds more of the question's other
terms. Yes/no: "both P": yes when each side's sentence states P; "same P": yes when the two
sentences share a name or number that neither side's own name holds. No decision (a side
without a fact, a tie) -> refused as ``chain_incomplete``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import terms as T
from .chain import HOP_TOP_K, Localize, Search
from .localize import Candidate, Evidence
from .question import QuestionInfo

_SMALL = re.compile(
    r"\b(first|earlier|earliest|older|oldest|before|fewer|less|smaller|shorter|lower)\b", re.I
)
_LARGE = re.compile(
    r"\b(later|latest|newer|newest|younger|youngest|more recent|most recent|more|most|larger|"
    r"largest|bigger|biggest|higher|highest|taller|tallest|longer|longest|greater|greatest)\b",
    re.I,
)
_DATEISH = re.compile(
    r"\b(first|earlier|earliest|older|oldest|before|later|latest|newer|newest|"
    r"younger|youngest|recent|founded|established|born|formed|released)\b",
    re.I,
)
_YEAR = re.compile(r"\b(1\d{3}|20\d{2})\b")
_NUMBER = re.compile(r"\b\d[\d,]*(?:\.\d+)?\b")
_CAP = re.compile(r"\b[A-Z][\w'’-]+")
_WORD_VALUES = {
    w: float(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()  # noqa: SIM905
    )
} | {"sole": 1.0, "single": 1.0, "dozen": 12.0}


# A comparative's side is best told by a sentence holding its value ("Established in 1949")
# over the sentence that names it best ("The University of New South Wales is a public ...").
VALUE_BONUS = 1.0
# A sentence of the side's passage that states the asked property ("He is also the Principal
# Creative Advisor for Walt Disney Imagineering") over the one that only names the side: the
# passage's naming sentence is quoted with it anyway (cover.with_subjects).
NAMED_WEIGHT = 0.5


@dataclass
class Sides:
    lead: str | None  # the templated first sentence (no markers); None: undecided
    facts: list[Candidate]  # one per side, in the options' order
    extra: list[Evidence]  # passages the side lookups retrieved (renumbered)
    notes: list[str]


def _side_stems(side: str) -> frozenset[str]:
    return T.text_stems(side)


def find_side(side: str, evidence: Sequence[Evidence], info: QuestionInfo) -> Candidate | None:
    """The best sentence about ``side``: named in the sentence or in its passage; for a
    comparative ("founded first", "more species"), one that holds a value to compare."""
    want = list(_side_stems(side))
    others = [t for t in info.constraints if T.stem(t) not in set(want)]
    comparative = info.qtype == "choice" and bool(
        _SMALL.search(info.text) or _LARGE.search(info.text)
    )
    dateish = bool(_DATEISH.search(info.text))
    best: tuple[float, Candidate] | None = None
    for ev in evidence:
        in_passage = T.weighted_coverage(want, T.text_stems(ev.hit["text"])) >= 0.99
        for c in ev.candidates:
            named = T.weighted_coverage(want, T.text_stems(c.text))
            if named < 0.99 and not in_passage:
                continue
            s = NAMED_WEIGHT * named + T.weighted_coverage(others, T.text_stems(c.text))
            s += 0.1 * c.cos
            if comparative and _value(c.text, dateish, side) is not None:
                s += VALUE_BONUS
            if best is None or s > best[0]:
                best = (s, c)
    return best[1] if best else None


def compare(
    info: QuestionInfo,
    evidence: list[Evidence],
    search: Search,
    localize: Localize,
    max_hops: int,
) -> Sides:
    """Both sides' facts and the lead (None when a side has no fact or no decision)."""
    from .chain import _renumber

    pool = list(evidence)
    base = max((e.n for e in evidence), default=0)
    notes: list[str] = []
    extra: list[Evidence] = []
    facts: list[Candidate] = []
    hops = 0
    for side in info.options[:2]:
        c = find_side(side, pool, info)
        if c is None and hops < max_hops:
            hops += 1
            query = " ".join([side, *info.constraints])
            seen = {e.hit.get("unit_id") for e in pool}
            hits = [h for h in search(query) if h.get("unit_id") not in seen][:HOP_TOP_K]
            more = _renumber(localize(query, hits), base)
            base = max([base, *(e.n for e in more)])
            pool += more
            c = find_side(side, more, info)
            notes.append(f"side {side!r}: {query!r}, {len(hits)} hits" + ("" if c else ", no fact"))
            if c is not None:
                extra += [e for e in more if e.n == c.n]
        if c is None:
            return Sides(None, facts, extra, notes)
        facts.append(c)
    by_n = {e.n: e.hit.get("text") or "" for e in pool}
    lead = _decide(info, facts, [by_n.get(f.n, f.text) for f in facts])
    if lead is None:
        notes.append("no decision between the sides")
    return Sides(lead, facts, extra, notes)


def _decide(
    info: QuestionInfo, facts: list[Candidate], passages: list[str] | None = None
) -> str | None:
    q = info.text
    a, b = info.options[:2]
    if info.qtype == "yesno":
        return _yes_no(info, facts, passages)
    small, large = _SMALL.search(q), _LARGE.search(q)
    if small or large:
        dateish = bool(_DATEISH.search(q))
        vals = [_value(f.text, dateish, side) for f, side in zip(facts, (a, b), strict=True)]
        if None not in vals and vals[0] != vals[1]:
            pick_small = small is not None and (large is None or small.start() < large.start())
            first_wins = (vals[0] < vals[1]) == pick_small  # type: ignore[operator]
            return f"{a if first_wins else b}."
    others = [t for t in info.constraints if T.stem(t) not in _side_stems(a) | _side_stems(b)]
    cov = [T.weighted_coverage(others, T.text_stems(f.text)) for f in facts]
    if abs(cov[0] - cov[1]) < 0.05 and passages is not None:
        # The sentences tie: what the side's whole passage says of the question decides
        # ("Which director is an advisor for Disney, A or B?": B's passage names the role).
        cov = [T.weighted_coverage(others, T.text_stems(p)) for p in passages]
    if abs(cov[0] - cov[1]) < 0.05:
        return None
    return f"{a if cov[0] > cov[1] else b}."


def _value(text: str, dateish: bool, side: str) -> float | None:
    own = set(re.findall(r"\d+", side))
    if dateish:
        ys = [int(y) for y in _YEAR.findall(text) if y not in own]
        return float(ys[0]) if ys else None
    ns = [n for n in _NUMBER.findall(text) if n.replace(",", "") not in own]
    if ns:
        return float(ns[0].replace(",", ""))
    # "the sole species of the genus", "two albums": a number written as a word.
    for w in re.findall(r"[a-z]+", text.lower()):
        if w in _WORD_VALUES:
            return _WORD_VALUES[w]
    return None


def _yes_no(
    info: QuestionInfo, facts: list[Candidate], passages: list[str] | None = None
) -> str | None:
    a, b = info.options[:2]
    sides = _side_stems(a) | _side_stems(b)
    if re.search(r"\bsame\b", info.text, re.I):
        names = []
        for f, side in zip(facts, (a, b), strict=True):
            own = _side_stems(side)
            caps = {T.stem(w.lower()) for w in _CAP.findall(f.text)} - own - sides
            nums = set(_NUMBER.findall(f.text))
            names.append(caps | nums)
        return "Yes." if names[0] & names[1] else "No."
    prop = [t for t in info.constraints if T.stem(t) not in sides and t != "both"]
    if not prop:
        return None
    texts = passages or [f.text for f in facts]  # P may be stated anywhere on the side
    ok = [T.weighted_coverage(prop, T.text_stems(t)) >= 0.5 for t in texts]
    return "Yes." if all(ok) else "No."
