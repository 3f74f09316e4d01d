"""Answer sentences, their citations and the final ``answer`` object (D-32, D-33).

``answer.text`` holds only cited, supported sentences; ``sentences[]`` describes exactly those;
``dropped[]`` lists what was removed and why; a refusal has no citations and faithfulness 0.
Citation indexes are renumbered 1..k in order of first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .localize import Evidence, pin_locator
from .support import Support

MARKER = re.compile(r"\[(\d{1,3})\]")
REFUSAL_TEXT = "The sources you can access do not contain an answer to this question."
_REFUSAL_CUES = re.compile(
    r"\b(cannot|can't|can not|unable to) (answer|determine|find)|"
    r"\b(do|does) not (contain|mention|provide|say|include)|\bno information\b|"
    r"\bnot (enough|sufficient) information\b",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL_CUES.search(text)) and len(text) < 400


@dataclass
class Sentence:
    text: str  # without markers
    passages: list[int]  # passage numbers n it cites
    support: Support
    span: tuple[int, int] | None = None  # localized span in its passage (extractive)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)  # per cited passage (model)
    quoted: bool = False  # a verbatim sentence of its passage (extractive), not a model's


@dataclass
class Draft:
    sentences: list[Sentence] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    verify_ms: float = 0.0  # time spent checking a model's sentences


def split_markers(sentence: str) -> tuple[str, list[int]]:
    nums = [int(m) for m in MARKER.findall(sentence)]
    clean = MARKER.sub("", sentence)
    clean = re.sub(r"\s+([.,;:!?])", r"\1", clean)
    return re.sub(r"\s{2,}", " ", clean).strip(), nums


def number(sentences: list[Sentence]) -> dict[int, int]:
    """Citation indexes: passage n -> 1..k in order of first use (stable as sentences append)."""
    order: list[int] = []
    for s in sentences:
        for n in s.passages:
            if n not in order:
                order.append(n)
    return {n: i for i, n in enumerate(order, start=1)}


def sentence_json(s: Sentence, index: dict[int, int]) -> dict[str, Any]:
    """One entry of ``answer.sentences`` (and of a streamed ``event: sentence``)."""
    return {
        "text": s.text,
        "citations": [index[n] for n in s.passages],
        "supported": s.support.supported,
        "support_score": round(s.support.score, 4),
        "quoted": s.quoted,
    }


def build_answer(
    draft: Draft, evidence: list[Evidence], *, extractive: bool, provider: str
) -> dict[str, Any]:
    by_n = {ev.n: ev for ev in evidence}
    index = number(draft.sentences)
    order = list(index)
    parts, sentences = [], []
    for s in draft.sentences:
        marks = "".join(f"[{index[n]}]" for n in s.passages)
        body = s.text.rstrip()
        if body and body[-1] in ".!?":
            parts.append(f"{body[:-1]} {marks}{body[-1]}")
        else:
            parts.append(f"{body} {marks}")
        sentences.append(sentence_json(s, index))
    citations = []
    for n in order:
        ev = by_n[n]
        hit = ev.hit
        cands = [
            sp
            for s in draft.sentences
            if n in s.passages and (sp := s.spans.get(n, s.span)) is not None
        ]
        best = ev.best
        # One citation per passage: its span covers every sentence of the answer citing it.
        if cands:
            span: tuple[int, int] | None = (min(a for a, _ in cands), max(b for _, b in cands))
        else:
            span = (best.start, best.end) if best else None
        loc = pin_locator(hit, *span, words=ev.words) if span else hit.get("locator")
        citations.append(
            {
                "index": index[n],
                "unit_id": hit["unit_id"],
                "source_uri": hit["source_uri"],
                "locator": loc,
            }
        )
    n_sent = len(sentences)
    return {
        "text": " ".join(parts),
        "citations": citations,
        "nli_faithfulness": 1.0 if n_sent else 0.0,
        "extractive": extractive,
        "provider": provider,
        "refused": False,
        "sentences": sentences,
        "dropped": draft.dropped,
    }


def refusal(
    reason: str, dropped: list[dict[str, Any]] | None = None, code: str = "no_evidence"
) -> dict[str, Any]:
    """A refusal; ``code`` is one of ``checks.CODES`` (a stable name for a UI)."""
    return {
        "text": REFUSAL_TEXT,
        "citations": [],
        "nli_faithfulness": 0.0,
        "extractive": True,
        "provider": "refusal",
        "refused": True,
        "refusal_reason": reason,
        "refusal_code": code,
        "sentences": [],
        "dropped": dropped or [],
    }
