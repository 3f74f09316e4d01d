"""An extractive answer cites each fact the question names (issue 21, D-220 to D-222): the
supporting passage a multi-hop question rests on, the bridge passage a quoted sentence names,
and the subject's sentence of a titled passage; untitled siblings are not chained; a supporting
passage the principal may not read is never cited."""

from __future__ import annotations

import json

from conftest import add_principal, auth, make_service
from fake_openai import answer_client
from superchargedb.answer.question import analyze
from superchargedb.answer.sentences import sentence_texts

EXTRACTIVE = {"answer_providers": ""}
GODSELL = (
    "# Bobby Godsell\n\nRobert Michael Godsell (born 14 September 1952 in Johannesburg) is a"
    " retired South African businessman and the former CEO of South African gold mining company"
    " AngloGold Ashanti."
)
ANGLOGOLD = (
    "# AngloGold Ashanti\n\nIt was formed in 2004 by the merger of AngloGold and the Ashanti"
    " Goldfields Corporation. AngloGold Ashanti Limited is a global gold mining company."
)
SANDELIN = (
    "# Scott Sandelin\n\nScott Sandelin is an American ice hockey coach. He grew up in Hibbing,"
    " Minnesota where he went on to play collegiate hockey."
)
HIBBING = "# Hibbing\n\nHibbing is a city in Saint Louis County, Minnesota, United States."
OTHER = [
    "# Ravensburger\n\nRavensburger is a German game and puzzle company founded in 1883.",
    "# Thames\n\nThe River Thames flows through southern England, including London.",
]


def units(texts, **extra):
    return [{"text": t, "doc_id": f"d{i}", **extra} for i, t in enumerate(texts)]


def ask(c, q, top_k=4):
    r = c.post("/v1/answer", headers=auth("aegis_sk_alice"), json={"q": q, "top_k": top_k})
    assert r.status_code == 200, r.text
    return r.json()["answer"]


def cited_docs(a, hits_by_unit):
    return [hits_by_unit[c["unit_id"]] for c in a["citations"]]


def test_a_multi_hop_answer_cites_both_facts_and_the_subject_sentence(tmp_path, embedder, fake):
    q = "Bobby Godsell held a senior position in which global company that was formed in 2004?"
    with answer_client(
        tmp_path / "d", embedder, fake, units([GODSELL, ANGLOGOLD, *OTHER]), **EXTRACTIVE
    ) as c:
        a = ask(c, q)
    assert a["refused"] is False, a.get("refusal_reason")
    texts = [s["text"] for s in a["sentences"]]
    # The fact about Godsell, then the company's: named by its subject sentence, then the date.
    assert any("former CEO" in t for t in texts)
    assert any(t.startswith("It was formed in 2004") for t in texts)
    assert "AngloGold Ashanti Limited is a global gold mining company." in texts
    assert len(a["citations"]) == 2
    assert [s["citations"] for s in a["sentences"]][0] == [1]
    assert {n for s in a["sentences"] for n in s["citations"]} == {1, 2}
    # One citation per passage: the company's span covers both of its quoted sentences.
    spans = {c["index"]: c["locator"] for c in a["citations"]}
    company = next(i for i, s in enumerate(a["sentences"]) if "formed in 2004" in s["text"])
    loc = spans[a["sentences"][company]["citations"][0]]
    assert loc["kind"] == "char_span" and loc["end"] - loc["start"] > len(texts[company])


def test_the_bridge_a_sentence_names_is_quoted_after_it(tmp_path, embedder, fake):
    q = "Scott Sandelin grew up in a town in what Minnesota county?"
    with answer_client(
        tmp_path / "d", embedder, fake, units([SANDELIN, HIBBING, *OTHER]), **EXTRACTIVE
    ) as c:
        a = ask(c, q)
    assert a["refused"] is False, a.get("refusal_reason")
    assert "Saint Louis County" in a["text"]
    texts = [s["text"] for s in a["sentences"]]
    hib = texts.index("Hibbing is a city in Saint Louis County, Minnesota, United States.")
    assert any("Hibbing" in t and "grew up" in t for t in texts[:hib])  # hop order
    assert len(a["citations"]) == 2


def test_untitled_siblings_are_not_chained(tmp_path, embedder, fake):
    """Two paragraphs of one article share its names; without a subject (a heading) the other
    paragraph is not a fact about the answer's, and is not cited."""
    paras = [
        "The Amazon rainforest covers most of the Amazon basin of South America. The basin"
        " encompasses seven million square kilometres.",
        "Deforestation in the Amazon rainforest rose in the 1990s, mostly for cattle pasture"
        " in the basin.",
    ]
    with answer_client(tmp_path / "d", embedder, fake, units(paras), **EXTRACTIVE) as c:
        a = ask(c, "How many square kilometres does the Amazon basin encompass?", top_k=2)
    assert a["refused"] is False, a.get("refusal_reason")
    assert "seven million" in a["text"]
    assert len(a["citations"]) == 1


def test_a_supporting_passage_the_principal_may_not_read_is_not_cited(tmp_path, embedder):
    s = make_service(tmp_path / "d", embedder, **EXTRACTIVE)
    try:
        k_all = auth(
            add_principal(s, "w", perms=["read", "write"], scopes=["t"], groups=["g", "secret"])
        )
        k_some = auth(add_principal(s, "r", perms=["read"], scopes=["t"], groups=["g"]))
        s.ingest(
            s.authenticate(k_all["Authorization"]),
            {
                "units": [
                    {"text": SANDELIN, "doc_id": "a", "acl_groups": ["g"]},
                    {"text": HIBBING, "doc_id": "b", "acl_groups": ["secret"]},
                    *({"text": t, "doc_id": t[:9], "acl_groups": ["g"]} for t in OTHER),
                ]
            },
        )
        body = {"q": "Scott Sandelin grew up in a town in what Minnesota county?", "top_k": 4}
        ok = s.answer(s.authenticate(k_all["Authorization"]), body, None, None)
        assert "Saint Louis County" in ok["answer"]["text"]
        s.cache.clear()
        no = s.answer(s.authenticate(k_some["Authorization"]), body, None, None)
        assert "Saint Louis" not in json.dumps(no)
        assert len(no["answer"]["citations"]) <= 1
    finally:
        s.close()


def test_comparison_options_keep_a_comma_inside_a_name():
    info = analyze(
        "Which long-established US university is older: University of California, Berkeley"
        " or Syracuse University?"
    )
    assert info.qtype == "choice"
    assert info.options == ("University of California, Berkeley", "Syracuse University")
    # The question's own opening is not part of a name.
    first = analyze("Which University, University of New South Wales or Purbanchal University?")
    assert first.options == ("University of New South Wales", "Purbanchal University")


def test_both_a_and_b_asking_what_they_share_is_not_a_choice():
    info = analyze("Dahlia and Aruncus are both examples of what type of plant categorization?")
    assert info.qtype != "choice" and info.options == ()


def test_initials_after_a_lowercase_word_and_case_names_do_not_end_a_sentence():
    assert sentence_texts(
        "She was the mother-in-law of violinist L. Subramaniam (his first wife). Next one."
    ) == ["She was the mother-in-law of violinist L. Subramaniam (his first wife).", "Next one."]
    assert sentence_texts("Roth v. United States was decided in 1957. It held.") == [
        "Roth v. United States was decided in 1957.",
        "It held.",
    ]
    assert sentence_texts("We need vitamin D. Then more.") == ["We need vitamin D.", "Then more."]


LOUISE = (
    "# Princess Louise of Denmark\n\nPrincess Louise of Denmark and Norway (20 January 1750 – 12"
    " January 1831) was born to Frederick V of Denmark and Louise of Great Britain. Her eldest"
    " daughter, Marie of Hesse-Kassel, was the wife of Frederick VI of Denmark."
)
FREDERICK = (
    "# Frederick VI of Denmark\n\nFrederick VI was King of Denmark from 13 March 1808 to 3"
    ' December 1839. For his motto he chose "God and the just cause" and since then Danish'
    " monarchs have chosen a motto too."
)


def test_the_sentence_that_links_two_quoted_passages_is_quoted(tmp_path, embedder, fake):
    """The chain's link: the first passage's sentence naming the second passage's subject is
    what ties the motto to the question; it is quoted and cited with both facts (D-258)."""
    q = (
        "The eldest daughter of Princess Louise of Denmark and Norway was the wife of a king"
        " whose motto was what?"
    )
    with answer_client(
        tmp_path / "d", embedder, fake, units([LOUISE, FREDERICK, *OTHER]), **EXTRACTIVE
    ) as c:
        a = ask(c, q)
    assert a["refused"] is False, a.get("refusal_reason")
    texts = [s["text"] for s in a["sentences"]]
    assert "God and the just cause" in a["text"]
    link = next(i for i, t in enumerate(texts) if t.startswith("Her eldest daughter"))
    motto = next(i for i, t in enumerate(texts) if "motto" in t)
    # Both passages cited, the link under the first passage's citation.
    assert len(a["citations"]) == 2
    assert a["sentences"][link]["citations"] != a["sentences"][motto]["citations"]


RUBIO = (
    "# Ricky Rubio\n\nRicard Rubio i Vives (born October 21, 1990) is a Spanish professional"
    " basketball player for the Utah Jazz. On August 31, 2009, Joventut traded the rights to"
    " Rubio to FC Barcelona, and Rubio signed a six-year contract with FC Barcelona."
)
WOLVES = (
    "# 2011–12 Minnesota Timberwolves season\n\nThis season saw the debut of draftee Ricky"
    " Rubio, who was a contender for the Rookie of the Year Award until he tore his ACL."
)


def test_a_subject_known_by_another_name_brings_its_defining_sentence(tmp_path, embedder, fake):
    """ "# Ricky Rubio" is defined as "Ricard Rubio i Vives (born ...) is ...": no sentence
    names the heading as written, so the one defining something by its last name word says
    who the quoted "Rubio" is (D-259)."""
    q = (
        "Which FC Barcelona signee was a contender for the Rookie of the Year Award when he"
        " played for the Timberwolves?"
    )
    with answer_client(
        tmp_path / "d", embedder, fake, units([RUBIO, WOLVES, *OTHER]), **EXTRACTIVE
    ) as c:
        a = ask(c, q)
    assert a["refused"] is False, a.get("refusal_reason")
    texts = [s["text"] for s in a["sentences"]]
    assert any(t.startswith("Ricard Rubio i Vives (born") for t in texts)
    assert any("FC Barcelona" in t for t in texts)
    defining = next(i for i, t in enumerate(texts) if t.startswith("Ricard"))
    signed = next(i for i, t in enumerate(texts) if "FC Barcelona" in t)
    assert defining < signed  # the subject's sentence opens its passage's group


RAY = (
    "# Rick Ray\n\nRick Ray is an American filmmaker best known for his 2006 documentary film"
    " 10 Questions for the Dalai Lama, which he wrote, filmed and directed."
)
LASSETER = (
    "# John Lasseter\n\nJohn Alan Lasseter (born January 12, 1957) is an American animator, film"
    " director, screenwriter, and film producer. He is also the Principal Creative Advisor for"
    " Walt Disney Imagineering."
)


def test_a_comparison_quotes_the_sentence_stating_the_property(tmp_path, embedder, fake):
    """A side's fact is the sentence that states what is compared (the advisor role), not only
    the one naming the side; the naming sentence comes with it (D-259)."""
    q = "Which American film director is an advisor for Disney, Rick Ray or John Lasseter?"
    with answer_client(
        tmp_path / "d", embedder, fake, units([RAY, LASSETER, *OTHER]), **EXTRACTIVE
    ) as c:
        a = ask(c, q)
    assert a["refused"] is False, a.get("refusal_reason")
    assert a["text"].startswith("John Lasseter")
    texts = [s["text"] for s in a["sentences"]]
    assert "He is also the Principal Creative Advisor for Walt Disney Imagineering." in texts
    assert any(t.startswith("John Alan Lasseter (born") for t in texts)


JACK = (
    "# Jack-in-the-box\n\nA jack-in-the-box is a children's toy that outwardly consists of a box"
    ' with a crank. Many which use "Pop Goes the Weasel" open at the point in the melody where'
    ' the word "pop" would be if it were sung.'
)
WEASEL = (
    '# Pop Goes the Weasel\n\n"Pop Goes the Weasel" is an English nursery rhyme and singing'
    " game. It has a Roud Folk Song Index number of 5249."
)


def test_the_link_may_come_from_a_passage_the_answer_did_not_quote(tmp_path, embedder, fake):
    """The answer's passage (the rhyme) is reached from the toy the question asks about: the
    toy's sentence naming the rhyme is quoted before the rhyme's facts (D-258)."""
    q = (
        "Many jack-in-the-boxes use an English nursery rhyme with a Roud Folk Song Index number"
        " of what?"
    )
    with answer_client(
        tmp_path / "d", embedder, fake, units([JACK, WEASEL, *OTHER]), **EXTRACTIVE
    ) as c:
        a = ask(c, q)
    assert a["refused"] is False, a.get("refusal_reason")
    assert "5249" in a["text"]
    texts = [s["text"] for s in a["sentences"]]
    link = next(i for i, t in enumerate(texts) if t.startswith("Many which use"))
    number = next(i for i, t in enumerate(texts) if "5249" in t)
    assert a["sentences"][link]["citations"] != a["sentences"][number]["citations"]
    assert len(a["citations"]) == 2


HOTRIDE = (
    '# Hotride\n\n"Hotride" is the fifteenth single released by the British electronic music'
    " trio The Prodigy on 1 November 2004."
)
PRODIGY = (
    "# The Prodigy\n\nThe Prodigy are an English electronic music group from Braintree, Essex,"
    " formed in 1990 by keyboardist and songwriter Liam Howlett."
)
ROSES = "# The Stone Roses\n\nThe Stone Roses are a British rock band formed in Manchester in 1983."


def test_a_bridge_naming_a_retrieved_passage_is_followed_first(tmp_path, embedder, fake):
    """Of the names the first sentence holds ("British", "The Prodigy"), the one that is a
    retrieved passage's subject is the bridge: the answer is The Prodigy's, not the passage
    another name ("British") also matches (D-260)."""
    q = (
        "Hotride is the fifteenth single released by what music group from Braintree, Essex,"
        " that was formed in 1990?"
    )
    with answer_client(
        tmp_path / "d", embedder, fake, units([HOTRIDE, PRODIGY, ROSES, *OTHER]), **EXTRACTIVE
    ) as c:
        r = c.post("/v1/answer", headers=auth("aegis_sk_alice"), json={"q": q, "top_k": 5})
    assert r.status_code == 200, r.text
    a = r.json()["answer"]
    assert a["refused"] is False, a.get("refusal_reason")
    assert "Braintree" in a["text"]
    assert "Stone Roses" not in a["text"]
