"""Recognized words -> utterance Units at the grain of speech (D-170).

Words (``[text, start_s, end_s, prob, segment]``) are grouped at the recognizer's segment
boundaries, at sentence ends and at pauses, and a group over ``MAX_UTTERANCE_S`` is split at its
best word gap. Whisper's word times are only roughly right (a word often starts 0.2-0.5 s before
its timestamp), so the edges are then set on the signal: between two Units the cut is the
quietest 10 ms frame between the one's last word and the other's first, and each edge walks
outwards from its word over voiced frames (within ``VOICED_DB`` of the file's loudest) up to that
cut, so no voiced audio is left between Units and no word is cut. The outer edges of the first and
last Unit walk at most ``EXTEND_S``. Each Unit keeps its words (char span in its text, times).
"""

from __future__ import annotations

import math
import wave
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..types import Locator
from .derive_base import Derived

MAX_UTTERANCE_S = 15.0
PAUSE_S = 0.7  # a silence this long starts a new utterance
FRAME_S = 0.01
SMOOTH_FRAMES = 5  # 50 ms
VOICED_DB = 35.0  # below the file's peak frame energy: still voice (or room tone next to it)
QUIET_DB = 30.0  # below the peak: a pause (stricter, so room tone between sentences is one)
BRIDGE_S = 0.15  # an edge walks over quieter dips shorter than this
EXTEND_S = 1.0  # how far the outer edges may walk beyond their words
QUIET_PAUSE_S = 0.3  # a quiet run this long after a clause's punctuation starts a new utterance
SENTENCE_END = (".", "?", "!")
CLAUSE_END = (",", ";", ":", *SENTENCE_END)
ABBREVIATIONS = frozenset(
    [
        "mr.",
        "mrs.",
        "ms.",
        "dr.",
        "st.",
        "vs.",
        "etc.",
        "prof.",
        "sr.",
        "jr.",
        "e.g.",
        "i.e.",
        "no.",
    ]
)


def t_fragment(ms: int) -> str:
    """The one ``#t=`` form (D-171): the start in seconds, up to three decimals (``#t=767.25``)."""
    return f"#t={ms / 1000:.3f}".rstrip("0").rstrip(".")


def envelope(wav: Path) -> np.ndarray:
    """Per 10 ms frame of a 16-bit mono WAV: RMS smoothed over 50 ms, in dB below the peak."""
    rms: list[np.ndarray] = []
    with wave.open(str(wav), "rb") as w:
        hop = int(w.getframerate() * FRAME_S)
        block = hop * 6000  # one minute at a time: a 4 h file is never in memory at once
        while True:
            raw = w.readframes(block)
            if not raw:
                break
            x = np.frombuffer(raw, dtype=np.int16).astype(np.float32)
            n = len(x) // hop
            if n:
                rms.append(np.sqrt((x[: n * hop].reshape(n, hop) ** 2).mean(axis=1)))
    if not rms:
        return np.zeros(0, dtype=np.float32)
    e = np.concatenate(rms)
    e = np.convolve(e, np.ones(SMOOTH_FRAMES) / SMOOTH_FRAMES, mode="same")
    peak = float(e.max())
    if peak <= 0:
        return np.full(len(e), -200.0, dtype=np.float32)
    return (20 * np.log10(np.maximum(e, peak * 1e-10) / peak)).astype(np.float32)


def ends_sentence(word: str) -> bool:
    w = word.strip()
    return w.endswith(SENTENCE_END) and w.lower() not in ABBREVIATIONS


def group_words(words: list[list[Any]], sig: Signal | None = None) -> list[list[list[Any]]]:
    """Break at segment boundaries, sentence ends and pauses; then split groups too long.

    A pause is Whisper's gap between two words (``PAUSE_S``) or, measured on the signal, a quiet
    run between their middles: ``QUIET_PAUSE_S`` after a clause's punctuation, ``PAUSE_S`` / 2
    anywhere (Whisper runs two sentences said 0.4 s apart into one segment)."""
    groups: list[list[list[Any]]] = []
    for w in words:
        if groups:
            last = groups[-1][-1]
            same_segment = len(w) < 5 or len(last) < 5 or w[4] == last[4]
            quiet = sig.quiet_run((last[1] + last[2]) / 2, (w[1] + w[2]) / 2) if sig else 0.0
            clause = str(last[0]).rstrip().endswith(CLAUSE_END)
            pause = (
                w[1] - last[2] >= PAUSE_S
                or quiet >= PAUSE_S / 2
                or (clause and quiet >= QUIET_PAUSE_S)
            )
            if same_segment and not ends_sentence(str(last[0])) and not pause:
                groups[-1].append(w)
                continue
        groups.append([w])
    return [piece for g in groups for piece in split_long(g)]


def split_long(g: list[list[Any]]) -> list[list[list[Any]]]:
    """Split a group over ``MAX_UTTERANCE_S`` at its widest word gap (a clause end counting as
    0.2 s more), keeping the first piece within the cap and not under a third of it."""
    out: list[list[list[Any]]] = []
    while g and g[-1][2] - g[0][1] > MAX_UTTERANCE_S and len(g) > 1:
        t0 = g[0][1]
        fits = [i for i in range(1, len(g)) if g[i - 1][2] - t0 <= MAX_UTTERANCE_S] or [1]
        wide = [i for i in fits if g[i - 1][2] - t0 >= MAX_UTTERANCE_S / 3] or fits

        cut = max(wide, key=partial(gap_score, g))
        out.append(g[:cut])
        g = g[cut:]
    return [*out, g] if g else out


def gap_score(g: list[list[Any]], i: int) -> float:
    """How good a cut before word ``i`` is: its pause, plus 0.2 s after a clause's end."""
    clause = str(g[i - 1][0]).rstrip().endswith(CLAUSE_END)
    return g[i][1] - g[i - 1][2] + (0.2 if clause else 0.0)


class Signal:
    """The frame envelope, with the two walks an edge makes over it."""

    def __init__(self, db: np.ndarray, duration: float) -> None:
        self.db, self.duration = db, duration
        self.voiced = db >= -VOICED_DB
        self.quiet = db < -QUIET_DB
        self.bridge = max(1, int(round(BRIDGE_S / FRAME_S)))

    def quiet_run(self, lo: float, hi: float) -> float:
        """The longest run of quiet frames in [lo, hi], in seconds."""
        a, b = max(0, int(lo / FRAME_S)), min(len(self.quiet), int(math.ceil(hi / FRAME_S)))
        if b <= a:
            return 0.0
        quiet = np.concatenate(([0], self.quiet[a:b].astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(quiet))
        return float((edges[1::2] - edges[::2]).max(initial=0)) * FRAME_S

    def quietest(self, lo: float, hi: float) -> float:
        """The centre of the quietest frame in [lo, hi] (the one nearest the middle of a tie)."""
        a, b = max(0, int(lo / FRAME_S)), min(len(self.db), int(math.ceil(hi / FRAME_S)))
        if b <= a:
            return (lo + hi) / 2
        seg = self.db[a:b]
        near = np.flatnonzero(seg <= seg.min() + 1.0)
        mid = (lo + hi) / 2 / FRAME_S - a
        best = int(near[np.argmin(np.abs(near + 0.5 - mid))])
        return min(hi, max(lo, (a + best + 0.5) * FRAME_S))

    def back(self, t: float, limit: float) -> float:
        """From ``t`` back over voiced frames (dips under BRIDGE_S bridged), not past ``limit``."""
        best, quiet = t, 0
        j = int(t / FRAME_S) - 1
        stop = max(0, int(math.ceil(limit / FRAME_S)))
        while j >= stop and quiet < self.bridge:
            if j < len(self.voiced) and self.voiced[j]:
                best, quiet = j * FRAME_S, 0
            else:
                quiet += 1
            j -= 1
        return max(limit, min(t, best))

    def forward(self, t: float, limit: float) -> float:
        best, quiet = t, 0
        j = int(t / FRAME_S)
        stop = min(len(self.voiced), int(limit / FRAME_S))
        while j < stop and quiet < self.bridge:
            if self.voiced[j]:
                best, quiet = (j + 1) * FRAME_S, 0
            else:
                quiet += 1
            j += 1
        return min(limit, max(t, best))


def place(groups: list[list[list[Any]]], sig: Signal) -> list[list[list[Any]]]:
    """Set each group's words' times on the signal (copies): the outer words take the Unit's
    edges, inner words widen over voiced frames into the gaps beside them."""
    cuts = []
    for a, b in zip(groups, groups[1:], strict=False):
        x, y = a[-1], b[0]
        lo = max(min(x[2], y[1]) - 0.15, x[1] + 0.02)
        hi = min(max(x[2], y[1]) + 0.15, y[2] - 0.02)
        cuts.append(sig.quietest(lo, hi) if hi > lo else (max(x[1], min(x[2], y[1])) + y[1]) / 2)
    out = []
    for k, g in enumerate(groups):
        lo = cuts[k - 1] if k else max(0.0, g[0][1] - EXTEND_S)
        hi = cuts[k] if k < len(cuts) else min(sig.duration, g[-1][2] + EXTEND_S)
        words = [list(w) for w in g]
        words[0][1] = sig.back(min(words[0][1], hi), lo)
        for w, nxt in zip(words, words[1:], strict=False):
            if nxt[1] > w[2]:
                nxt[1] = sig.back(nxt[1], w[2])
                w[2] = sig.forward(w[2], nxt[1])
        words[-1][2] = sig.forward(max(words[-1][2], lo), hi)
        out.append(words)
    return out


def char_spans(g: list[list[Any]]) -> tuple[str, list[tuple[int, int]]]:
    """The Unit's text (words joined, stripped) and each word's [start, end) in it."""
    raw = "".join(str(w[0]) for w in g)
    lead = len(raw) - len(raw.lstrip())
    text = raw.strip()
    spans, pos = [], 0
    for w in g:
        t = str(w[0])
        a = pos + len(t) - len(t.lstrip()) - lead
        b = max(a, pos + len(t.rstrip()) - lead)
        spans.append((min(max(a, 0), len(text)), min(max(b, 0), len(text))))
        pos += len(t)
    return text, spans


def utterance_units(
    words: list[list[Any]], duration: float, meta: dict[str, Any], db: np.ndarray | None = None
) -> list[Derived]:
    sig = Signal(db if db is not None else np.zeros(0, dtype=np.float32), duration)
    end_cap = int(math.ceil(duration * 1000))
    units = []
    for g in place(group_words(words, sig), sig):
        text, spans = char_spans(g)
        if not text:
            continue
        t0 = max(0, int(g[0][1] * 1000))
        t1 = max(t0 + 1, min(end_cap, int(math.ceil(g[-1][2] * 1000))))
        table = [
            {
                "start": a,
                "end": b,
                "t_start_ms": min(t1, max(t0, int(round(w[1] * 1000)))),
                "t_end_ms": min(t1, max(t0, int(round(w[2] * 1000)))),
                "conf": round(float(w[3]), 3),
            }
            for w, (a, b) in zip(g, spans, strict=True)
            if b > a
        ]
        conf = round(sum(float(w[3]) for w in g) / len(g), 3)
        units.append(
            Derived(
                text=text,
                modality="utterance",
                plane="audio",
                locator=Locator(kind="time_range", t_start_ms=t0, t_end_ms=t1),
                fragment=t_fragment(t0),
                meta={**meta, "confidence": conf, "unit_words": table},
            )
        )
    return units
