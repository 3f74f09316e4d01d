"""Scoring OCR words against FUNSD's gold word boxes (``bench/funsd_forms.py``; issue 22).

Gold: ``gt/<id>.words.tsv`` (text and pixel box of every annotated word). Hypothesis: the words
of a form's Units (their word tables, ``GET /v1/units/{id}?words=true``), with boxes in the
image's pixels. Both sides are normalised by ``ocr_score.norm`` (NFKC, typographic quotes and
dashes folded, leaders dropped) and casefolded, then cut into the compared items, in one of
three modes:

- ``tokens`` (the headline): every maximal run of letters and digits is an item, as in the ISRI
  OCR evaluation's word accuracy. FUNSD's annotators cut ``PRE-SELL``, ``104/22`` or
  ``614-466-5087`` at the punctuation on some forms and not on others, and Tesseract keeps them
  whole; cutting both sides at every non-alphanumeric character makes the score about reading,
  not about where a word ends. An item's box is its share of its word's box, cut across in
  proportion to the characters before and after it (the same on both sides).
- ``words``: whitespace words with punctuation stripped from both ends.
- ``strict``: whitespace words as they are (case and punctuation kept).

Items with no letter or digit are never scored (FUNSD annotates ``:``, ``-`` and checkbox marks
as words; a form's rules and specks are no evidence either way).

- **Bag of words** (per form, summed over forms): matched = the multiset intersection of gold
  and hypothesis keys; precision = matched / hypothesis words, recall = matched / gold words.
- **Position-aware**: a hypothesis word matches a gold word with the same key and IoU >= 0.5,
  one to one (greedy by IoU); precision / recall / F1 the same way.
- **Centre in a Unit box**: the share of gold words whose box centre lies inside the box of a
  Unit (its Locator's ``box``) whose text holds the word's key as a word.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.ocr_score import iou_matrix, norm

ALNUM = re.compile(r"[^\W_]")
EDGE = re.compile(r"^[^\w]+|[^\w]+$")

Box = tuple[float, float, float, float]


MODES = ("tokens", "words", "strict")
TOKEN = re.compile(r"[^\W_]+")


def key(text: str, strict: bool = False) -> str:
    """A whitespace word as compared in ``words`` (or ``strict``) mode ('' when not scored)."""
    t = norm(text)
    if not ALNUM.search(t):
        return ""
    return t if strict else EDGE.sub("", t.casefold())


def items(text: str, box: Box, mode: str = "tokens") -> list[tuple[str, Box]]:
    """The compared items of one word and their boxes (module docstring)."""
    if mode != "tokens":
        k = key(text, strict=mode == "strict")
        return [(k, box)] if k else []
    t = norm(text).casefold()
    n = max(1, len(t))
    x0, y0, x1, y1 = box
    out = []
    for m in TOKEN.finditer(t):
        a = x0 + (x1 - x0) * m.start() / n
        b = x0 + (x1 - x0) * m.end() / n
        out.append((m.group(), (a, y0, b, y1)))
    return out


def unit_keys(text: str, mode: str = "tokens") -> set[str]:
    return {k for t in text.split() for k, _ in items(t, (0, 0, 1, 1), mode)}


def read_gold(tsv: Path) -> list[tuple[str, Box]]:
    out = []
    with tsv.open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            box = (float(row["x0"]), float(row["y0"]), float(row["x1"]), float(row["y1"]))
            out.append((row["text"], box))
    return out


@dataclass
class Tally:
    gold: int = 0
    hyp: int = 0
    bag: int = 0
    pos: int = 0
    centred: int = 0
    extra: Counter[str] = field(default_factory=Counter)  # hypothesis keys matching no gold
    missed: Counter[str] = field(default_factory=Counter)  # gold keys matching nothing

    def add(self, other: Tally) -> None:
        self.gold += other.gold
        self.hyp += other.hyp
        self.bag += other.bag
        self.pos += other.pos
        self.centred += other.centred
        self.extra.update(other.extra)
        self.missed.update(other.missed)

    def summary(self) -> dict[str, float | int]:
        def prf(m: int) -> tuple[float, float, float]:
            p = m / self.hyp if self.hyp else 0.0
            r = m / self.gold if self.gold else 0.0
            return p, r, (2 * p * r / (p + r) if p + r else 0.0)

        bp, br, bf = prf(self.bag)
        pp, pr, pf = prf(self.pos)
        return {
            "gold_words": self.gold,
            "ocr_words": self.hyp,
            "bag_precision": round(bp, 4),
            "bag_recall": round(br, 4),
            "bag_f1": round(bf, 4),
            "pos_precision": round(pp, 4),
            "pos_recall": round(pr, 4),
            "pos_f1": round(pf, 4),
            "centre_in_unit_box": round(self.centred / self.gold, 4) if self.gold else 0.0,
        }


def score_form(
    gold: Sequence[tuple[str, Box]],
    hyp: Sequence[tuple[str, Box]],
    units: Sequence[tuple[str, Box]] = (),
    mode: str = "tokens",
) -> Tally:
    """One form: gold words, hypothesis words and the Units (text, box)."""
    g = [it for t, b in gold for it in items(t, b, mode)]
    h = [it for t, b in hyp for it in items(t, b, mode)]
    t = Tally(gold=len(g), hyp=len(h))
    gc, hc = Counter(k for k, _ in g), Counter(k for k, _ in h)
    t.bag = sum((gc & hc).values())
    t.extra, t.missed = hc - gc, gc - hc
    if g and h:
        iou = iou_matrix(np.array([b for _, b in g]), np.array([b for _, b in h]))
        same = np.array([[gk == hk for hk, _ in h] for gk, _ in g])
        iou = np.where(same & (iou >= 0.5), iou, 0.0)
        used_g, used_h = set(), set()
        pairs = sorted(zip(*np.nonzero(iou), strict=True), key=lambda ij: -iou[ij])
        for i, j in pairs:
            if i not in used_g and j not in used_h:
                used_g.add(i)
                used_h.add(j)
        t.pos = len(used_g)
    bags = [(unit_keys(text, mode), b) for text, b in units]
    for k, (x0, y0, x1, y1) in g:
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if any(k in ks and b[0] <= cx <= b[2] and b[1] <= cy <= b[3] for ks, b in bags):
            t.centred += 1
    return t
