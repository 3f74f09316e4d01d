"""What a question asks: its answer type, its focus and its constraints (D-160).

No parser or NER model installs offline, so this is rules over the question's words:

* **type**: ``person`` (who), ``date`` (when, what century), ``year`` (what year: a year, not
  any date), ``num`` (how many, what percentage),
  ``place`` (where, which city), ``org`` (which company), ``yesno`` (a question opening with an
  auxiliary: "Is", "Did", "Are ... both"), ``choice`` (which of two named options: "A or B"),
  else ``thing`` (what/which with the focus's head noun as its type) or ``other`` (why, how);
* **focus**: the noun phrase the question asks for ("the Panthers' *tackle leader*", "the
  world's *second largest oil producer*", "how many *nations*"); a possessor ("Panthers'") is a
  constraint, not focus; "the name of X" is X;
* **constraints**: the question's other content terms;
* **parts**: a compound question ("Where does ..., and how fast was ...?") split at ", and" +
  a question word; each part is analysed on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import terms as T

WH = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
AUX = frozenset(
    """is are was were be been do does did has have had can could will would should may might
    shall must""".split()  # noqa: SIM905 (a word list reads better)
)
_DET = frozenset("the a an this that these those its their his her some any".split())  # noqa: SIM905
# Words that end a noun phrase: prepositions, conjunctions, pronouns, auxiliaries.
_STOP = AUX | frozenset(
    """of in on at for from by with to into during about after before since until under over
    between against through and or but that which who whom whose where when than as it they he
    she we you i not also both first last""".split()  # noqa: SIM905
)
# Named types (what/which + noun) that fix the answer type; other nouns are ``thing``.
_NAMED: dict[str, str] = {}
for _kind, _words in {
    "year": "year years",
    "date": "century decade date month day era period season time",
    "num": "number percentage percent amount proportion share population size",
    "place": """city town country state county region province place location continent island
        river lake mountain village area district capital nation neighborhood suburb""",
    "person": """person man woman people player actor actress singer artist author writer
        director president king queen emperor leader founder composer musician scientist
        politician coach poet""",
    "org": """company organization organisation team band group university college school
        club party agency firm corporation network label airline newspaper magazine""",
}.items():
    for _w in _words.split():
        _NAMED[_w] = _kind
_WORD = re.compile(r"[\w][\w'’.-]*")
_COMPOUND = re.compile(r",?\s+and\s+(?=(?:what|which|who|whom|whose|when|where|why|how)\b)", re.I)
_JOIN = r"of|the|and|de|von|van|la|le|du|for|v\.|vs\.|&"
_CAP_RUN = rf"[A-Z0-9][\w'’.&-]*(?:\s+(?:{_JOIN}|[A-Z0-9][\w'’.&-]*))*"
_BRIDGE = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w'’-]+\s+){0,3}?(?:(?:who|that|which|where|whose|whom)\s+\w"
    r"|\w+(?:ed|en|ing)\s+(?:in|by|on|at|from|as|for|with)\b)",
    re.I,
)
_OR = re.compile(rf"({_CAP_RUN})\s*,?\s+or\s+({_CAP_RUN})")
_BOTH = re.compile(rf"({_CAP_RUN})\s+and\s+({_CAP_RUN})")


@dataclass(frozen=True)
class QuestionInfo:
    text: str
    qtype: str  # person | date | year | num | place | org | yesno | choice | thing | other
    focus: tuple[str, ...] = ()  # the asked noun phrase's terms, lower case; head last
    constraints: tuple[str, ...] = ()  # the question's other content terms
    options: tuple[str, ...] = ()  # choice / yes-no comparison: the two named sides
    parts: tuple[str, ...] = field(default=())  # compound: each part's text (empty otherwise)
    # The focus is a definite description ("who was *the world's second largest oil
    # producer*"): the answer's sentence must state it. Otherwise ("what *role* does ...",
    # "how many *seats*") the focus names the answer's kind, which a sentence need not repeat.
    described: bool = False

    @property
    def bridge(self) -> bool:
        """Phrased as a bridge: a described entity the question does not name ("the university
        *where* X was a professor", "the company *that* is headquartered in ...")."""
        return bool(_BRIDGE.search(self.text))

    @property
    def head(self) -> str | None:
        return self.focus[-1] if self.focus else None

    @property
    def focus_terms(self) -> tuple[str, ...]:
        """The focus a sentence must state: a definite description's words, without a head
        that only names the asked type ("the *leader*": the type check stands for it)."""
        if not self.described:
            return ()
        h = self.head
        if h is not None and (h in _NAMED or h.rstrip("s") in _NAMED):
            return self.focus[:-1]
        return self.focus

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"type": self.qtype, "focus": " ".join(self.focus)}
        if self.options:
            out["options"] = list(self.options)
        if self.parts:
            out["parts"] = list(self.parts)
        return out


def split_compound(question: str) -> list[str]:
    """The parts of a compound question (one part when it is not one)."""
    parts = [p.strip(" ,?") for p in _COMPOUND.split(question) if p.strip(" ,?")]
    return [p + "?" for p in parts] if len(parts) > 1 else [question]


def analyze(question: str) -> QuestionInfo:
    parts = split_compound(question)
    info = _analyze_one(parts[0] if len(parts) > 1 else question)
    if len(parts) > 1:
        return QuestionInfo(
            question,
            info.qtype,
            info.focus,
            info.constraints,
            info.options,
            tuple(parts),
            info.described,
        )
    return info


def _analyze_one(question: str) -> QuestionInfo:
    words = _WORD.findall(question)
    low = [w.lower() for w in words]
    content = T.question_terms(question)
    opts = _options(question)
    wh_at = next((i for i, w in enumerate(low) if w in WH), None)
    if low and low[0] in AUX and (wh_at is None or wh_at > 2):
        # "Did A or B have more members?" asks for one of the two, not yes or no.
        yn = "choice" if opts and _OR.search(question) else "yesno"
        return _info(question, yn, (), content, opts)
    if wh_at is None:
        return _info(question, "other", (), content, ())
    wh = low[wh_at]
    nxt = low[wh_at + 1] if wh_at + 1 < len(low) else ""
    if wh == "how":
        if nxt in ("many", "much"):
            return _info(question, "num", _phrase(words, low, wh_at + 2)[-1:], content, ())
        if nxt in ("long", "old", "far", "large", "big", "tall", "high", "fast", "often"):
            return _info(question, "num", (), content, ())
        return _info(question, "other", (), content, ())
    if wh == "why":
        return _info(question, "other", (), content, ())
    if wh == "when":
        return _info(question, "date", (), content, ())
    if wh == "where":
        return _info(question, "place", (), content, ())
    described = False  # "who was the X": a definite description the answer must fit
    if wh in ("what", "which") and nxt and nxt not in AUX and nxt not in _DET:
        focus = _phrase(words, low, wh_at + 1)  # "which company", "what South Korean girl group"
    else:
        at = _skip(low, wh_at + 1)  # "who was the X", "what is the X"
        det = any(w in _DET for w in low[wh_at + 1 : at])
        be = any(w in ("is", "are", "was", "were") for w in low[wh_at + 1 : at])
        # "What did Luther translate?": past the auxiliary comes the subject, not the focus;
        # "Who sang ...?": a verb, not a noun phrase.
        subject = not det and at < len(words) and words[at][:1].isupper()
        focus = () if subject or at == wh_at + 1 else _phrase(words, low, at)
        described = bool(focus) and be and det
    if opts and wh in ("which", "who", "what") and _OR.search(question):
        # "A and B are both ... of which type?" asks what they share, not which of the two.
        return _info(question, "choice", focus, content, opts)
    kind = _NAMED.get(focus[-1]) if focus else None
    if kind is None and focus and focus[-1].endswith("s"):
        kind = _NAMED.get(focus[-1][:-1])
    if wh in ("who", "whom", "whose"):
        kind = kind if kind in ("org", "place") else "person"
    qtype = kind or ("thing" if focus else "other")
    return _info(question, qtype, focus, content, (), described)


def _info(
    question: str,
    qtype: str,
    focus: tuple[str, ...],
    content: list[str],
    opts: tuple[str, ...],
    described: bool = False,
) -> QuestionInfo:
    fs = {T.stem(f) for f in focus}
    rest = tuple(t for t in content if T.stem(t) not in fs)
    return QuestionInfo(question, qtype, focus, rest, opts, described=described)


def _skip(low: list[str], i: int) -> int:
    """Past auxiliaries and determiners: "who was the" -> the noun phrase's first word."""
    while i < len(low) and (low[i] in AUX or low[i] in _DET):
        i += 1
    return i


def _phrase(words: list[str], low: list[str], i: int) -> tuple[str, ...]:
    """The noun phrase from word ``i``: up to a stop word or a participle; a possessor
    ("world's") is dropped; "name of the X" and "type of X" continue to X."""
    out: list[str] = []
    while i < len(low):
        w = low[i]
        if w in _STOP or w in T.QUESTION_WORDS and w not in ("name", "type", "kind"):
            if w == "of" and out and out[-1] in ("name", "type", "kind", "names", "types"):
                out.clear()
                i = _skip(low, i + 1)
                continue
            break
        if out and (w.endswith("ed") or w.endswith("ing")) and len(w) > 4:
            break  # "girl group formed by": the participle starts a clause
        if w in _DET and out:
            if len(out) > 1:
                out.pop()  # "nations control this region": a verb sat before the determiner
            break
        if w.endswith(("'s", "’s", "'", "’")):
            out.clear()  # a possessor constrains the focus; it is not the focus
        elif w not in _DET:
            out.append(w.strip(".'’"))
        i += 1
    return tuple(dict.fromkeys(w for w in out if len(w) > 1 or w.isdigit()))


def _options(question: str) -> tuple[str, ...]:
    """The two named sides of a comparison: "A or B", or (yes/no) "A and B ... both"."""
    m = _OR.search(question)
    yes_no = question.split(maxsplit=1)[0].lower() in AUX if question.strip() else False
    if m is None and (yes_no or re.search(r"\bboth\b|\bsame\b", question, re.I)):
        # "Are A and B both ...?", "Was A and B known by ...?": a yes/no over two sides.
        m = _BOTH.search(question)
    if m is None:
        return ()
    a, b = (_trim(g) for g in m.groups())
    # "University of California, Berkeley or Syracuse University": a comma inside a name.
    head = re.search(rf"({_CAP_RUN}),\s*$", question[: m.start(1)])
    if head and head.start() > 0 and question[head.start() - 1] in " :":
        lead = _trim(head.group(1))
        if lead and len(lead.split()) > 1:
            a = f"{lead}, {a}"
    return (a, b)


def _trim(side: str) -> str:
    """Trailing lower-case glue ("of the") and a leading question word are not the name."""
    ws = side.split()
    while ws and (ws[-1].islower() or ws[-1].lower() in AUX):
        ws.pop()
    while ws and (
        ws[0].lower() in WH or ws[0].lower() in AUX or ws[0].lower() in _DET or ws[0] == "Both"
    ):
        ws.pop(0)
    return " ".join(ws)
