"""Scoring OCR words against a PDF text layer (``bench/ingest_media.py``'s page OCR suite).

Ground truth: the words of ``pdftotext -bbox`` (text + pixel box, in the text layer's order).
Hypothesis: Tesseract's words with their pixel boxes. Both sides go through the same
normalisation (``norm``): Unicode NFKC (ligatures such as U+FB01 become "fi"), typographic
quotes and apostrophes to ASCII, every dash and hyphen variant to "-", control characters to
spaces, runs of three or more dots (table-of-contents leaders) dropped, whitespace collapsed.

CER (``score_page``): every ground-truth word that is not empty after normalisation is scored,
punctuation included. A ground-truth line is a run of consecutive words (text-layer order) on
one baseline going rightwards; its reference is its words joined by spaces, then normalised (so
leaders drawn as one word per dot vanish as a run). Each OCR word is assigned to the
ground-truth word its box overlaps most, as intersection over the smaller of the two boxes
(>= 0.5: a short word like "i" whose ink box is far smaller than its font box still aligns, and
both halves of a split word land on the word they came from); the hypothesis of a line is its
assigned OCR words left to right, joined by spaces, normalised. CER = sum of character edit
distances (Levenshtein, spaces included) / reference characters. A missed word costs its
characters and a space, a split or merged word one space, an OCR word inside a text line that
the text layer lacks (such as dots read as "eee") its characters. OCR words overlapping no
ground-truth word (text inside screenshots and figures, which the text layer lacks) are not
charged; they are counted as ``unaligned_ocr_chars``.

Word-box recall: the share of ground-truth words with a letter or digit whose best-IoU OCR word
has IoU >= 0.5 (and, for the stricter figure, the same normalised text).

Suspect ground truth (``suspect_words``), flagged by general checks, never by page: a word with
no ink in its box on the page image (text the PDF does not draw), a word with control characters
(a font whose text layer is not Unicode), a word whose box lies mostly inside a longer word's
box (text drawn twice, in pieces). ``cer_verified`` leaves those words out; the headline CER
does not.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Any

import numpy as np

ALNUM = re.compile(r"[^\W_]")
FOLD = str.maketrans(
    {c: "'" for c in "\u2018\u2019\u201a\u201b\u2032\u00b4`"}
    | {c: '"' for c in "\u201c\u201d\u201e\u201f\u2033"}
    | {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d\u00ad"}
)
LEADERS = re.compile(r"(?:\. ?){3,}")
CATEGORIES = ("missing", "extra", "confusion", "case", "space", "punctuation")


def norm(text: str) -> str:
    """The normalisation applied to both sides before any comparison."""
    text = unicodedata.normalize("NFKC", text).translate(FOLD)
    text = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)
    return " ".join(LEADERS.sub(" ", text).split())


def levenshtein(ref: list[Any] | str, hyp: list[Any] | str) -> int:
    """Edit distance, one numpy row at a time (insertions by a running minimum)."""
    if not ref or not hyp:
        return max(len(ref), len(hyp))
    vocab: dict[Any, int] = {}
    r = np.array([vocab.setdefault(x, len(vocab)) for x in ref])
    h = np.array([vocab.setdefault(x, len(vocab)) for x in hyp])
    idx = np.arange(len(h) + 1)
    row = idx.copy()
    for i in range(1, len(r) + 1):
        cand = np.empty_like(row)
        cand[0] = i
        cand[1:] = np.minimum(row[:-1] + (h != r[i - 1]), row[1:] + 1)
        row = np.minimum.accumulate(cand - idx) + idx
    return int(row[-1])


def edit_ops(ref: str, hyp: str) -> list[tuple[str, str]]:
    """One minimal alignment's edits as (ref char or "", hyp char or "")."""
    n, m = len(ref), len(hyp)
    d = np.zeros((n + 1, m + 1), dtype=np.int32)
    d[:, 0], d[0, :] = np.arange(n + 1), np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(
                d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1])
            )
    ops, i, j = [], n, m
    while i or j:
        if i and j and d[i, j] == d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]):
            if ref[i - 1] != hyp[j - 1]:
                ops.append((ref[i - 1], hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i and d[i, j] == d[i - 1, j] + 1:
            ops.append((ref[i - 1], ""))
            i -= 1
        else:
            ops.append(("", hyp[j - 1]))
            j -= 1
    return ops[::-1]


def category(a: str, b: str) -> str:
    """The kind of one character edit (see ``CATEGORIES``)."""
    if " " in (a, b):
        return "space"
    if (a and not ALNUM.match(a)) or (b and not ALNUM.match(b)):
        return "punctuation"
    if not b:
        return "missing"
    if not a:
        return "extra"
    return "case" if a.lower() == b.lower() else "confusion"


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    inter, area_a, area_b = overlaps(a, b)
    return inter / (area_a[:, None] + area_b[None, :] - inter + 1e-9)


def overlaps(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairwise intersection areas of two box arrays (x0, y0, x1, y1) and their own areas."""
    ix = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    iy = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(ix, 0, None) * np.clip(iy, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter, area_a, area_b


def gt_lines(boxes: np.ndarray) -> list[list[int]]:
    """Runs of consecutive words (text-layer order) sharing a baseline band, going rightwards."""
    lines: list[list[int]] = []
    for i, b in enumerate(boxes):
        if lines:
            p = boxes[lines[-1][-1]]
            shared = min(b[3], p[3]) - max(b[1], p[1])
            if shared >= 0.5 * min(b[3] - b[1], p[3] - p[1]) and b[0] >= p[0]:
                lines[-1].append(i)
                continue
        lines.append([i])
    return lines


def suspect_words(texts: list[str], boxes: np.ndarray, gray: np.ndarray) -> dict[int, str]:
    """Ground-truth words the page image cannot confirm: index -> reason."""
    out: dict[int, str] = {}
    if not texts:
        return out
    inter, area, _ = overlaps(boxes, boxes)
    inside = inter / np.maximum(area[:, None], 1e-9)  # share of word i inside word j
    size = np.array([len(t) for t in texts])
    longer = size[None, :] > size[:, None]  # word j is longer than word i
    for i, t in enumerate(texts):
        x0, y0, x1, y1 = (int(round(v)) for v in boxes[i])
        patch = gray[max(0, y0) : y1 + 1, max(0, x0) : x1 + 1]
        if patch.size == 0 or int(patch.max()) - int(patch.min()) < 40:
            out[i] = "no_ink"
        elif any(unicodedata.category(c) == "Cc" for c in t):
            out[i] = "control_chars"
        elif ((inside[i] > 0.5) & longer[i]).any():
            out[i] = "duplicate"
    return out


def score_page(
    gt_text: list[str],
    gt_boxes: np.ndarray,
    ocr_text: list[str],
    ocr_boxes: np.ndarray,
    skip: set[int] | frozenset[int] = frozenset(),
) -> tuple[Counter[str], list[dict[str, Any]]]:
    """Counters (chars, edits, words, hits, same, unaligned_ocr_chars, one per error category)
    and the lines with edits. ``skip``: ground-truth word indexes left out of the scoring."""
    gt_boxes, ocr_boxes = gt_boxes.reshape(-1, 4), ocr_boxes.reshape(-1, 4)
    ref_words = [norm(t) for t in gt_text]
    keep = [i for i, t in enumerate(ref_words) if t and i not in skip]
    wordy = [i for i in keep if ALNUM.search(ref_words[i])]
    hyp_words = [norm(t) for t in ocr_text]
    live = [j for j, t in enumerate(hyp_words) if t]
    c: Counter[str] = Counter({k: 0 for k in ("chars", "edits", "words", "hits", "same")})
    assigned: dict[int, list[int]] = {}
    if keep and live:
        g, o = gt_boxes[keep], ocr_boxes[live]
        inter, ag, ao = overlaps(g, o)
        share = inter / np.maximum(np.minimum(ag[:, None], ao[None, :]), 1e-9)
        owner = share.argmax(axis=0)
        for col, j in enumerate(live):
            if share[owner[col], col] >= 0.5:
                assigned.setdefault(keep[int(owner[col])], []).append(j)
            else:
                c["unaligned_ocr_chars"] += len(hyp_words[j])
    else:
        c["unaligned_ocr_chars"] += sum(len(hyp_words[j]) for j in live)
    if wordy and live:
        iou = iou_matrix(gt_boxes[wordy], ocr_boxes[live])
        best = iou.argmax(axis=1)
        for row, i in enumerate(wordy):
            if iou[row, best[row]] >= 0.5:
                c["hits"] += 1
                c["same"] += int(hyp_words[live[int(best[row])]] == ref_words[i])
    c["words"] = len(wordy)
    kept, bad_lines = set(keep), []
    for line in gt_lines(gt_boxes):
        words = [i for i in line if i in kept]
        if not words:
            continue
        # Joined first, then normalised: leaders drawn as one word per dot are one run.
        ref = norm(" ".join(gt_text[i] for i in words))
        js = sorted({j for i in words for j in assigned.get(i, [])}, key=lambda j: ocr_boxes[j][0])
        hyp = norm(" ".join(ocr_text[j] for j in js))
        edits = levenshtein(ref, hyp)
        c["chars"] += len(ref)
        c["edits"] += edits
        if edits:
            for x, y in edit_ops(ref, hyp):
                c[category(x, y)] += 1
            bad_lines.append({"edits": edits, "ref": ref, "hyp": hyp})
    return c, bad_lines


def score_page_v1(
    gt_text: list[str], gt: np.ndarray, ocr_text: list[str], ocr: np.ndarray
) -> dict[str, int]:
    """The first metric, kept for comparison: each raw GT word with a letter or digit against
    its best-IoU OCR word (IoU >= 0.3, else all its characters wrong), no normalisation, spaces
    not counted. It charges a split word for the missing half, a word like "i" whose ink box is
    much smaller than its font box in full, and "ﬁ" against "fi"."""
    keep = [i for i, t in enumerate(gt_text) if re.search(r"\w", t)]
    texts, gt = [gt_text[i] for i in keep], gt.reshape(-1, 4)[keep]
    out = {"chars": sum(len(t) for t in texts)}
    out["char_errors"] = out["chars"]
    if not texts or not len(ocr):
        return out
    iou = iou_matrix(gt, ocr.reshape(-1, 4))
    best = iou.argmax(axis=1)
    errors = 0
    for i, t in enumerate(texts):
        j = int(best[i])
        errors += levenshtein(t, ocr_text[j]) if iou[i, j] >= 0.3 else len(t)
    out["char_errors"] = errors
    return out
