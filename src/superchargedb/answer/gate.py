"""The answer gate: what an answer may rest on, or why it is refused (D-161 to D-164).

Fed what the pipeline already has (the question, the localized evidence, the answerability
decision) and two callables (the pipeline's own search, same scope and ACL filter, and its
localizer), it returns one of:

* a refusal with a stable code (``checks.CODES``) and a reason;
* the candidate sentence a single-fact answer rests on (the synthesizers take it from there);
* a finished extractive draft: a chain (``[1]`` the first fact, ``[2]`` the hop's) or a
  compound question's parts, each answered and cited, the unanswered ones named.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import terms as T
from .answerability import Decision, Rule, decide
from .chain import BRIDGE_COVERAGE, Chain, Localize, Search, follow
from .checks import CHECK_MIN_SCORE, verdict
from .choose import choose, ranked
from .compare import compare
from .compose import Draft, Sentence
from .cover import MAX_LINKS, chain_coverage, links, with_subjects
from .localize import Candidate, Evidence
from .question import QuestionInfo, analyze
from .support import Support

# A question the answerability model refuses is answered from a chain of two or more linked
# passages that states this share of its rarity-weighted terms, when the model's log-odds are at
# least CHAIN_FLOOR (chosen on the HotpotQA TUNE half, checked on XQuAD CALIBRATION:
# bench/answers_cover.py).
CHAIN_COVERAGE = 0.45
CHAIN_FLOOR = -2.0


@dataclass
class Gate:
    best: Candidate | None = None
    draft: Draft | None = None
    extra: list[Evidence] = field(default_factory=list)  # hop passages, numbered after the first
    code: str | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)  # the hops, for the trace
    unanswered: list[str] = field(default_factory=list)  # compound parts left unanswered
    hop_ms: float = 0.0


def quote(c: Candidate) -> Sentence:
    span = (c.start, c.end)
    return Sentence(c.text, [c.n], Support(True, 1.0), span, {c.n: span}, quoted=True)


def gate(
    info: QuestionInfo,
    evidence: list[Evidence],
    decision: Decision,
    search: Search,
    localize: Localize,
    max_hops: int,
    check_min: float | None = None,
    min_score: float | None = None,
) -> Gate:
    if decision.best is None:
        return Gate(code="no_evidence", reason=decision.reason)
    # A comparison's evidence is its two sides: each matches half of the question, so the
    # best sentence scores low; the comparison itself refuses when a side has no fact.
    two_sided = bool(info.options) and info.qtype in ("choice", "yesno")
    below = not decision.answerable and not (two_sided and decision.score >= CHAIN_FLOOR)
    if below and not _chain_answers(info, evidence, decision):
        return Gate(code="no_evidence", reason=decision.reason)
    if info.parts:
        return _compound(info, evidence, localize, min_score)
    if info.options and info.qtype in ("choice", "yesno"):
        t = time.perf_counter()
        sides = compare(info, evidence, search, localize, max_hops)
        ms = (time.perf_counter() - t) * 1000
        if sides.lead is not None:
            cites = list(dict.fromkeys(c.n for c in sides.facts))
            d = Draft(sentences=[Sentence(sides.lead, cites, Support(True, 1.0))])
            facts = list({(c.n, c.start): c for c in sides.facts}.values())
            for c in with_subjects(evidence + sides.extra, facts):
                d.sentences.append(quote(c))
            return Gate(draft=d, extra=sides.extra, notes=sides.notes, hop_ms=ms)
        return Gate(
            code="chain_incomplete",
            reason="a side of the comparison has no fact, or the facts do not decide it",
            notes=sides.notes,
            hop_ms=ms,
        )
    pick = choose(info, evidence, decision.best)
    if pick.candidate is not None:
        return _maybe_bridge(info, evidence, pick.candidate, search, localize, max_hops)
    # Sure enough to answer anyway (the sentence then says answers_question: false), unless
    # a chain answers: the best sentence may be the first hop of a bridge question.
    sure = decision.score >= (CHECK_MIN_SCORE if check_min is None else check_min)
    g = Gate(code=pick.verdict.code, reason=pick.verdict.reason)
    if sure:
        g = Gate(best=decision.best)
    if max_hops <= 0 or not info.bridge:
        return g  # hops only for bridge-phrased questions (D-162)
    t = time.perf_counter()
    chain = follow(info, evidence, ranked(evidence)[:2], search, localize, max_hops)
    g.hop_ms = (time.perf_counter() - t) * 1000
    if chain is None:
        g.notes.append("no bridge entity: no hop")
        return g
    g.notes = chain.notes
    if chain.second is None:
        if not sure:
            g.code = "chain_incomplete"
            g.reason = f"{pick.verdict.reason}; and no second retrieval stated it"
        return g
    d = Draft(sentences=[quote(c) for c in _chain_quotes(info, evidence, chain)])
    return Gate(draft=d, extra=chain.hop_evidence, notes=chain.notes, hop_ms=g.hop_ms)


def _chain_answers(info: QuestionInfo, evidence: list[Evidence], decision: Decision) -> bool:
    """A multi-hop question's evidence is a chain: each sentence matches only part of the
    question, so the best one scores low. Answerable after all when the answer's chain of
    linked passages states most of the question (D-221)."""
    if decision.best is None or decision.score < CHAIN_FLOOR:
        return False
    return chain_coverage(info, evidence, decision.best) >= CHAIN_COVERAGE


def _maybe_bridge(
    info: QuestionInfo,
    evidence: list[Evidence],
    best: Candidate,
    search: Search,
    localize: Localize,
    max_hops: int,
) -> Gate:
    """An answering sentence that leaves much of the question unsaid may be a first hop."""
    cons = list(info.constraints)
    have = T.text_stems(best.text)
    if max_hops <= 0 or not info.bridge or not cons:
        return Gate(best=best)
    if T.weighted_coverage(cons, have) >= BRIDGE_COVERAGE:
        return Gate(best=best)
    need = [t for t in cons if T.stem(t) not in have]
    t = time.perf_counter()
    chain = follow(info, evidence, [best], search, localize, max_hops, need=need)
    ms = (time.perf_counter() - t) * 1000
    if chain is None or chain.second is None:
        notes = chain.notes if chain else ["no bridge entity: no hop"]
        return Gate(best=best, notes=notes, hop_ms=ms)
    d = Draft(sentences=[quote(c) for c in _chain_quotes(info, evidence, chain)])
    return Gate(draft=d, extra=chain.hop_evidence, notes=chain.notes, hop_ms=ms)


def _chain_quotes(info: QuestionInfo, evidence: list[Evidence], chain: Chain) -> list[Candidate]:
    """A chain's two facts, the sentences linking their passages, and each passage's subject
    sentence when it needs one; grouped by passage in hop order."""
    assert chain.second is not None
    pool = evidence + chain.hop_evidence
    facts = [chain.first, chain.second]
    facts += links(info, pool, facts)[:MAX_LINKS]
    order = list(dict.fromkeys(c.n for c in facts))
    return with_subjects(pool, [c for n in order for c in facts if c.n == n])


def _compound(
    info: QuestionInfo, evidence: list[Evidence], localize: Localize, min_score: float | None
) -> Gate:
    """Each part localized over the same hits, judged answerable on its own (the same model
    and threshold) and answered by its own sentence."""
    rule = Rule() if min_score is None else Rule(min_score=min_score)
    hits = [e.hit for e in evidence]
    d = Draft()
    unanswered: list[str] = []
    used: set[tuple[int, int]] = set()
    for part in info.parts:
        part_ev = localize(part, hits)
        pd = decide(part_ev, rule)
        pick = choose(analyze(part), part_ev, pd.best) if pd.answerable and pd.best else None
        c = pick.candidate if pick else None
        if c is None:
            unanswered.append(part)
        elif (c.n, c.start) not in used:  # two parts answered by one sentence: quoted once
            d.sentences.append(quote(c))
            used.add((c.n, c.start))
    if not d.sentences:
        return Gate(code="focus_missing", reason="no part of the question is answered")
    return Gate(draft=d, unanswered=unanswered)


def annotate(answer: dict[str, Any], info: QuestionInfo) -> None:
    """The recognized question and, per sentence, whether it answers it (a UI shows both)."""
    answer["question"] = info.to_json()
    infos = [analyze(p) for p in info.parts] or [info]
    sents = answer.get("sentences") or []
    texts = [s["text"] for s in sents]
    for i, s in enumerate(sents):
        # A chain's sentences answer together: each is judged with the others as its chain.
        chain = texts[:i] + texts[i + 1 :]
        s["answers_question"] = any(
            verdict(pi, s["text"]).answers
            or verdict(pi, s["text"], chain).answers
            and len(sents) > 1
            for pi in infos
        )


def answers_nothing(info: QuestionInfo, sentence: str) -> str | None:
    """Why a model's (supported) sentence does not state what was asked, or None when it does
    (for a compound question: any of its parts)."""
    infos = [analyze(p) for p in info.parts] or [info]
    verdicts = [verdict(pi, sentence) for pi in infos]
    if any(v.answers for v in verdicts):
        return None
    v = verdicts[0]
    return f"{v.code}: {v.reason}"
