"""``POST /v1/answer``: retrieve -> localize -> (answerable?) -> synthesize -> cite -> verify.

The provider chain is tried in order; each failure is recorded in the ``synth`` stage detail;
the extractive synthesizer always closes the chain. An LLM's output is never returned
unchecked: markers pointing at no passage are dropped, sentences without a valid citation or
failing the support check are dropped, and if nothing survives the answer falls back to the
extractive synthesizer. Answerability is decided by the system before any model runs.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .. import locate_words
from ..readfilter import ReadFilter
from ..types import Stage, Trace
from .answerability import MIN_SCORE, Rule, decide
from .compose import Draft, build_answer, is_refusal, number, refusal, sentence_json
from .context import passages_for
from .extractive import extract, quote_best
from .gate import annotate, gate
from .llm_check import LlmCheck
from .localize import Evidence, Localizer
from .pricing import chat_cost, compute_cost
from .providers import ChatProvider, Passage, ProviderFailed, SynthOutput
from .question import QuestionInfo, analyze
from .sentences import SentenceStream
from .verify import EntailmentChecker

if TYPE_CHECKING:
    from ..models.embedder import Embedder
    from ..schemas import AegisQuery
    from ..search.hybrid import Searcher
    from ..settings import Settings

Event = tuple[str, dict[str, Any]]
Result = tuple[list[dict[str, Any]], dict[str, Any]]
# (draft or None to refuse, provider, extractive, notes, tokens, failed transiently)
Synth = tuple[Draft | None, str, bool, str, Any, bool]

# First guesses until measured (a 1.5B local model answers in ~40 s on a loaded 2-core box).
DEFAULT_ESTIMATE_MS = {"openai": 3000.0, "local": 40000.0}


class StageClock:
    """Moving averages of measured stage latencies: the budget's estimates (D-29)."""

    def __init__(self, alpha: float = 0.3) -> None:
        self.alpha = alpha
        self.ema: dict[str, float] = {}

    def observe(self, name: str, ms: float) -> None:
        old = self.ema.get(name)
        self.ema[name] = ms if old is None else old + self.alpha * (ms - old)

    def estimate(self, name: str) -> float:
        if name in self.ema:
            return self.ema[name]
        return DEFAULT_ESTIMATE_MS.get(name.split(":", 1)[0], 3000.0)


class Answerer:
    def __init__(
        self,
        settings: Settings,
        searcher: Searcher,
        embedder: Embedder,
        providers: Sequence[ChatProvider],
        checker: EntailmentChecker,
        localizer: Localizer,
        words: locate_words.WordLookup = lambda unit_ids: {},
    ) -> None:
        self.settings = settings
        self.searcher = searcher
        self.embedder = embedder
        self.providers = list(providers)
        self.checker = checker
        self.localizer = localizer
        self.words = words
        self.clock = StageClock()

    @property
    def chain_version(self) -> str:
        return "+".join([p.name for p in self.providers] + ["extractive"])

    # -- the pipeline ------------------------------------------------------------------------
    def answer(self, q: AegisQuery, rf: ReadFilter, trace: Trace, t0: float) -> Result:
        """The whole answer at once (``POST /v1/answer`` without ``stream``)."""
        run = self.run(q, rf, trace, t0, stream=False)
        while True:
            try:
                next(run)
            except StopIteration as stop:
                return stop.value

    def run(
        self, q: AegisQuery, rf: ReadFilter, trace: Trace, t0: float, *, stream: bool
    ) -> Generator[Event, None, Result]:
        """The pipeline. With ``stream``, each of a model's sentences that passes its checks is
        yielded as an ``event: sentence`` while the model still writes (D-235); what is
        yielded is always the prefix of the returned answer's ``sentences``."""
        deadline = t0 + q.budget.max_ms / 1000 if q.budget and q.budget.max_ms else None
        hits = self.searcher.run(q, rf, trace)
        n_pass = min(len(hits), self.settings.answer_passages)
        t = time.perf_counter()
        evidence = self.localizer.localize(q.q, hits[:n_pass])
        locate_words.attach(self.words, evidence)  # citations narrow to the words they rest on
        n_sent = sum(len(e.candidates) for e in evidence)
        trace.stages.append(
            Stage("localize", _ms(t), detail=f"{len(evidence)} passages, {n_sent} sentences")
        )
        floor = self.settings.answer_min_score
        decision = decide(evidence, Rule(min_score=MIN_SCORE if floor is None else floor))
        info = analyze(q.q)
        hops = self.settings.answer_max_hops
        if deadline is not None and time.perf_counter() > deadline:
            hops = 0  # a hop would only spend a budget already gone

        def hop_search(text: str) -> list[dict[str, Any]]:
            # The same search call and the same ReadFilter: a hop sees exactly what q sees.
            return self.searcher.run(q.model_copy(update={"q": text}), rf, Trace())

        g = gate(
            info,
            evidence,
            decision,
            hop_search,
            self.localizer.localize,
            hops,
            self.settings.answer_check_min_score,
            floor,
        )
        if g.notes:
            trace.stages.append(Stage("hop", g.hop_ms, detail="; ".join(g.notes)))
        if g.code is not None:
            trace.stages.append(Stage("synth", 0.0, skipped=f"unanswerable: {g.code}"))
            trace.stages.append(Stage("verify", 0.0, skipped="refused"))
            out = {**refusal(g.reason, code=g.code), "signals": decision.signals()}
            annotate(out, info)
            return hits, out
        if g.draft is not None:  # a chain or a compound question: quoted, cited hop by hop
            answer = build_answer(
                g.draft, evidence + g.extra, extractive=True, provider="extractive"
            )
            answer["signals"] = decision.signals()
            if g.unanswered:
                answer["unanswered_parts"] = g.unanswered
            annotate(answer, info)
            # A chain may rest on the first retrieval alone (no hop passages): the question
            # being compound, not the hop, tells the two apart.
            kind = "comparison" if info.options else "chain"
            if info.parts:
                kind = f"compound, {len(g.unanswered)} part(s) unanswered"
            trace.stages.append(Stage("synth", 0.0, detail=f"extractive {kind}"))
            trace.stages.append(Stage("verify", 0.0, skipped="quoted by construction"))
            return hits, answer
        assert g.best is not None
        t = time.perf_counter()
        draft, provider, extractive, detail, tokens, failed = yield from self._synthesize(
            q, evidence, g.best, trace, deadline, info, stream
        )
        synth_ms = _ms(t)
        # A provider that failed transiently (timeout, 5xx) left a fallback answer: not cached.
        synth = Stage("synth", synth_ms, detail=detail, tokens=tokens, degraded=failed)
        if draft is None:
            trace.stages.append(synth)
            trace.stages.append(Stage("verify", 0.0, skipped="refused"))
            out = refusal("the model refused and no sentence passed the support check")
            out = {**out, "signals": decision.signals()}
            annotate(out, info)
            return hits, out
        answer = build_answer(draft, evidence, extractive=extractive, provider=provider)
        answer["signals"] = decision.signals()
        annotate(answer, info)
        detail = f"{provider}; {len(answer['citations'])} citations" + (
            f"; {detail}" if detail else ""
        )
        synth.detail = detail
        trace.stages.append(synth)
        kept = len(answer["sentences"])
        trace.stages.append(
            Stage("verify", draft.verify_ms, detail=f"{kept}/{kept + len(draft.dropped)} supported")
        )
        return hits, answer

    def _synthesize(
        self,
        q: AegisQuery,
        evidence: list[Evidence],
        best: Any,
        trace: Trace,
        deadline: float | None,
        info: QuestionInfo | None = None,
        stream: bool = False,
    ) -> Generator[Event, None, Synth]:
        """Try the chain: (draft, or None to refuse; provider; extractive; notes; tokens;
        whether a provider failed transiently). Once a sentence was streamed the chain stops
        at that provider: a streamed sentence cannot be taken back (D-37)."""
        notes: list[str] = []
        failed = False
        rejected: list[dict[str, Any]] = []  # what rejected model outputs said, and why
        spent: dict[str, int] | None = None  # tokens of the models that ran, summed
        for prov in self.providers:
            passages = passages_for(evidence, getattr(prov, "context_words", None))
            why = prov.unavailable()
            if why is not None:
                notes.append(f"{prov.name} {why}")
                continue
            remaining = None if deadline is None else (deadline - time.perf_counter()) * 1000
            est = self.clock.estimate(prov.name)
            if remaining is not None and est > remaining:
                notes.append(
                    f"{prov.name} skipped: budget (est {est:.0f} ms > remaining {remaining:.0f} ms)"
                )
                continue
            budget_usd = q.budget.max_cost_usd if q.budget else None
            if budget_usd is not None and self._estimate_cost(prov, q.q, passages) > budget_usd:
                notes.append(f"{prov.name} skipped: budget (cost)")
                continue
            timeout = 60.0 if remaining is None else max(0.05, remaining / 1000)
            streaming = getattr(prov, "stream", None) if stream else None
            cut_at = self.settings.answer_relevance_cut
            check: LlmCheck | None = None
            try:
                if streaming is None:
                    out = prov.complete(q.q, passages, timeout)
                    streamed, cut = 0, None
                else:
                    check = LlmCheck(evidence, self.checker, info, cut_at)
                    out, streamed, cut = yield from self._stream(
                        streaming(q.q, passages, timeout), check
                    )
            except ProviderFailed as exc:
                notes.append(f"{prov.name} failed: {exc}")
                failed = True
                continue
            if cut is not None:  # the model broke off after a streamed sentence
                notes.append(f"{prov.name} failed after {streamed} streamed sentence(s): {cut}")
                failed = True
            self.clock.observe(prov.name, out.seconds * 1000)
            self._account(trace, prov, out)
            spent = spent or {"prompt": 0, "completion": 0}
            spent["prompt"] += out.prompt_tokens
            spent["completion"] += out.completion_tokens
            tokens = dict(spent)
            if is_refusal(out.text) and check is not None and streamed:
                # Words of a refusal after checked sentences were sent: those stand (D-37),
                # and this answer, unlike the unstreamed one, is not cached (D-235).
                notes.append(f"{prov.name} refused after {streamed} streamed sentence(s)")
                return check.finish(), prov.name, False, "; ".join(notes), tokens, True
            if is_refusal(out.text):
                # The system judged it answerable: fall back to extractive only when its best
                # sentence is supported (D-35), else refuse.
                notes.append(f"{prov.name} refused")
                draft = extract(best, evidence, info)
                if not draft.sentences:
                    return None, prov.name, False, "; ".join(notes), tokens, failed
                return draft, "extractive fallback", True, "; ".join(notes), tokens, failed
            if check is None:
                draft = LlmCheck(evidence, self.checker, info, cut_at).text(out.text)
            else:
                draft = check.finish()
            if draft.sentences:
                if self.settings.answer_quote_best and quote_best(draft, evidence):
                    notes.append("quoted the best sentence: the model answered from another")
                return draft, f"{prov.name}", False, "; ".join(notes), tokens, failed
            notes.append(f"{prov.name} rejected: no cited, supported sentence")
            rejected += draft.dropped
        draft = extract(best, evidence, info)
        draft.dropped = rejected + draft.dropped
        provider = "extractive fallback" if self.providers else "extractive"
        # A model whose output was rejected still ran: its tokens stay in the trace.
        return draft, provider, True, "; ".join(notes), spent, failed

    @staticmethod
    def _stream(
        pieces: Generator[str, None, SynthOutput], check: LlmCheck
    ) -> Generator[Event, None, tuple[SynthOutput, int, str | None]]:
        """Check a model's streamed text sentence by sentence, yielding each kept one at once:
        (the whole output, how many were streamed, why the model broke off after one or None).
        A failure before the first streamed sentence is raised, as for ``complete``."""
        split = SentenceStream()
        streamed, cut = 0, None
        t0 = time.perf_counter()
        out: SynthOutput | None = None
        try:
            while out is None:
                wait = time.perf_counter()
                try:
                    piece = next(pieces)
                except StopIteration as stop:
                    out = stop.value
                    check.waiting_ms += _ms(wait)
                    break
                except ProviderFailed as exc:
                    if not streamed:
                        raise
                    cut = str(exc)
                    break
                check.waiting_ms += _ms(wait)
                for raw in split.feed(piece):
                    if (s := check.sentence(raw)) is not None:
                        index = number(check.draft.sentences)
                        yield "sentence", {"index": streamed, **sentence_json(s, index)}
                        streamed += 1
        finally:
            pieces.close()
        if out is None:  # broke off: an unfinished last sentence is not checked
            return SynthOutput(split.buf.strip(), "", 0, 0, time.perf_counter() - t0), streamed, cut
        for raw in split.close():
            if (s := check.sentence(raw)) is not None:
                index = number(check.draft.sentences)
                yield "sentence", {"index": streamed, **sentence_json(s, index)}
                streamed += 1
        return out, streamed, cut

    def _estimate_cost(self, prov: ChatProvider, question: str, passages: list[Passage]) -> float:
        tokens = self.embedder.count_tokens(question + " ".join(p.text for p in passages))
        model = prov.name.split(":", 1)[-1]
        return chat_cost(model, tokens + 300, 200) or 0.0

    def _account(self, trace: Trace, prov: ChatProvider, out: SynthOutput) -> None:
        if prov.name.startswith("local:"):
            trace.est_cost_usd += compute_cost(out.seconds, self.settings.local_compute_usd_per_s)
        else:
            cost = chat_cost(out.model, out.prompt_tokens, out.completion_tokens)
            if cost is None:
                cost = chat_cost(
                    prov.name.split(":", 1)[-1], out.prompt_tokens, out.completion_tokens
                )
            trace.est_cost_usd += cost or 0.0
        trace.est_cost_usd = round(trace.est_cost_usd, 8)

    # -- streaming ----------------------------------------------------------------------------
    @staticmethod
    def events(final: dict[str, Any], streamed: int = 0) -> Iterator[Event]:
        """SSE events for a finished, verified answer after its first ``streamed`` sentences
        were sent: the other sentences, the citations, final. An answer made whole (cached,
        extractive) sends each citation after its first sentence; one whose sentences were
        streamed sends its citations only now, as a citation's Locator covers every sentence
        citing its passage (D-235)."""
        answer = final["answer"]
        by_index = {c["index"]: c for c in answer["citations"]}
        sent_cites: set[int] = set()
        for i, s in enumerate(answer["sentences"]):
            if i >= streamed:
                yield "sentence", {"index": i, **s}
            for c in s["citations"]:
                if c not in sent_cites and not streamed:
                    sent_cites.add(c)
                    yield "citation", by_index[c]
        if streamed:
            for c in answer["citations"]:
                yield "citation", c
        yield "final", final


def _ms(t: float) -> float:
    return (time.perf_counter() - t) * 1000
