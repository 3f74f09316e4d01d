"""A model sentence's citation points at the sentence of its passage it rests on
(answer/localize.py ``sentence_span``), not only at the localizer's best sentence."""

from __future__ import annotations

import pytest

from conftest import ALICE
from fake_openai import answer_client
from superchargedb.answer.localize import Localizer, sentence_span

PLAN = "The storage migration for the billing service was planned by the platform team in March."
WINDOW = "The cutover window for the billing service migration was set for a Sunday night."
MOVED = "Engineers moved 4.2 terabytes of ledger data to the new cluster in six hours."
PASSAGE = f"{PLAN} {WINDOW} {MOVED}"
QUESTION = "How much data did the billing service migration move?"
ANSWER = "Engineers moved 4.2 terabytes of ledger data to the new cluster"


@pytest.fixture(scope="module")
def evidence(embedder):
    hit = {"text": PASSAGE, "unit_id": "u1", "doc_id": "d1"}
    return Localizer(embedder).localize(QUESTION, [hit])[0]


def test_span_follows_the_answer_terms_of_the_sentence(evidence):
    # The premise: the question's words sit in the first sentences, the answer in the last.
    assert evidence.best is not None and evidence.best.text != MOVED
    start, end = sentence_span(evidence, f"{ANSWER}.") or (0, 0)
    assert PASSAGE[start:end] == MOVED


def test_span_follows_the_answer_terms_past_a_much_better_question_match(embedder):
    # The first sentence matches the question far better (localizer score ~1.4 vs ~0.7), but
    # the claim is about the second one: its citation must point there.
    lead = "The billing service migration was led by Priya Raman."
    moved = "Engineers moved 4.2 terabytes of ledger data to the new cluster during the migration."
    passage = f"{lead} {moved}"
    hit = {"text": passage, "unit_id": "u1", "doc_id": "d1"}
    ev = Localizer(embedder).localize("Who led the billing service migration?", [hit])[0]
    assert ev.best is not None and ev.best.text == lead
    assert ev.best.score - min(c.score for c in ev.candidates) > 0.5
    span = sentence_span(ev, "Engineers moved 4.2 terabytes of ledger data to the new cluster.")
    start, end = span or (0, 0)
    assert passage[start:end] == moved


def test_span_without_answer_terms_is_the_localizers_best(evidence):
    # A sentence that only restates the question has nothing to follow.
    best = evidence.best
    assert best is not None
    assert sentence_span(evidence, "Much data for the billing service migration.") == (
        best.start,
        best.end,
    )


@pytest.fixture
def client(tmp_path, embedder, fake):
    unit = {"text": PASSAGE, "doc_id": "migration", "acl_groups": ["eng-backend"]}
    with answer_client(tmp_path / "d", embedder, fake, [unit]) as c:
        yield c


def test_model_citation_locator_is_the_sentence_it_rests_on(client, fake):
    fake.reply = f"{ANSWER} [1]."
    r = client.post("/v1/answer", headers=ALICE, json={"q": QUESTION, "top_k": 3})
    assert r.status_code == 200, r.text
    a = r.json()["answer"]
    assert a["extractive"] is False and a["provider"] == "openai:gpt-4o-mini"
    # The best sentence (the plan) holds no number for "how much": nothing is quoted after it.
    assert a["text"] == f"{ANSWER} [1]."
    assert [s["quoted"] for s in a["sentences"]] == [False]
    (c,) = a["citations"]
    loc = c["locator"]
    assert loc["kind"] == "char_span"
    assert PASSAGE[loc["start"] : loc["end"]] == MOVED


def test_extractive_citation_locator_unchanged(client, fake):
    # The extractive synthesizer pins the sentence it quotes, as before.
    fake.reply = "not a cited answer"
    r = client.post("/v1/answer", headers=ALICE, json={"q": QUESTION, "top_k": 3})
    assert r.status_code == 200, r.text
    a = r.json()["answer"]
    assert a["extractive"] is True
    (c,) = a["citations"]
    loc = c["locator"]
    quoted = PASSAGE[loc["start"] : loc["end"]]
    # One citation per passage: its span starts at the first quoted sentence and ends with the
    # last (a supporting sentence of the same passage may follow the answer's, D-220).
    texts = [st["text"] for st in a["sentences"]]
    assert quoted.startswith(texts[0]) and quoted.endswith(texts[-1])
    assert all(t in quoted for t in texts)


# -- the quoted best sentence (answer/extractive.py, quote_best) --------------------------------
LEAD = "Priya Raman led the billing migration."
MOVED_LEDGER = (
    "The billing service migration moved 4.2 terabytes of ledger data to the Oslo cluster."
)
LED_PASSAGE = f"{LEAD} {MOVED_LEDGER}"
WHO = "Who led the billing service migration?"
# A model that answers from the other sentence: supported by it, but not what was asked. It
# names something ("Oslo"), so the answer check (a name for "who") lets it through; the quote
# then shows the best sentence beside it. Without a name it is dropped (the last test).
WRONG = "The migration moved 4.2 terabytes of ledger data to the Oslo cluster"


@pytest.fixture
def led_units():
    return [{"text": LED_PASSAGE, "doc_id": "lead", "acl_groups": ["eng-backend"]}]


def _ask(client, fake, reply):
    fake.reply = reply
    r = client.post("/v1/answer", headers=ALICE, json={"q": WHO, "top_k": 3})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_model_answer_from_another_sentence_gets_the_best_one_quoted(
    tmp_path, embedder, fake, led_units
):
    with answer_client(tmp_path / "d", embedder, fake, led_units) as client:
        out = _ask(client, fake, f"{WRONG} [1].")
    a = out["answer"]
    assert a["extractive"] is False and a["provider"] == "openai:gpt-4o-mini"
    assert a["text"] == f"{WRONG} [1]. {LEAD[:-1]} [1]."
    assert [(s["text"], s["quoted"], s["citations"]) for s in a["sentences"]] == [
        (f"{WRONG}.", False, [1]),
        (LEAD, True, [1]),
    ]
    # One citation of the passage, spanning both sentences that cite it.
    (c,) = a["citations"]
    assert LED_PASSAGE[c["locator"]["start"] : c["locator"]["end"]] == LED_PASSAGE
    synth = next(s for s in out["trace"]["stages"] if s["stage"] == "synth")
    assert "quoted the best sentence" in synth["detail"]


def test_an_answer_resting_on_the_best_sentence_quotes_nothing(tmp_path, embedder, fake, led_units):
    with answer_client(tmp_path / "d", embedder, fake, led_units) as client:
        out = _ask(client, fake, "Priya Raman led the billing migration [1].")
    a = out["answer"]
    assert a["text"] == "Priya Raman led the billing migration [1]."
    assert [s["quoted"] for s in a["sentences"]] == [False]
    (c,) = a["citations"]
    assert LED_PASSAGE[c["locator"]["start"] : c["locator"]["end"]] == LEAD
    synth = next(s for s in out["trace"]["stages"] if s["stage"] == "synth")
    assert "quoted" not in synth["detail"]


def test_the_quote_can_be_switched_off(tmp_path, embedder, fake, led_units):
    with answer_client(
        tmp_path / "d", embedder, fake, led_units, answer_quote_best=False
    ) as client:
        out = _ask(client, fake, f"{WRONG} [1].")
    assert out["answer"]["text"] == f"{WRONG} [1]."


def test_a_model_answer_stating_no_name_for_who_is_dropped(tmp_path, embedder, fake, led_units):
    with answer_client(tmp_path / "d", embedder, fake, led_units) as client:
        out = _ask(client, fake, "The migration moved 4.2 terabytes of ledger data [1].")
    a = out["answer"]
    assert a["extractive"] is True and LEAD[:-1] in a["text"]
    assert any(d["reason"].startswith("type_mismatch") for d in a["dropped"]), a["dropped"]
