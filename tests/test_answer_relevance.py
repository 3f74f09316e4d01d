"""A model sentence keeps only citations that answer the question (answer/relevance.py)."""

from __future__ import annotations

import pytest

from conftest import ALICE
from fake_openai import answer_client
from superchargedb.answer.localize import Localizer
from superchargedb.answer.relevance import RELEVANCE_CUT, focus, relevance
from superchargedb.answer.verify import LexicalDenseChecker

RUNBOOK = (
    "During the Q3 game day the failover cutover took 0.8 seconds end to end. "
    "The primary region was drained before traffic moved to the standby region."
)
POSTMORTEM = (
    "The Q3 game day review found that the failover cutover took 0.8 seconds. "
    "It lists three follow-ups for the storage team."
)
PRICING = "The team plan costs 49 dollars per seat per month with annual billing."
QUESTION = "How long did the failover cutover take during the Q3 game day?"


@pytest.fixture(scope="module")
def checker(embedder):
    return LexicalDenseChecker(embedder)


def test_relevance_is_zero_for_the_best_passage_and_off_topic_falls_below_the_cut(embedder):
    ev = Localizer(embedder).localize(QUESTION, [{"text": RUNBOOK}, {"text": PRICING}])
    rel = relevance(ev)
    assert rel[1] == 0.0
    assert rel[2] < RELEVANCE_CUT


def test_off_topic_citation_drops_the_sentence(checker):
    texts = {1: RUNBOOK, 2: PRICING}
    sentence = "The team plan costs 49 dollars per seat per month."
    support = checker.check(sentence, [PRICING], [RUNBOOK])
    assert support.supported  # true of what it cites...
    f = focus(sentence, [2], support, texts, {1: 0.0, 2: -0.6}, checker)
    assert f.passages == [] and f.support is None  # ...but it does not answer the question
    assert "does not answer the question" in f.reason and "[2]" in f.reason


def test_sibling_citations_trimmed_to_the_most_relevant_that_supports_alone(checker):
    texts = {1: POSTMORTEM, 2: RUNBOOK, 3: PRICING}
    sentence = "The cutover took 0.8 seconds."
    support = checker.check(sentence, [POSTMORTEM, RUNBOOK], [PRICING])
    assert support.supported
    f = focus(sentence, [1, 2], support, texts, {1: -0.1, 2: 0.0, 3: -0.7}, checker)
    assert f.passages == [2] and f.support is not None and f.support.supported
    assert "[1] removed: [2] supports the sentence alone" in f.reason
    # With the relevance the other way round, the other one is kept.
    f = focus(sentence, [1, 2], support, texts, {1: 0.0, 2: -0.1, 3: -0.7}, checker)
    assert f.passages == [1]


def test_a_merge_of_two_passages_keeps_both(checker):
    texts = {1: RUNBOOK, 2: PRICING}
    sentence = "The cutover took 0.8 seconds and the team plan costs 49 dollars per seat."
    support = checker.check(sentence, [RUNBOOK, PRICING])
    assert support.supported
    # Neither supports it alone (each lacks the other's number): nothing is trimmed.
    f = focus(sentence, [1, 2], support, texts, {1: 0.0, 2: -0.1}, checker)
    assert f.passages == [1, 2] and f.reason == ""
    # If one half cites an off-topic passage, what is left no longer supports it: dropped.
    f = focus(sentence, [1, 2], support, texts, {1: 0.0, 2: -0.6}, checker)
    assert f.passages == [] and "does not support it" in f.reason


@pytest.fixture
def client(tmp_path, embedder, fake):
    units = [
        {"text": t, "doc_id": d, "acl_groups": ["eng-backend"]}
        for t, d in ((RUNBOOK, "runbook"), (POSTMORTEM, "postmortem"), (PRICING, "pricing"))
    ]
    with answer_client(tmp_path / "d", embedder, fake, units) as c:
        yield c


def numbers(client) -> dict[str, int]:
    """doc_id -> the passage number [n] the model is shown (the search order)."""
    r = client.post("/v1/search", headers=ALICE, json={"q": QUESTION, "top_k": 3})
    assert r.status_code == 200, r.text
    return {h["doc_id"]: i for i, h in enumerate(r.json()["hits"], start=1)}


def ask(client) -> dict:
    r = client.post("/v1/answer", headers=ALICE, json={"q": QUESTION, "top_k": 3})
    assert r.status_code == 200, r.text
    return r.json()["answer"]


def test_model_citing_an_off_topic_passage_falls_back(client, fake):
    n = numbers(client)
    fake.reply = f"The team plan costs 49 dollars per seat per month [{n['pricing']}]."
    a = ask(client)
    assert a["extractive"] is True and "0.8 seconds" in a["text"]
    assert "49 dollars" not in a["text"]
    assert any("does not answer the question" in d["reason"] for d in a["dropped"])


def test_model_citing_siblings_keeps_one_and_says_why(client, fake):
    n = numbers(client)
    fake.reply = f"The cutover took 0.8 seconds [{n['runbook']}][{n['postmortem']}]."
    a = ask(client)
    assert a["extractive"] is False and a["provider"] == "openai:gpt-4o-mini"
    assert len(a["citations"]) == 1 and a["sentences"][0]["citations"] == [1]
    assert a["text"] == "The cutover took 0.8 seconds [1]."
    note = [d for d in a["dropped"] if "supports the sentence alone" in d["reason"]]
    assert note and note[0]["text"] == "The cutover took 0.8 seconds."
