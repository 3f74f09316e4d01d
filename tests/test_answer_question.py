"""Question type and focus recognition, the answer check and bridge names: pure functions."""

from __future__ import annotations

import pytest

from superchargedb.answer.chain import bridges, hop_query
from superchargedb.answer.checks import CODES, verdict
from superchargedb.answer.question import analyze, split_compound


@pytest.mark.parametrize(
    ("q", "qtype", "focus"),
    [
        ("Who was the Panthers' tackle leader for 2015?", "person", ("tackle", "leader")),
        (
            "Who was the world's second largest oil producer?",
            "person",
            ("second", "largest", "oil", "producer"),
        ),
        ("When were some of Luther's best-known works published?", "date", ()),
        ("How many nations control this region in total?", "num", ("nations",)),
        ("What year did the regiment begin?", "year", ("year",)),
        ("In what year was the university founded?", "year", ("year",)),
        ("What century did the regiment begin?", "date", ("century",)),
        ("Which company bought the studio in 1998?", "org", ("company",)),
        ("What is the name of the river that flows through Paris?", "place", ("river",)),
        ("What did Luther translate?", "other", ()),
        ("Is the cutover faster than one second?", "yesno", ()),
        ("Where does the keynote demo the failover?", "place", ()),
    ],
)
def test_type_and_focus(q, qtype, focus):
    info = analyze(q)
    assert (info.qtype, info.focus) == (qtype, focus)


def test_possessor_is_a_constraint_and_named_type_is_not_focus():
    info = analyze("Who was the Panthers' tackle leader for 2015?")
    assert "panthers" in info.constraints and "2015" in info.constraints
    # "leader" names the asked type (a person): the sentence must say "tackle", not "leader".
    assert info.focus_terms == ("tackle",)
    assert analyze("What year did the regiment begin?").focus_terms == ()


def test_choice_and_yes_no_options():
    c = analyze(
        "Which University, University of New South Wales or Purbanchal University was"
        " established first ?"
    )
    assert c.qtype == "choice"
    assert c.options == ("University of New South Wales", "Purbanchal University")
    y = analyze("Are Random House Tower and 888 7th Avenue both used for real estate?")
    assert y.qtype == "yesno" and y.options == ("Random House Tower", "888 7th Avenue")


def test_compound_question_is_split_at_and_plus_a_question_word():
    q = "Where does the keynote demo the failover, and how fast was the cutover?"
    assert split_compound(q) == [
        "Where does the keynote demo the failover?",
        "how fast was the cutover?",
    ]
    assert analyze(q).parts == tuple(split_compound(q))
    assert split_compound("Who founded Acme and Initech?") == ["Who founded Acme and Initech?"]


@pytest.mark.parametrize(
    ("q", "sentence", "code"),
    [
        # The near misses: topic without the fact.
        (
            "Who was the world's second largest oil producer?",
            "Brazil is the second-largest global producer of soybeans.",
            "focus_missing",
        ),
        (
            "When were some of Luther's best-known works published?",
            "Luther's translation of the Bible into German made it accessible to ordinary people.",
            "type_mismatch",
        ),
        (
            "How many seats does the council have?",
            "The council meets in the old town hall on Mondays.",
            "type_mismatch",
        ),
        (
            "Who was the Panthers' tackle leader for 2015?",
            "Thomas Davis recovered a fumble in the third quarter for the Panthers.",
            "focus_missing",
        ),
        # And the answers.
        (
            "Who was the world's second largest oil producer?",
            "Saudi Arabia was the world's second largest oil producer in 2015.",
            None,
        ),
        (
            "Who was the Panthers' tackle leader for 2015?",
            "Luke Kuechly led the Panthers in tackles with 118 in 2015.",
            None,
        ),
        (
            "When were some of Luther's best-known works published?",
            "His best-known works, including On the Freedom of a Christian, came out in 1520.",
            None,
        ),
        ("How many seats does the council have?", "The council has 51 seats.", None),
        # "What year" asks for a year; a month is a date that does not answer it (a "when"
        # question it does answer).
        (
            "What year did Tesla die?",
            "Tesla died in January, alone in his hotel room.",
            "type_mismatch",
        ),
        ("When did Tesla die?", "Tesla died in January, alone in his hotel room.", None),
        ("What year did Tesla die?", "Tesla died on 7 January 1943 in New York.", None),
        ("In what year did the band form?", "The band formed in the late 1990s.", None),
    ],
)
def test_verdict(q, sentence, code):
    v = verdict(analyze(q), sentence)
    assert v.code == code, v.reason
    assert v.answers is (code is None)
    if code is not None:
        assert code in CODES and v.reason


def test_a_chain_states_what_its_first_sentence_lacks():
    info = analyze("In what year was the university where Ivan Petrov was a professor founded?")
    first = "Ivan Petrov was a professor of physics at Moscow State University."
    assert verdict(info, first).code == "type_mismatch"
    assert "Moscow State University" in bridges(info.text, first)
    assert hop_query(info, "Moscow State University", first).startswith("Moscow State University")
    second = "Moscow State University was founded in 1755 by Mikhail Lomonosov."
    assert verdict(info, first, [second]).answers


def test_bridge_phrasing():
    assert analyze("In what year was the university where X was a professor founded?").bridge
    assert analyze("What year did the regiment featured in the 2006 film begin?").bridge
    assert not analyze("Who was the world's second largest oil producer?").bridge
