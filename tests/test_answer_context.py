"""What a synthesis model reads (answer/context.py): passages cut to their best sentences."""

from __future__ import annotations

from conftest import make_service
from fake_openai import FakeOpenAI
from superchargedb.answer.context import GAP, passages_for
from superchargedb.answer.localize import Localizer

LONG = (
    "The harbour museum opened in 1911 in a former customs house. "
    "Its collection grew through donations from shipping families. "
    "The lighthouse lens on the top floor was made in Paris in 1874. "
    "School groups visit on weekday mornings. "
    "The cafe on the ground floor serves fish soup. "
    "A storm in 1953 flooded the basement archive."
)
OTHER = (
    "The city library holds 40,000 maps. Its reading room closes at 18:00. "
    "Members may borrow six items at once."
)
QUESTION = "Where was the lighthouse lens made?"


def test_cut_keeps_the_best_sentence_in_order_with_gaps(embedder):
    ev = Localizer(embedder).localize(QUESTION, [{"text": LONG}, {"text": OTHER}])
    whole = passages_for(ev, None)
    assert [p.text for p in whole] == [LONG, OTHER]
    assert passages_for(ev, 0) == whole

    cut = passages_for(ev, 20)  # 10 per passage, raised to the 40-word floor
    assert [p.n for p in cut] == [1, 2]
    first = cut[0].text
    assert "The lighthouse lens on the top floor was made in Paris in 1874." in first
    assert len(first.split()) < len(LONG.split())
    # Sentences keep their order; what was left out is marked, never silently joined.
    kept = [s for s in first.split(f" {GAP} ") if s and s != GAP]
    positions = [LONG.find(s.removeprefix(f"{GAP} ").removesuffix(f" {GAP}")) for s in kept]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    assert GAP in first
    # A short passage that fits whole is passed whole, without gap marks.
    assert cut[1].text == OTHER


def test_a_single_best_sentence_longer_than_the_budget_is_kept_whole(embedder):
    long_sentence = "The lens " + "was polished by hand and " * 30 + "made in Paris."
    ev = Localizer(embedder).localize(QUESTION, [{"text": long_sentence}])
    cut = passages_for(ev, 10)
    assert cut[0].text == long_sentence


def test_openai_provider_reads_cut_passages_but_support_uses_the_whole(tmp_path, embedder):
    """With ``SCDB_OPENAI_CONTEXT_WORDS`` the model is sent each passage's best sentences; a
    sentence it cites from a part it was not sent is still checked against the whole Unit."""
    with FakeOpenAI() as fake:
        svc = make_service(
            tmp_path / "d",
            embedder,
            openai_base_url=fake.url,
            openai_api_key="sk-t",
            openai_context_words=30,
        )
        try:
            from superchargedb.demo import seed_principals

            seed_principals(svc)
            alice = svc.authenticate("Bearer aegis_sk_alice")
            svc.ingest(alice, {"units": [{"text": LONG, "doc_id": "museum"}]})
            fake.reply = "The lighthouse lens was made in Paris in 1874 [1]."
            out = svc.answer(alice, {"q": QUESTION, "top_k": 1})
            a = out["answer"]
            assert a["provider"].startswith("openai:") and a["refused"] is False
            assert a["text"] == "The lighthouse lens was made in Paris in 1874 [1]."
            sent = fake.requests[-1]["body"]["messages"][1]["content"]
            assert "made in Paris in 1874" in sent
            assert "fish soup" not in sent and GAP in sent
            # Verification is against the whole Unit: a true sentence from outside the cut
            # (the model could only know it from elsewhere, but it is in the cited Unit) passes;
            # a false one does not.
            # (Asked so that the sentence answers it: one that does not is dropped anyway.)
            storm = "When did a storm flood the basement archive?"
            fake.reply = "A storm in 1953 flooded the basement archive [1]."
            a = svc.answer(alice, {"q": storm, "top_k": 1})["answer"]
            assert a["provider"].startswith("openai:"), a
            fake.reply = "A storm in 1962 flooded the basement archive [1]."
            a = svc.answer(alice, {"q": storm + " ", "top_k": 1})["answer"]
            assert a["extractive"] is True
            assert any("1962" in d["text"] for d in a["dropped"])
        finally:
            svc.close()
