"""The signals behind localization and answerability (answer/terms.py, answer/answerability.py)
and the slot-swap guard of the support check (answer/slots.py)."""

from __future__ import annotations

import math

import pytest

from superchargedb.answer import answerability as A
from superchargedb.answer import terms as T
from superchargedb.answer.localize import Candidate, Evidence
from superchargedb.answer.slots import slot_swaps


def test_rarity_follows_the_vocabulary_rank() -> None:
    # frequent < less frequent < rare < outside the vocabulary (split into pieces)
    ws = [T.weight(w) for w in ("the", "national", "theory", "anthem", "cantor", "ctenophores")]
    assert ws == sorted(ws) and len(set(ws)) == len(ws)
    assert T.weight("ctenophores") > math.log(30522 - 1996)


def test_question_terms_drop_question_words() -> None:
    assert T.question_terms("Who did the National Anthem at Super Bowl 50?") == [
        "national",
        "anthem",
        "super",
        "bowl",
        "50",
    ]
    terms = T.question_terms("What was Norman Cantor's theory?")
    full = T.text_stems("Norman Cantor (2001) thought it may have been anthrax.")
    # the rare names outweigh the common word that is missing
    assert T.weighted_coverage(terms, full) > T.weighted_coverage(terms, full, weighted=False)
    assert T.missing_weight(terms, full) == pytest.approx(T.weight("theory"))


@pytest.mark.parametrize(
    ("question", "sentence", "expected"),
    [
        ("How many settlers arrived?", "Of the original 390 settlers, many had died.", True),
        ("How many settlers arrived?", "The settlers built farms in the English style.", False),
        ("When did Luther publish the Bible?", "Luther published it in 1534.", True),
        ("When did Luther publish the Bible?", "Luther published a German Bible.", False),
        ("Who led the committee?", "The committee was led by Nicholas Golovin.", True),
        ("Who led the committee?", "Committee meetings take place on weekdays.", False),
        ("What is septicemia?", "Anything at all.", True),
    ],
)
def test_answer_type_match(question: str, sentence: str, expected: bool) -> None:
    assert T.type_match(question, sentence) is expected


def _evidence(cos: float, cov: float, ranks: dict[str, int | None]) -> list[Evidence]:
    text = "The cutover took 0.8 seconds."
    c = Candidate(1, 0, len(text), text, cos, cov, cov, cov)
    hit = {"text": text, "ranks": ranks}
    return [Evidence(1, hit, [c], question="How long did the cutover take?")]


def test_answerability_orders_the_evidence() -> None:
    strong = A.decide(_evidence(0.85, 1.0, {"dense": 1, "lexical": 1}))
    weak = A.decide(_evidence(0.30, 0.0, {"dense": 9, "lexical": None}))
    assert strong.answerable and not weak.answerable
    assert strong.score > A.MIN_SCORE > weak.score
    assert weak.features["log_lexical_rank"] == pytest.approx(math.log(A.RANK_CAP))
    # the threshold is the only thing a looser rule changes
    assert A.decide(_evidence(0.30, 0.0, {}), A.Rule(min_score=-1e9)).answerable
    assert not A.decide([]).answerable
    assert A.decide([]).reason == "no evidence in scope"


def test_slot_swap_caught_and_paraphrase_kept() -> None:
    cited = "The return rate for apparel was 18%, compared with 6% for electronics."
    swaps = slot_swaps("The return rate for electronics was 18%.", [cited], cited)
    assert swaps == ["slot swap: electronics in place of apparel"]
    ok = "Apparel had a return rate of 18%, versus 6% for electronics."
    assert slot_swaps(ok, [cited], cited) == []
    cited = "A topic uses replication factor 3 with min.insync.replicas set to 2."
    bad = "Topics use replication factor 2 with min.insync.replicas set to 3."
    assert any("2 in place of 3" in s for s in slot_swaps(bad, [cited], cited))
    # a number word is the same value, not a swap
    cited = "The cluster keeps five replicas."
    assert slot_swaps("The cluster keeps 5 replicas.", [cited], cited) == []
