"""An answer's supporting facts: each fact the question names, cited where it is stated (D-220).

A multi-hop question names more than one fact ("Bobby Godsell held a senior position in which
global company that was formed in 2004?"): the sentence holding the answer ("It was formed in
2004 by the merger of AngloGold and the Ashanti Goldfields Corporation.") states only one of
them. Quoting it alone gives an answer the reader cannot check (which company? and what has it
to do with Godsell?), and cites one hop of two. So the extractive answer also quotes:

* **the passages named**: the best sentence of each retrieved passage whose subject the
  question names, and of each whose subject a quoted sentence names (a bridge), when that
  sentence states a question term besides the subject's own words;
* **the supporting facts**: sentences that state question terms the quoted ones do not
  (greedily, each adding at least ``GAIN_MIN`` of the question's rarity weight from a linked
  passage, ``GAIN_SAME`` from one already quoted); passages link only through their subjects
  (the question or the other passage names it); at most ``MAX_FACTS`` sentences in all;
* **the subject's sentence**: a quoted sentence of a titled passage (a Unit whose text opens
  with a ``# heading``) that does not name the passage's subject ("It was formed in 2004 ...")
  brings the passage's sentence that does ("AngloGold Ashanti Limited is a global gold mining
  company."), so each quoted fact says what it is about;
* **the links**: a quoted passage that nothing else quoted names brings the sentence of another
  retrieved passage naming it (``links``), so the chain has no gap (D-258).

Every added sentence is quoted verbatim from the passage it cites (supported by construction).
The chain reads in hop order: the passages the question names first, then the others as they
joined (the answer's, then the bridges its sentences name).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import terms as T
from .localize import Candidate, Evidence
from .question import QuestionInfo

# Chosen on the HotpotQA TUNE half (bench/answers_cover.py); the XQuAD CALIBRATION half checks
# that single-passage answers do not grow (a fact must come from a linked passage there too).
GAIN_MIN = 0.1  # a sentence of another (linked) passage
GAIN_SAME = 0.05  # a sentence of a passage already quoted
BRIDGES = True  # the passages a quoted sentence names (below)
NAMED = True  # the passages the question names
MAX_FACTS = 3  # quoted sentences of a covered answer (the subject's sentences not counted)
LINKS = True  # the sentences that join a quoted passage to the chain (below)
MAX_LINKS = 2  # link sentences, beyond MAX_FACTS


_DEFINES = re.compile(r"\(born\b|\b(?:is|was|are|were) (?:a|an|the)\b")


def subject(ev: Evidence) -> str:
    """The passage's subject: its Markdown heading, without a qualifier in parentheses or
    after a comma ("# Sholto Douglas, 1st Baron Douglas of Kirtleside" -> "Sholto Douglas";
    "# The Strain (TV series)" -> "The Strain"), else ''."""
    text = ev.hit.get("text") or ""
    if not text.startswith("#"):
        return ""
    first = text.split("\n", 1)[0].lstrip("#").strip()
    main = re.sub(r"\s*\([^)]*\)", "", first).split(",")[0].strip()
    return main if len(main) > 1 else ""


def _names(name: str, stems: frozenset[str]) -> bool:
    words = T.question_terms(name) or [w.lower() for w in name.split() if len(w) > 1]
    return bool(words) and T.weighted_coverage(words, stems) >= 0.99


def naming_sentence(ev: Evidence, c: Candidate) -> Candidate | None:
    """The sentence of ``c``'s titled passage that names its subject, when ``c`` does not."""
    subj = subject(ev)
    if not subj or as_name(subj, c.text):
        return None
    # A sentence naming the subject as written, else one holding all its words.
    others = sorted((x for x in ev.candidates if x is not c), key=lambda x: x.start)
    for other in others:
        if as_name(subj, other.text):
            return other
    if _names(subj, T.text_stems(c.text)):
        return None
    for other in others:
        if _names(subj, T.text_stems(other.text)):
            return other
    # A subject known by another form of its name ("# Ricky Rubio": "Ricard Rubio i Vives
    # (born October 21, 1990) is a Spanish professional basketball player"): the sentence
    # that defines something by the subject's last name word.
    last = subj.split()[-1]
    if _DEFINES.search(c.text) and last in c.text:
        return None
    for other in others:
        if last in other.text and _DEFINES.search(other.text):
            return other
    return None


def linked(a: Evidence, b: Evidence, question: str) -> bool:
    """``b`` is about something the question or ``a`` is about: the question names ``b``'s
    subject, or one passage names the other's. Only titled passages link: a name shared by two
    untitled passages (siblings of one article, on XQuAD) joined facts about different
    things, and cost citation precision (bench/answers_cover.py)."""
    sa, sb = T.text_stems(a.hit.get("text") or ""), T.text_stems(b.hit.get("text") or "")
    ta, tb = subject(a), subject(b)
    if tb and _names(tb, T.text_stems(question)):
        return True
    return bool((ta and _names(ta, sb)) or (tb and _names(tb, sa)))


def supporting(
    info: QuestionInfo,
    evidence: Sequence[Evidence],
    answer: Candidate,
    chosen: Sequence[Candidate] = (),
) -> list[Candidate]:
    """The answer's sentences (``chosen``, else ``answer``) with their supporting facts and
    subjects' sentences, in reading order."""
    gain_min, gain_same, max_facts = GAIN_MIN, GAIN_SAME, MAX_FACTS  # read at call (the bench)
    by_n = {e.n: e for e in evidence}
    facts = list(chosen) or [answer]
    terms = T.question_terms(info.text)
    covered: set[str] = set()
    for c in facts:
        covered |= T.text_stems(c.text)
    if BRIDGES:
        for c in _bridged(info, evidence, facts)[: max(0, max_facts - len(facts))]:
            facts.append(c)
            covered |= T.text_stems(c.text)
    if NAMED:
        for c in _named(info, evidence, facts)[: max(0, max_facts - len(facts))]:
            facts.append(c)
            covered |= T.text_stems(c.text)
    while len(facts) < max_facts and terms:
        now = T.weighted_coverage(terms, frozenset(covered))
        best: tuple[float, Candidate] | None = None
        passages = {c.n for c in facts}
        for ev in evidence:
            if ev.n not in passages and not any(linked(by_n[n], ev, info.text) for n in passages):
                continue
            bar = gain_same if ev.n in passages else gain_min
            for c in ev.candidates:
                if c in facts:
                    continue
                gain = T.weighted_coverage(terms, frozenset(covered | T.text_stems(c.text))) - now
                if gain >= bar and (best is None or gain > best[0]):
                    best = (gain, c)
        if best is None:
            break
        facts.append(best[1])
        covered |= T.text_stems(best[1].text)
    if BRIDGES and len(facts) < max_facts:  # a sentence the greedy step added may name one
        facts += _bridged(info, evidence, facts)[: max_facts - len(facts)]
    if LINKS:
        facts += links(info, evidence, facts)[:MAX_LINKS]
    # Hop order: the passages the question names first (the chain starts from what the
    # question says), then the others as they joined: the answer's, then its bridges.
    asked = T.text_stems(info.text)
    joined = list(dict.fromkeys(c.n for c in facts))
    order = sorted(joined, key=lambda n: (not _names(subject(by_n[n]), asked), joined.index(n)))
    return with_subjects(evidence, [c for n in order for c in facts if c.n == n])


def _bridged(
    info: QuestionInfo, evidence: Sequence[Evidence], facts: Sequence[Candidate]
) -> list[Candidate]:
    """The best sentence of each retrieved passage whose subject a quoted sentence names as a
    name and the question does not (a bridge: "He grew up in *Hibbing*, Minnesota" -> the
    passage on Hibbing holds the county)."""
    asked = T.text_stems(info.text)
    quoted = {c.n for c in facts}
    out = []
    for ev in evidence:
        subj = subject(ev)
        if ev.n in quoted or not subj or not ev.candidates or _names(subj, asked):
            continue
        if any(as_name(subj, c.text) for c in facts):
            best = ev.best
            # Named as written by a quoted sentence: the hop itself, whatever its best
            # sentence says ("The league is for players aged 16–21." states no question
            # term but is the answer; requiring one lost 1.2 points of evidence cited on
            # the HotpotQA TUNE half, D-259).
            if best is not None:
                out.append(best)
    return out


def links(
    info: QuestionInfo, evidence: Sequence[Evidence], facts: Sequence[Candidate]
) -> list[Candidate]:
    """The sentences that join each quoted passage to the chain: for a quoted titled passage
    the question does not name and no quoted sentence of another passage names, the
    best-scoring sentence of another retrieved passage that names its subject as written
    ("Her eldest daughter ... was the wife of *Frederick VI of Denmark*" joins the passage on
    Frederick VI to the one on Princess Louise; "Many which use *Pop Goes the Weasel* ..."
    joins the rhyme to the jack-in-the-box the question asks about). Without it the chain has
    a gap: the reader sees two facts and not what ties them. On the HotpotQA TUNE half, taking
    the link from any retrieved passage rather than only a quoted one or one the question
    names cited every evidence sentence 2 points more often at the same precision (D-258)."""
    asked = T.text_stems(info.text)
    quoted = {c.n for c in facts}
    out: list[Candidate] = []
    for ev in evidence:
        subj = subject(ev)
        if ev.n not in quoted or not subj or _names(subj, asked):
            continue
        if any(c.n != ev.n and as_name(subj, c.text) for c in [*facts, *out]):
            continue
        best: Candidate | None = None
        for other in evidence:
            if other.n == ev.n:
                continue
            for c in other.candidates:
                if c in facts or c in out or not as_name(subj, c.text):
                    continue
                if best is None or c.score > best.score:
                    best = c
        if best is not None:
            out.append(best)
    return out


def as_name(subj: str, text: str) -> bool:
    """``text`` names ``subj`` as written ("Money" the magazine, not "money")."""
    bare = subj[4:] if subj.startswith("The ") else subj
    return bare in text


def _adds(info: QuestionInfo, subj: str, c: Candidate) -> bool:
    """``c`` states a question term besides its subject's own words: a fact about what was
    asked, not only the subject's description ("Hong Kong is the world's fourth most densely
    populated territory" for a question set in Hong Kong)."""
    own = T.text_stems(subj)
    cs = T.text_stems(c.text)
    return any(T.stem(t) in cs and T.stem(t) not in own for t in T.question_terms(info.text))


def _named(
    info: QuestionInfo, evidence: Sequence[Evidence], facts: Sequence[Candidate]
) -> list[Candidate]:
    """The best sentence of each retrieved passage whose subject the question names (a fact
    the question rests on: "... the *Bart the Fink* episode of *The Simpsons* ...")."""
    asked = T.text_stems(info.text)
    quoted = {c.n for c in facts}
    return [
        best
        for ev in evidence
        if ev.n not in quoted
        and (subj := subject(ev))
        and _names(subj, asked)
        and (best := ev.best) is not None
        and _adds(info, subj, best)
    ]


def with_subjects(evidence: Sequence[Evidence], quoted: Sequence[Candidate]) -> list[Candidate]:
    """``quoted`` (grouped by passage, in order) with each titled passage's subject sentence
    first in its group when a sentence of the group does not name the subject."""
    by_n = {e.n: e for e in evidence}
    out: list[Candidate] = []
    for n in dict.fromkeys(c.n for c in quoted):
        group = [c for c in quoted if c.n == n]
        ev = by_n.get(n)
        names = [x for c in group if ev is not None and (x := naming_sentence(ev, c))]
        if names:
            group = [names[0], *(c for c in group if c != names[0])]
        out += [c for c in group if c not in out]
    return out


def chain_coverage(info: QuestionInfo, evidence: Sequence[Evidence], answer: Candidate) -> float:
    """The rarity-weighted share of the question's terms the answer's chain states, when the
    chain spans two passages or more (0.0 for a single passage)."""
    facts = supporting(info, evidence, answer)
    if len({c.n for c in facts}) < 2:
        return 0.0
    stems: set[str] = set()
    for c in facts:
        stems |= T.text_stems(c.text)
    return T.weighted_coverage(T.question_terms(info.text), frozenset(stems))
