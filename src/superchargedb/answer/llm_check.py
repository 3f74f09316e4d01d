"""A model's sentences checked one at a time (D-37): markers, support, relevance, the asked thing.

``LlmCheck.sentence`` judges one sentence of the model's output as soon as it is complete, so a
streamed answer can send it on (answer/pipeline.py); ``finish`` closes the draft. Checking a
whole text sentence by sentence gives exactly the draft the non-streaming answer always had.
"""

from __future__ import annotations

import time

from .compose import Draft, Sentence, split_markers
from .gate import answers_nothing
from .localize import Evidence, sentence_span
from .question import QuestionInfo
from .relevance import RELEVANCE_CUT, focus, relevance
from .sentences import sentence_texts
from .verify import EntailmentChecker


class LlmCheck:
    def __init__(
        self,
        evidence: list[Evidence],
        checker: EntailmentChecker,
        info: QuestionInfo | None,
        relevance_cut: float | None,
    ) -> None:
        self.t = time.perf_counter()
        self.by_n = {ev.n: ev.hit["text"] for ev in evidence}
        self.ev_of = {ev.n: ev for ev in evidence}
        self.checker = checker
        self.info = info
        prime = getattr(checker, "prime", None)
        if prime is not None:  # embed every passage sentence in one batch, once
            prime(list(self.by_n.values()))
        self.rel = relevance(evidence)
        self.cut = RELEVANCE_CUT if relevance_cut is None else relevance_cut
        self.draft = Draft()
        self.waiting_ms = 0.0  # time spent waiting for the model between sentences

    def sentence(self, raw: str) -> Sentence | None:
        """Check one sentence of the model's output; the kept Sentence, or None (dropped)."""
        draft, by_n = self.draft, self.by_n
        clean, nums = split_markers(raw)
        if not clean:
            return None
        if not any(ch.isalnum() for ch in clean):
            # A stray quote or bracket with a marker (the local model once answered '" [1]')
            # claims nothing; the support check has nothing to refute, so it must not pass.
            draft.dropped.append({"text": clean, "reason": "no content"})
            return None
        valid = [n for n in dict.fromkeys(nums) if n in by_n]
        bad = [n for n in nums if n not in by_n]
        if bad:
            draft.dropped.append(
                {"text": clean, "reason": f"marker(s) {bad} point at no passage", "kind": "marker"}
            )
        if not valid:
            draft.dropped.append({"text": clean, "reason": "no valid citation"})
            return None
        cited = [by_n[n] for n in valid]
        others = [v for n, v in by_n.items() if n not in valid]
        support = self.checker.check(clean, cited, others)
        if not support.supported:
            draft.dropped.append({"text": clean, "reason": "; ".join(support.reasons)})
            return None
        f = focus(clean, valid, support, by_n, self.rel, self.checker, self.cut)
        if f.support is None:
            draft.dropped.append({"text": clean, "reason": f.reason})
            return None
        miss = answers_nothing(self.info, clean) if self.info is not None else None
        if miss is not None:  # supported, but not what was asked (D-163)
            draft.dropped.append({"text": clean, "reason": miss})
            return None
        if f.reason:  # a note on a kept sentence: which [n] went, and why
            draft.dropped.append({"text": clean, "reason": f.reason})
        # Each citation points at the sentence of its passage this one rests on.
        spans = {n: sp for n in f.passages if (sp := sentence_span(self.ev_of[n], clean))}
        s = Sentence(clean, f.passages, f.support, spans=spans)
        draft.sentences.append(s)
        return s

    def text(self, text: str) -> Draft:
        """Check a whole output at once (a provider that does not stream)."""
        for raw in sentence_texts(text):
            self.sentence(raw)
        return self.finish()

    def finish(self) -> Draft:
        draft = self.draft
        kept = {s.text for s in draft.sentences}
        # A dropped marker on a kept sentence is reported but is not a dropped sentence.
        draft.dropped = [
            d for d in draft.dropped if d.get("kind") != "marker" or d["text"] not in kept
        ] + [
            {"text": d["text"], "reason": d["reason"]}
            for d in draft.dropped
            if d.get("kind") == "marker" and d["text"] in kept
        ]
        draft.verify_ms = max(0.0, (time.perf_counter() - self.t) * 1000 - self.waiting_ms)
        return draft
