"""Multi-hop evidence chains: the bridge entity, a second retrieval, both hops cited (D-162).

When no retrieved sentence answers the question but the best one names something the question
does not (a bridge: "X was a professor at *Moscow State University*" for "In what year was the
university where X was a professor founded?"), the pipeline retrieves again for that entity
plus the question's terms the best sentence lacks, through the same search call (same scope,
same ACL filter, same principal), and answers from the chain when a sentence of the second
retrieval states the asked thing about the bridge: ``[1]`` the first fact, ``[2]`` the second.
Bounded: at most ``MAX_HOPS`` extra retrievals per answer, each one in the trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import terms as T
from .checks import Verdict, verdict
from .cover import as_name, subject
from .localize import Candidate, Evidence
from .question import QuestionInfo

MAX_HOPS = 2  # extra retrievals per answer (bridge candidates tried)
# A best sentence that passes the check but holds less than this share of the question's
# constraint weight may be a bridge's first hop ("... developed by Analog Devices" for "the
# company that is headquartered in what city?"): a hop is tried, and kept only when its
# sentence states a constraint term the first lacks.
BRIDGE_COVERAGE = 0.6
HOP_TOP_K = 5
_NAME = re.compile(
    r"(?<![\w])((?:[A-Z][\w'’.&-]*|\d[\w'’.-]*)(?:\s+(?:of|the|de|von|van|du|la|and)?\s*"
    r"(?:[A-Z][\w'’.&-]*))*)"
)
_OPENERS = frozenset("The A An In On At By For From It This That He She They His Her".split())  # noqa: SIM905

Search = Callable[[str], list[dict[str, Any]]]  # a hop query -> hits (same scope and ACL)
Localize = Callable[[str, list[dict[str, Any]]], list[Evidence]]


@dataclass
class Chain:
    first: Candidate
    second: Candidate | None
    hop_evidence: list[Evidence] = field(default_factory=list)  # renumbered after the first's
    notes: list[str] = field(default_factory=list)  # one per retrieval: query, what it found
    verdict: Verdict = field(default_factory=lambda: Verdict(False, "chain_incomplete"))


def bridges(question: str, sentence: str) -> list[str]:
    """Names in ``sentence`` that the question does not say (longest first, distinct)."""
    asked = T.text_stems(question)
    out: list[str] = []
    for m in _NAME.finditer(sentence):
        name = m.group(1).strip().rstrip(".,;:")
        words = name.split()
        while words and words[0] in _OPENERS:
            words.pop(0)
        if not words:
            continue
        name = " ".join(words)
        stems = T.text_stems(name)
        if stems and not stems <= asked and name not in out and len(name) > 2:
            out.append(name)
    return sorted(out, key=lambda s: -len(s.split()))


def ordered(names: list[str], evidence: Sequence[Evidence]) -> list[str]:
    """Bridges that name a retrieved passage's subject first ("Hotride ... by the British
    electronic music trio *The Prodigy*": the passage on The Prodigy, not "British"), then the
    rest, longest first as ``bridges`` gives them."""
    subjects = [s for e in evidence if (s := subject(e))]
    return sorted(names, key=lambda b: not any(as_name(s, b) for s in subjects))


def hop_query(info: QuestionInfo, bridge: str, first: str) -> str:
    """The bridge plus the question's terms the first sentence lacks ("founded", "year")."""
    have = T.text_stems(first)
    missing = [t for t in (*info.focus, *info.constraints) if T.stem(t) not in have]
    return " ".join([bridge, *missing])


def follow(
    info: QuestionInfo,
    evidence: Sequence[Evidence],
    firsts: Sequence[Candidate],
    search: Search,
    localize: Localize,
    max_hops: int = MAX_HOPS,
    need: Sequence[str] = (),
) -> Chain | None:
    """Try bridges of the first sentences in order, up to ``max_hops`` retrievals; the chain
    that answers, or the last one tried (incomplete), or None when there was no bridge. With
    ``need``, a hop sentence must also hold one of those terms."""
    last: Chain | None = None
    base = max((e.n for e in evidence), default=0)
    seen = {e.hit.get("unit_id") for e in evidence}
    pairs = [(f, b) for f in firsts for b in ordered(bridges(info.text, f.text), evidence)[:2]]
    for first, bridge in pairs:
        # The first retrieval may already hold the second fact (another passage): every
        # bridge is looked up there before a hop is spent on any.
        others = [e for e in evidence if e.n != first.n]
        c = _second(info, first, bridge, others, need)
        if c is not None:
            note = f"bridge {bridge!r}: answered by [{c.n}] of the first retrieval"
            return Chain(first, c, [], [note], verdict(info, c.text, chain=[first.text]))
    for hops, (first, bridge) in enumerate(pairs, start=1):
        if hops > max_hops:
            if last is not None:
                last.notes.append(f"hop skipped: {max_hops} hops spent ({bridge!r})")
            return last
        query = hop_query(info, bridge, first.text)
        hits = [h for h in search(query) if h.get("unit_id") not in seen][:HOP_TOP_K]
        hop_ev = _renumber(localize(query, hits), base)
        chain = Chain(first, None, hop_ev, [f"hop {hops}: {query!r}, {len(hits)} hits"])
        if last is not None:
            chain.notes = last.notes + chain.notes
        c = _second(info, first, bridge, hop_ev, need)
        if c is not None:
            chain.second = c
            chain.verdict = verdict(info, c.text, chain=[first.text])
            chain.notes[-1] += f"; answered by [{c.n}]"
            return chain
        chain.notes[-1] += "; no sentence about it answers"
        last = chain
    return last


def _second(
    info: QuestionInfo,
    first: Candidate,
    bridge: str,
    pool: Sequence[Evidence],
    need: Sequence[str],
) -> Candidate | None:
    """The best sentence of ``pool`` about ``bridge`` that, after ``first``, answers."""
    bstems = list(T.text_stems(bridge))
    fstems = T.text_stems(first.text)
    for c in sorted((c for e in pool for c in e.candidates), key=lambda c: -c.score):
        ev = next(e for e in pool if e.n == c.n)
        # The second fact must be about the bridge: named in its sentence or passage.
        if T.weighted_coverage(bstems, T.text_stems(ev.hit["text"])) < 0.5:
            continue
        cs = T.text_stems(c.text)
        # ``need``: question terms the first sentence lacks; the second must state one.
        if need and not any(T.stem(t) in cs for t in need):
            continue
        if not cs <= fstems and verdict(info, c.text, chain=[first.text]).answers:
            return c
    return None


def _renumber(evidence: list[Evidence], base: int) -> list[Evidence]:
    """Hop passages numbered after the first retrieval's ([n] stays unique in the answer)."""
    out = []
    for ev in evidence:
        n = ev.n + base
        for c in ev.candidates:
            c.n = n
        out.append(Evidence(n, ev.hit, ev.candidates, ev.question, ev.missing_weight))
    return out
