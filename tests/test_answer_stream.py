"""Streamed answers (D-235): each checked sentence leaves the server while the model still
writes, against a real server and a local OpenAI-compatible fake that streams and waits."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ALICE, LiveServer, make_service
from superchargedb.answer.sentences import SentenceStream, sentence_texts

RUNBOOK = (
    "During the Q3 game day the failover cutover took 0.8 seconds end to end. "
    "The primary region was drained before traffic moved to the standby region."
)
PRICING = "The team plan costs 49 dollars per seat per month with annual billing."
Q = {"q": "How long did the failover cutover take during the Q3 game day?", "top_k": 3}
ONE = "The failover cutover took 0.8 seconds end to end [1]."
TWO = " During the Q3 game day the cutover took 0.8 seconds end to end [1]."

TEXTS = [
    ONE + TWO,
    "It took 0.8 s. [1] Then the U.S. team, led by Dr. Chen, moved No. 5 [1][2]. Done [2].",
    "Ask Ms. Chen [1]. It took 14 ms. Then it ended [1, 2]. vitamin D. Next [2]",
    "# Heading\nThe plan costs 49 dollars [2].\n\n- first item [1]\n- second item [2]\n1. x [1]",
    'He said "stop." [1] After that, e.g. the rest… Finally! [3] Really? [1]',
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(TEXTS), st.lists(st.integers(1, 9), min_size=1, max_size=40))
def test_sentences_of_a_stream_are_those_of_the_whole(text: str, sizes: list[int]) -> None:
    s, got, i, k = SentenceStream(), [], 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        got += s.feed(text[i : i + n])
        i, k = i + n, k + 1
    got += s.close()
    assert got == sentence_texts(text)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    from fake_openai import FakeOpenAI
    from superchargedb.demo import seed_principals

    with FakeOpenAI() as fake:
        svc = make_service(
            tmp_path_factory.mktemp("stream"),
            embedder,
            openai_base_url=fake.url,
            openai_api_key="sk-t",
            openai_chat_model="gpt-4o-mini",
        )
        seed_principals(svc)
        units = [
            {"text": RUNBOOK, "doc_id": "runbook", "acl_groups": ["eng-backend"]},
            {"text": PRICING, "doc_id": "pricing", "acl_groups": ["eng-backend"]},
        ]
        svc.ingest(svc.authenticate("Bearer aegis_sk_alice"), {"units": units})
        try:
            with LiveServer(svc) as live:
                yield {"url": live.url, "svc": svc, "fake": fake}
        finally:
            svc.close()


@pytest.fixture
def w(world: dict[str, Any]) -> dict[str, Any]:
    fake = world["fake"]
    fake.pieces, fake.break_after, fake.reply, fake.status = None, None, ONE, 200
    world["svc"].cache.clear()
    return world


def sse(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    name, data = "", ""
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and name:
            yield name, json.loads(data)
            name = ""


def streamed(w: dict[str, Any], body: dict[str, Any] | None = None) -> list[Any]:
    r = httpx.post(
        f"{w['url']}/v1/answer",
        headers={**ALICE, "Accept": "text/event-stream"},
        json={**(body or Q), "stream": True},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return list(sse(iter(r.text.split("\n"))))


def plain(w: dict[str, Any], body: dict[str, Any] | None = None) -> dict[str, Any]:
    r = httpx.post(f"{w['url']}/v1/answer", headers=ALICE, json=body or Q, timeout=60)
    assert r.status_code == 200, r.text
    return dict(r.json())


def answer_slots(w: dict[str, Any]) -> float:
    m = re.search(
        r'scdb_admission\{class="answer",state="inflight"\} (\S+)', w["svc"].metrics.render()
    )
    assert m, "no admission gauge for answers"
    return float(m.group(1))


def test_a_sentence_arrives_while_the_model_is_still_writing(w: dict[str, Any]) -> None:
    """The fake holds its second sentence until the test has read the first one's event: the
    sentence is on the wire, its citation is not (held until the answer ends), and the request
    still holds its answer slot; then the rest follows. A sentence is known to be complete once
    the next one has begun, so the fake sends the second's first letter before it holds (without
    it the first event waited out the fake's 30 s hold, and the test passed only after it)."""
    gate = threading.Event()
    w["fake"].pieces = [(ONE[:20], 0.0), (ONE[20:] + TWO[:2], 0.0), (TWO[2:], gate)]
    t0 = time.monotonic()
    before: list[tuple[str, dict[str, Any]]] = []
    after: list[tuple[str, dict[str, Any]]] = []
    try:
        with httpx.stream(
            "POST",
            f"{w['url']}/v1/answer",
            headers={**ALICE, "Accept": "text/event-stream"},
            json={**Q, "stream": True},
            timeout=60,
        ) as r:
            assert r.status_code == 200
            events = sse(r.iter_lines())
            before.append(next(events))
            assert not gate.is_set()  # the model has not written its second sentence
            assert time.monotonic() - t0 < 10, "the first sentence waited for the model's rest"
            assert answer_slots(w) == 1.0
            gate.set()
            after = list(events)
    finally:
        gate.set()
    assert [n for n, _ in before] == ["sentence"]
    assert before[0][1]["text"] == ONE.replace(" [1]", "")
    assert before[0][1]["citations"] == [1] and "answers_question" not in before[0][1]
    names = [n for n, _ in after]
    assert names == ["sentence", "citation", "final"], names
    final = after[-1][1]
    sents = [d for n, d in before + after if n == "sentence"]
    assert [{k: v for k, v in s.items() if k != "index"} for s in sents] == [
        {k: v for k, v in s.items() if k != "answers_question"}
        for s in final["answer"]["sentences"]
    ]
    assert after[1][1] == final["answer"]["citations"][0]
    assert final["answer"]["provider"] == "openai:gpt-4o-mini"
    assert answer_slots(w) == 0.0
    assert w["fake"].requests[-1]["body"]["stream"] is True


@pytest.mark.parametrize(
    "reply",
    [
        ONE + TWO,
        ONE + " The cutover took 9 minutes [1].",  # the second fails its check: dropped
        "The cutover took 0.8 seconds [7]. The plan costs 49 dollars per seat [2].",
        "I cannot answer from the provided sources.",  # a refusal: the extractive fallback
        "The primary region was drained before traffic moved [1].",  # the best sentence quoted
    ],
)
def test_the_streamed_final_is_the_plain_answer(w: dict[str, Any], reply: str) -> None:
    w["fake"].reply = reply
    events = streamed(w)
    final = events[-1][1]
    w["svc"].cache.clear()
    whole = plain(w)
    assert final["answer"] == whole["answer"]
    assert final["hits"] == whole["hits"]
    sents = [d["text"] for n, d in events if n == "sentence"]
    assert sents == [s["text"] for s in whole["answer"]["sentences"]]
    cites = [d["index"] for n, d in events if n == "citation"]
    assert sorted(cites) == [c["index"] for c in whole["answer"]["citations"]]
    assert whole["trace"]["cache"] != "hit" and plain(w)["trace"]["cache"] == "hit"


def synth(out: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in out["trace"]["stages"] if s["stage"] == "synth")


def test_a_model_that_breaks_off_after_a_sentence_keeps_it(w: dict[str, Any]) -> None:
    """What was streamed cannot be taken back (D-37): the answer is the checked sentence, the
    break is in the trace, and that answer is not cached."""
    w["fake"].pieces = [(ONE + TWO[:8], 0.0), (TWO[8:], 0.0)]  # the first sentence, then a cut
    w["fake"].break_after = 1
    events = streamed(w)
    final = events[-1][1]
    assert [n for n, _ in events] == ["sentence", "citation", "final"]
    assert final["answer"]["provider"] == "openai:gpt-4o-mini"
    assert [s["text"] for s in final["answer"]["sentences"]] == [ONE.replace(" [1]", "")]
    assert "failed after 1 streamed sentence" in synth(final)["detail"]
    assert plain(w)["trace"]["cache"] != "hit"


def test_a_model_that_breaks_off_before_a_sentence_falls_back(w: dict[str, Any]) -> None:
    """A cut before the first sentence was final is the plain answer's failure: the next
    provider (here the extractive one) answers; an unfinished sentence is never checked."""
    w["fake"].pieces = [(ONE, 0.0), (TWO, 0.0)]
    w["fake"].break_after = 1
    final = streamed(w)[-1][1]
    assert final["answer"]["provider"] == "extractive fallback"
    assert "openai:gpt-4o-mini failed" in synth(final)["detail"]
    assert final["answer"]["sentences"] and final["answer"]["citations"]


def test_refusal_words_after_a_streamed_sentence(w: dict[str, Any]) -> None:
    w["fake"].reply = ONE + " The sources do not mention the rollback."
    final = streamed(w)[-1][1]
    assert [s["text"] for s in final["answer"]["sentences"]] == [ONE.replace(" [1]", "")]
    assert "refused after 1 streamed sentence" in synth(final)["detail"]
    assert plain(w)["trace"]["cache"] != "hit"  # unlike the plain answer's fallback


def test_errors_come_before_the_stream(w: dict[str, Any]) -> None:
    r = httpx.post(
        f"{w['url']}/v1/answer",
        headers={"Authorization": "Bearer aegis_sk_carol"},
        json={**Q, "stream": True},
    )
    assert r.status_code == 402 and r.headers["content-type"].startswith("application/json")
    r = httpx.post(f"{w['url']}/v1/answer", headers=ALICE, json={**Q, "stream": True, "top_k": 0})
    assert r.status_code == 422


def test_a_reader_that_leaves_gives_the_slot_back(w: dict[str, Any]) -> None:
    """The client goes after the first sentence: once the model's next piece comes, the stream
    stops and the answer slot is free again (nothing waits on a gone client)."""
    import time

    gate = threading.Event()
    w["fake"].pieces = [(ONE + " During", 0.0), (TWO[7:], gate), (" More [1].", 0.0)]
    try:
        with httpx.stream(
            "POST",
            f"{w['url']}/v1/answer",
            headers={**ALICE, "Accept": "text/event-stream"},
            json={**Q, "stream": True},
            timeout=60,
        ) as r:
            assert next(sse(r.iter_lines()))[0] == "sentence"
            assert answer_slots(w) == 1.0
    finally:
        gate.set()
    deadline = time.monotonic() + 30
    while answer_slots(w) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answer_slots(w) == 0.0
