"""Hydration pieces of the search path: snippets and the cached exact dense scan."""

from __future__ import annotations

import html
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import superchargedb  # noqa: F401  (onnxruntime before usearch)
from bench.common import evaldir
from superchargedb.query_terms import query_terms
from superchargedb.search.hits import Snippeter, snippet


def reference_snippet(text: str, terms: Sequence[str], width: int = 240) -> str:
    """The snippet contract (docs/search.md), written the plain way: the window starts a third
    of the width before the first occurrence of any term; every word of the window that starts
    with a term (case-insensitively) is wrapped in <mark>; the text in and between the marks is
    HTML-escaped (so a mark never falls inside an entity)."""
    low = text.lower()
    pos = min((i for t in terms if (i := low.find(t)) >= 0), default=0)
    start = max(0, pos - width // 3)
    end = min(len(text), start + width)
    raw = text[start:end]
    window = html.escape(raw)
    if terms:
        pat = re.compile(r"\b(" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE)
        parts, last = [], 0
        for m in pat.finditer(raw):
            parts += [html.escape(raw[last : m.start()]), f"<mark>{html.escape(m.group(0))}</mark>"]
            last = m.end()
        window = "".join(parts) + html.escape(raw[last:])
    return ("…" if start > 0 else "") + window + ("…" if end < len(text) else "")


CASES = [
    ("Deployment pipeline tests run nightly; the PIPELINE is green.", ["pipeline", "tests"]),
    ("x" * 500 + " ERR_7731 occurred in the deploy step " + "y" * 500, ["err_7731", "deploy"]),
    ("besides the sidewalk, sids and SIDS-like cases", ["sids"]),
    ("<b>Bold</b> & 'quoted' \"text\" amp &amp;", ["amp", "bold", "quoted"]),
    ("İstanbul İSTANBUL istanbul: the dotted capital I lower-cases to two code points", ["i"]),
    ("Straße STRASSE strasse", ["straße", "strasse"]),
    ("no term here at all", ["absent"]),
    ("", ["anything"]),
    ("terms list empty", []),
    ("2010 and 10 and 100 values", ["10"]),
    # Terms that spell entity names: a mark never lands inside "&gt;", "&amp;" or "&#x27;".
    ("3243A>G and 8993T>G, A&B's amp gt", ["g", "gt", "amp", "x27", "b"]),
]


@pytest.mark.parametrize(("text", "terms"), CASES)
def test_snippet_matches_the_reference(text: str, terms: list[str]) -> None:
    assert Snippeter(terms)(text) == reference_snippet(text, terms)
    assert snippet(text, terms) == reference_snippet(text, terms)


def test_a_mark_never_splits_an_entity() -> None:
    """Marking the escaped text once gave "&<mark>gt</mark>;": broken HTML in every hit."""
    assert Snippeter(["gt", "g"])("3243A>G") == "3243A&gt;<mark>G</mark>"
    assert Snippeter(["amp", "x27"])("R&D's amp") == "R&amp;D&#x27;s <mark>amp</mark>"


def test_snippet_matches_the_reference_on_scifact() -> None:
    if reason := evaldir.skip_reason("scifact"):
        pytest.skip(reason)
    corpus = evaldir.dataset("scifact")
    docs, queries = [], []
    with open(corpus / "corpus.jsonl") as f:
        for line, _ in zip(f, range(300), strict=False):
            d = json.loads(line)
            docs.append(d["title"] + "\n" + d["text"])
    with open(corpus / "queries.jsonl") as f:
        queries = [json.loads(line)["text"] for line, _ in zip(f, range(100), strict=False)]
    rng = random.Random(7)
    for q in queries:
        terms = query_terms(q)
        snip = Snippeter(terms)
        for text in rng.sample(docs, 10):
            assert snip(text) == reference_snippet(text, terms)


def test_snippet_matches_the_reference_on_random_texts() -> None:
    """Word boundaries of every kind: digits, ``_``, letters that lower-case to two code points,
    combining marks, superscripts, HTML entities, terms inside and at the start of words."""
    rng = random.Random(11)
    alphabet = list("abcdeéß_019²İ &<>'\"-.\u0301") + [" "] * 4
    words = ["ab", "abc", "b", "cab", "10", "1", "_a", "ss", "é", "amp", "lt", "i̇", "ß"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet + words) for _ in range(rng.randint(0, 120)))
        terms = rng.sample(words, rng.randint(0, 4))
        width = rng.choice([240, 20, 7])
        assert Snippeter(terms, width)(text) == reference_snippet(text, terms, width), (
            text,
            terms,
        )


def test_hits_keep_locators_and_rank_alike_cold_and_warm(tmp_path: Path, embedder: Any) -> None:
    """Hydration reads the Locator columns only for rows that have one: a located hit still
    carries its Locator, an unlocated one None. The dense leg's first query of a predicate and
    the next ones (its candidate ids cached) return the same hits; ``snippets: false`` the same
    hits without snippets."""
    from fastapi.testclient import TestClient

    from conftest import ALICE, make_service
    from superchargedb.api.app import create_app
    from superchargedb.demo import seed_principals

    svc = make_service(tmp_path / "data", embedder, cache_max_bytes=0)  # no result cache
    seed_principals(svc)
    try:
        with TestClient(create_app(svc), raise_server_exceptions=False) as c:
            units = [
                {
                    "text": f"Renewal forecast {i}: the backend pipeline closes deals in Q{i % 4}.",
                    "scope": "acme/alpha/backend",
                    "doc_id": f"d{i}",
                    "acl_groups": ["eng-backend"],
                    **(
                        {"locator": {"kind": "line_range", "start": i + 1, "end": i + 2}}
                        if i % 2
                        else {}
                    ),
                }
                for i in range(12)
            ]
            r = c.post("/v1/ingest", headers=ALICE, json={"units": units})
            assert r.status_code == 200, r.text
            body = {"q": "backend renewal forecast pipeline", "top_k": 12}
            runs = [
                c.post("/v1/search", headers=ALICE, json=body, params={"scope": "acme/alpha"})
                for _ in range(3)
            ]
            bare = c.post(
                "/v1/search",
                headers=ALICE,
                json={**body, "snippets": False},
                params={"scope": "acme/alpha"},
            ).json()["hits"]
            bad = c.post("/v1/search", headers=ALICE, json={**body, "snippets": "some"})
        hits = [r.json()["hits"] for r in runs]
        # snippets: false changes nothing but the snippet (null), and a non-boolean is a 422.
        assert all("<mark>" in h["snippet"] for h in hits[0])
        assert bare == [{**h, "snippet": None} for h in hits[0]]
        assert bad.status_code == 422 and bad.json()["error"]["code"]
        assert all(r.json()["trace"]["cache"] == "miss" for r in runs)
        assert all(h == hits[0] for h in hits[1:])
        assert len(hits[0]) == 12
        for h in hits[0]:
            i = int(h["doc_id"][1:])
            want = {"kind": "line_range", "start": i + 1, "end": i + 2} if i % 2 else None
            assert h["locator"] == want
            assert h["ranks"]["dense"] is not None
    finally:
        svc.close()
