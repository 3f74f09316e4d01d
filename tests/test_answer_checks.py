"""POST /v1/answer answers what was asked: refusal codes, chains, compound questions, the same
checks on a model's output, and the recognized question in the response (issue 21).

A tiny corpus makes the answerability model sure of nearly anything (every hit ranks first), so
the tests of what a failing check does run with ``answer_check_min_score=1e9`` (every failing
check refuses); the calibrated bar is tested on its own."""

from __future__ import annotations

import json

import pytest

from conftest import add_principal, auth, make_service
from fake_openai import answer_client

NEAR = [
    # The store has the topic, not the fact (the examples, reworded).
    "Brazil is the second-largest global producer of soybeans, after the United States.",
    "Oil production in the Gulf grew quickly after 1950, led by national companies.",
    "Luther's translation of the Bible into German made it accessible to ordinary people.",
    "The Panthers' defense forced four fumbles; Thomas Davis recovered one in the third quarter.",
]
CHAIN_FIRST = "Ivan Petrov was a professor of physics at Moscow State University."
CHAIN_SECOND = "Moscow State University was founded in 1755 by Mikhail Lomonosov."
KEYNOTE = [
    "The keynote demos the failover live on the main stage in Hall B.",
    "During the Q3 game day the failover cutover took 0.8 seconds end to end.",
]


STRICT = {"answer_providers": "", "answer_check_min_score": 1e9}


def units(texts, **extra):
    return [{"text": t, "doc_id": f"d{i}", **extra} for i, t in enumerate(texts)]


def ask(c, q, top_k=3, **extra):
    r = c.post("/v1/answer", headers=auth("aegis_sk_alice"), json={"q": q, "top_k": top_k, **extra})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(
    ("q", "code"),
    [
        ("Who was the world's second largest oil producer?", "focus_missing"),
        ("When was Luther's translation of the Bible into German published?", "type_mismatch"),
        ("How many fumbles did Thomas Davis recover in the final quarter?", None),
    ],
)
def test_near_miss_is_refused_with_a_code(tmp_path, embedder, fake, q, code):
    # Hops off: a hop tried for a name in the near miss would make the code chain_incomplete.
    with answer_client(
        tmp_path / "d", embedder, fake, units(NEAR), answer_max_hops=0, **STRICT
    ) as c:
        a = ask(c, q)["answer"]
    assert a["question"]["type"] in ("person", "date", "num")
    if code is None:  # "one" in the third quarter is a number: it answers (wrongly scoped)
        return
    assert a["refused"] is True, a["text"]
    assert a["refusal_code"] == code, a["refusal_reason"]
    assert a["refusal_reason"]
    assert a["citations"] == [] and a["sentences"] == []


def test_a_sure_answer_that_fails_the_check_is_kept_and_flagged(tmp_path, embedder, fake):
    """At the calibrated bar a very sure near miss is answered, and says it does not answer."""
    with answer_client(tmp_path / "d", embedder, fake, units(NEAR), answer_providers="") as c:
        out = ask(c, "Who was the world's second largest oil producer?")
    a = out["answer"]
    if a["refused"]:  # not sure enough: then it is refused for what the check found
        assert a["refusal_code"] in ("focus_missing", "chain_incomplete")
        return
    assert a["signals"]["answerability"] >= 2.0
    assert a["sentences"][0]["answers_question"] is False


def test_refusal_out_of_scope_is_no_evidence(tmp_path, embedder, fake):
    with answer_client(tmp_path / "d", embedder, fake, units(NEAR), answer_providers="") as c:
        a = ask(c, "What is the airspeed velocity of an unladen swallow?")["answer"]
    assert a["refused"] and a["refusal_code"] == "no_evidence"


def test_answer_exposes_question_type_focus_and_answers_question(tmp_path, embedder, fake):
    texts = ["The council has 51 seats and meets in the old town hall.", *NEAR]
    with answer_client(tmp_path / "d", embedder, fake, units(texts), answer_providers="") as c:
        a = ask(c, "How many seats does the council have?")["answer"]
    assert a["refused"] is False and "51" in a["text"]
    assert a["question"] == {"type": "num", "focus": "seats"}
    assert a["sentences"] and all(s["answers_question"] is True for s in a["sentences"])


def test_bridge_question_chains_a_second_retrieval_and_cites_both_hops(tmp_path, embedder, fake):
    texts = [CHAIN_FIRST, CHAIN_SECOND, *NEAR]
    q = "In what year was the university where Ivan Petrov was a professor founded?"
    with answer_client(tmp_path / "d", embedder, fake, units(texts), **STRICT) as c:
        out = ask(c, q, top_k=1)  # the first retrieval holds only the first hop
        assert [h["text"] for h in out["hits"]] == [CHAIN_FIRST]
        a = out["answer"]
        assert a["refused"] is False, a.get("refusal_reason")
        assert "1755" in a["text"] and "[1]" in a["text"] and "[2]" in a["text"]
        assert [s["citations"] for s in a["sentences"]] == [[1], [2]]
        assert len(a["citations"]) == 2
        hop = next(s for s in out["trace"]["stages"] if s["stage"] == "hop")
        assert "Moscow State University" in hop["detail"] and "answered by" in hop["detail"]
        # Hops off: the same question is refused as a chain it could not complete.
    with answer_client(
        tmp_path / "e", embedder, fake, units(texts), answer_max_hops=0, **STRICT
    ) as c:
        a = ask(c, q, top_k=1)["answer"]
        assert a["refused"] and a["refusal_code"] == "type_mismatch"


def test_the_hop_sees_only_what_the_principal_may_read(tmp_path, embedder):
    s = make_service(tmp_path / "d", embedder, **STRICT)
    try:
        k_all = auth(
            add_principal(s, "w", perms=["read", "write"], scopes=["t"], groups=["g", "secret"])
        )
        k_some = auth(add_principal(s, "r", perms=["read"], scopes=["t"], groups=["g"]))
        p = s.authenticate(k_all["Authorization"])
        s.ingest(
            p,
            {
                "units": [
                    {"text": CHAIN_FIRST, "doc_id": "a", "acl_groups": ["g"]},
                    {"text": CHAIN_SECOND, "doc_id": "b", "acl_groups": ["secret"]},
                ]
            },
        )
        q = "In what year was the university where Ivan Petrov was a professor founded?"
        body = {"q": q, "top_k": 1}
        ok = s.answer(s.authenticate(k_all["Authorization"]), body, None, None)
        assert "1755" in ok["answer"]["text"]
        s.cache.clear()
        no = s.answer(s.authenticate(k_some["Authorization"]), body, None, None)
        assert no["answer"]["refused"] and no["answer"]["refusal_code"] == "chain_incomplete"
        dumped = json.dumps(no)
        assert "1755" not in dumped and "Lomonosov" not in dumped
    finally:
        s.close()


def test_compound_question_answers_each_part(tmp_path, embedder, fake):
    q = "Where does the keynote demo the failover, and how fast was the cutover?"
    with answer_client(tmp_path / "d", embedder, fake, units(KEYNOTE), answer_providers="") as c:
        a = ask(c, q)["answer"]
    assert a["refused"] is False
    assert "Hall B" in a["text"] and "0.8 seconds" in a["text"]
    assert len(a["sentences"]) == 2 and a.get("unanswered_parts") in (None, [])
    assert a["question"]["parts"] == [
        "Where does the keynote demo the failover?",
        "how fast was the cutover?",
    ]


def test_compound_question_names_the_unanswered_part(tmp_path, embedder, fake):
    q = "How fast was the failover cutover, and how many engineers were on call?"
    with answer_client(tmp_path / "d", embedder, fake, units(KEYNOTE), **STRICT) as c:
        a = ask(c, q)["answer"]
    assert a["refused"] is False and "0.8 seconds" in a["text"], a
    assert a["unanswered_parts"] == ["how many engineers were on call?"]


def test_model_answering_from_the_wrong_passage_is_dropped(tmp_path, embedder, fake):
    """The model quotes a supported sentence that does not state the asked thing."""
    texts = ["The council has 51 seats and meets in the old town hall.", *NEAR]
    with answer_client(tmp_path / "d", embedder, fake, units(texts)) as c:
        fake.reply = "The council meets in the old town hall [1]."
        a = ask(c, "How many seats does the council have?")["answer"]
    assert any(d["reason"].startswith("type_mismatch") for d in a["dropped"]), a["dropped"]
    assert "51" in a["text"]  # the extractive fallback answers instead


def test_model_answer_to_a_near_miss_is_refused(tmp_path, embedder, fake):
    with answer_client(
        tmp_path / "d", embedder, fake, units(NEAR), answer_check_min_score=1e9
    ) as c:
        fake.reply = "Brazil is the second-largest global producer of soybeans [1]."
        a = ask(c, "Who was the world's second largest oil producer?")["answer"]
    # Refused before the model runs (a hop for "Brazil" found nothing that answers either).
    assert a["refused"] is True and a["refusal_code"] in ("focus_missing", "chain_incomplete")
    assert "Brazil" not in a["text"] and fake.requests == []


def test_streaming_emits_only_an_answered_chain(tmp_path, embedder, fake):
    texts = [CHAIN_FIRST, CHAIN_SECOND, *NEAR]
    q = "In what year was the university where Ivan Petrov was a professor founded?"
    with answer_client(tmp_path / "d", embedder, fake, units(texts), **STRICT) as c:
        r = c.post(
            "/v1/answer",
            headers=auth("aegis_sk_alice"),
            json={"q": q, "top_k": 1, "stream": True},
        )
    events = [b.split("\n") for b in r.text.strip().split("\n\n")]
    names = [e[0].removeprefix("event: ") for e in events]
    sentences = [json.loads(e[1].removeprefix("data: ")) for e in events if "sentence" in e[0]]
    # Both hops arrive, and the first sentence is only sent once the chain answered.
    assert names[:1] == ["sentence"] and names[-1] == "final"
    assert [s["citations"] for s in sentences] == [[1], [2]]


COMPARE = [
    "Purbanchal University was established in 1993 by the government of Nepal.",
    "The University of New South Wales was established in 1949 in Sydney.",
    "Scott Derrickson is an American director, screenwriter and producer.",
    "Ed Wood was an American filmmaker, actor and writer.",
    "Bong Joon-ho is a South Korean film director and screenwriter.",
]


@pytest.mark.parametrize(
    ("q", "lead"),
    [
        (
            "Which university was established first, University of New South Wales or"
            " Purbanchal University?",
            "University of New South Wales.",
        ),
        ("Were Scott Derrickson and Ed Wood of the same nationality?", "Yes."),
        ("Were Scott Derrickson and Bong Joon-ho of the same nationality?", "No."),
    ],
)
def test_comparison_and_yes_no_lead_names_the_choice_and_cites_both(
    tmp_path, embedder, fake, q, lead
):
    with answer_client(tmp_path / "d", embedder, fake, units(COMPARE), answer_providers="") as c:
        a = ask(c, q, top_k=2)["answer"]
    assert a["refused"] is False, a.get("refusal_reason")
    first = a["sentences"][0]
    assert first["text"] == lead and len(first["citations"]) == 2
    assert len(a["sentences"]) == 3 and a["text"].startswith(lead[:-1])
