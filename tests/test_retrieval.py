"""Retrieval that a toy cannot pass: each leg proven through its own rank, ACL on every path."""

from __future__ import annotations

import pytest

from conftest import ALICE, BOB, CAROL, add_principal, auth, make_service
from corpus import (
    DISTRACTORS,
    IDENT_QUERY,
    IDENT_TARGET,
    PARAPHRASE_QUERY,
    PARAPHRASE_TARGET,
)
from superchargedb.query_terms import query_terms


@pytest.fixture
def svc(tmp_path, memo_embedder):
    """A fresh Service per test, as conftest's, over the memoized model (the corpus is the same
    in every test; embedding it again each time was most of this file's time)."""
    from superchargedb.demo import seed_principals

    s = make_service(tmp_path / "data", memo_embedder)
    seed_principals(s)
    yield s
    s.close()


@pytest.fixture
def corpus(client, svc):
    units = [
        {"text": t, "doc_id": f"d{i}", "acl_groups": ["eng-backend"]}
        for i, t in enumerate(DISTRACTORS)
    ]
    units.append(
        {"text": PARAPHRASE_TARGET, "doc_id": "target-para", "acl_groups": ["eng-backend"]}
    )
    units.append({"text": IDENT_TARGET, "doc_id": "target-ident", "acl_groups": ["eng-backend"]})
    r = client.post("/v1/ingest", headers=ALICE, json={"units": units})
    assert r.status_code == 200
    res = r.json()["results"]
    assert all(x["ok"] for x in res)
    return {"para": res[-2]["unit_id"], "ident": res[-1]["unit_id"], "n": len(units)}


def search(client, headers, q, **kw):
    r = client.post("/v1/search", headers=headers, json={"q": q, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def test_paraphrase_found_by_dense_leg_only(client, corpus):
    assert corpus["n"] >= 50
    # The query shares no content word with the target (stems included).
    target_terms = set(query_terms(PARAPHRASE_TARGET))
    assert not {t[:5] for t in query_terms(PARAPHRASE_QUERY)} & {t[:5] for t in target_terms}
    out = search(client, ALICE, PARAPHRASE_QUERY, top_k=10)
    ids = [h["unit_id"] for h in out["hits"]]
    assert corpus["para"] in ids[:3]
    hit = out["hits"][ids.index(corpus["para"])]
    assert hit["ranks"]["dense"] is not None and hit["ranks"]["dense"] <= 3
    assert hit["ranks"]["lexical"] is None
    dense_only = search(client, ALICE, PARAPHRASE_QUERY, mode="dense")
    assert corpus["para"] in [h["unit_id"] for h in dense_only["hits"][:3]]
    lexical_only = search(client, ALICE, PARAPHRASE_QUERY, mode="lexical")
    assert corpus["para"] not in [h["unit_id"] for h in lexical_only["hits"]]


def test_rare_identifier_found_by_lexical_leg(client, corpus):
    out = search(client, ALICE, IDENT_QUERY, top_k=10)
    hit = next(h for h in out["hits"] if h["unit_id"] == corpus["ident"])
    assert hit["ranks"]["lexical"] == 1
    assert out["hits"][0]["unit_id"] == corpus["ident"]
    assert "<mark>" in hit["snippet"]


def test_response_shape_trace_and_context(client, corpus):
    out = search(client, ALICE, "deployment pipeline tests", top_k=5)
    assert set(out) == {"hits", "answer", "trace", "context"}
    assert out["answer"] is None
    h = out["hits"][0]
    for k in (
        "unit_id",
        "score",
        "plane",
        "modality",
        "doc_id",
        "scope",
        "source_uri",
        "text",
        "snippet",
        "locator",
        "ranks",
    ):
        assert k in h
    stages = [s["stage"] for s in out["trace"]["stages"]]
    assert stages == ["embed", "vectorize", "d1_fts", "rrf", "hydrate"]
    assert all(s["ms"] >= 0 for s in out["trace"]["stages"])
    assert out["trace"]["cache"] == "miss"
    assert out["trace"]["total_ms"] > 0
    # The spec's example: alice granted acme/alpha asks for acme/alpha/backend (D-4).
    assert out["context"]["effective_scopes"] == ["acme/alpha/backend"]
    assert out["context"]["perms"] == ["admin", "read", "write"]
    again = search(client, ALICE, "deployment pipeline tests", top_k=5)
    assert again["trace"]["cache"] == "hit"
    assert again["hits"] == out["hits"]


def test_rerank_without_reranker_is_traced(client, corpus):
    out = search(client, ALICE, "deployment", rerank=True)
    rr = [s for s in out["trace"]["stages"] if s["stage"] == "rerank"]
    assert rr and rr[0]["skipped"] == "no reranker configured"


def test_scope_rules_for_search(client, corpus):
    r = client.post("/v1/search?scope=acme/alpha", headers=ALICE, json={"q": IDENT_QUERY})
    assert r.status_code == 200
    assert r.json()["context"]["effective_scopes"] == ["acme/alpha"]
    assert r.json()["hits"][0]["unit_id"] == corpus["ident"]
    # Broader than the grant: clamped to the grant.
    r = client.post("/v1/search?scope=acme", headers=ALICE, json={"q": IDENT_QUERY})
    assert r.json()["context"]["effective_scopes"] == ["acme/alpha"]
    # Disjoint: 403. Look-alike: 403. Scope in the body: 422. Header vs query disagree: 422.
    r = client.post("/v1/search?scope=acme/beta", headers=ALICE, json={"q": "x"})
    assert r.status_code == 403
    r = client.post("/v1/search?scope=acme/alphabet", headers=ALICE, json={"q": "x"})
    assert r.status_code == 403
    r = client.post("/v1/search", headers=ALICE, json={"q": "x", "scope": "acme/alpha"})
    assert r.status_code == 422
    r = client.post(
        "/v1/search?scope=acme/alpha", headers={**ALICE, "X-Aegis-Scope": "acme"}, json={"q": "x"}
    )
    assert r.status_code == 422
    # No ancestor inheritance: a Unit at acme/alpha/backend is not in acme/alpha/backend/x.
    r = client.post("/v1/search?scope=acme/alpha/backend/x", headers=ALICE, json={"q": IDENT_QUERY})
    assert r.json()["hits"] == []
    r = client.post("/v1/search", headers=ALICE, json={"q": "x", "answer": True})
    assert r.status_code == 422


@pytest.mark.parametrize(
    "q",
    [
        '"',
        "AND(",
        "*",
        "NEAR",
        "a OR",
        "col:x",
        "NOT ()",
        "^ - +",
        "text:hello",
        '"unterminated',
        "\u0000",
        "🙂 emoji",
        "the of and",
    ],
)
def test_fts_syntax_never_errors(client, corpus, q):
    r = client.post("/v1/search", headers=ALICE, json={"q": q})
    assert r.status_code == 200, r.text


def test_target_invisible_to_outsiders_on_every_path(client, svc, corpus):
    outsider = auth(
        add_principal(svc, "mallory", perms=["read"], scopes=["acme/alpha"], groups=["sales"])
    )
    for headers in (CAROL, outsider):
        for q in (IDENT_QUERY, PARAPHRASE_QUERY):
            r = client.post("/v1/search", headers=headers, json={"q": q})
            if r.status_code == 200:
                ids = [h["unit_id"] for h in r.json()["hits"]]
                assert corpus["ident"] not in ids and corpus["para"] not in ids
            else:
                assert r.status_code in (402, 403)
        for uid in (corpus["ident"], corpus["para"]):
            r = client.get(f"/v1/units/{uid}", headers=headers)
            assert r.status_code == 404
            assert uid not in r.text
    # bob shares the group: he sees it.
    assert client.get(f"/v1/units/{corpus['ident']}", headers=BOB).status_code == 200


def test_cache_never_crosses_principals_either_order(client, svc):
    """Two principals with the same groups but different owner-only Units (D-28)."""
    k1 = auth(
        add_principal(
            svc,
            "p1",
            perms=["read", "write"],
            scopes=["acme/alpha"],
            active="acme/alpha/backend",
            groups=["eng-backend"],
        )
    )
    k2 = auth(
        add_principal(
            svc,
            "p2",
            perms=["read", "write"],
            scopes=["acme/alpha"],
            active="acme/alpha/backend",
            groups=["eng-backend"],
        )
    )
    secret1 = "The vault combination for p1 is zebra-42-lantern."
    secret2 = "The vault combination for p2 is otter-17-compass."
    u1 = client.post(
        "/v1/ingest", headers=k1, json={"units": [{"text": secret1, "acl_groups": []}]}
    ).json()
    u2 = client.post(
        "/v1/ingest", headers=k2, json={"units": [{"text": secret2, "acl_groups": []}]}
    ).json()
    id1, id2 = u1["results"][0]["unit_id"], u2["results"][0]["unit_id"]
    for first, second, mine, theirs in ((k1, k2, id1, id2), (k2, k1, id2, id1)):
        svc.cache.clear()
        a = search(client, first, "vault combination")
        b = search(client, second, "vault combination")
        assert b["trace"]["cache"] == "miss"
        ids_a = [h["unit_id"] for h in a["hits"]]
        ids_b = [h["unit_id"] for h in b["hits"]]
        assert mine in ids_a and theirs not in ids_a
        assert theirs in ids_b and mine not in ids_b
        # Repeats hit the cache and still never cross.
        a2 = search(client, first, "vault combination")
        assert a2["trace"]["cache"] == "hit" and [h["unit_id"] for h in a2["hits"]] == ids_a


def test_write_invalidates_cache_of_its_scope_only(client, svc, corpus):
    search(client, ALICE, "espresso machine")
    assert search(client, ALICE, "espresso machine")["trace"]["cache"] == "hit"
    other = search(client, ALICE, "espresso machine", top_k=3)  # another key, same scope
    client.post(
        "/v1/ingest",
        headers=ALICE,
        json={"units": [{"text": "A second espresso machine arrives.", "doc_id": "em"}]},
    )
    after = search(client, ALICE, "espresso machine")
    assert after["trace"]["cache"] == "miss"
    assert any("second espresso" in h["text"] for h in after["hits"])
    assert other["trace"]["cache"] == "miss"
    # A write in carol's scope does not flush alice's cached entry.
    search(client, ALICE, "espresso machine")
    client.post("/v1/ingest", headers=CAROL, json={"units": [{"text": "beta espresso"}]})
    assert search(client, ALICE, "espresso machine")["trace"]["cache"] == "hit"


def test_filters(client, corpus):
    out = search(client, ALICE, "machine", filters={"doc_id": "d39"})
    assert {h["doc_id"] for h in out["hits"]} == {"d39"}
    out = search(client, ALICE, "machine", filters={"modality": "code"})
    assert out["hits"] == []
    out = search(
        client,
        ALICE,
        "machine",
        filters={"time": {"from": "2000-01-01T00:00:00Z", "to": "2001-01-01T00:00:00Z"}},
    )
    assert out["hits"] == []
    out = search(client, ALICE, "machine", filters={"time": {"from": "2000-01-01T00:00:00Z"}})
    assert out["hits"]


def test_delete_unit_and_doc(client, corpus):
    uid = corpus["ident"]
    assert client.delete(f"/v1/units/{uid}", headers=BOB).status_code == 403
    assert client.delete(f"/v1/units/{uid}", headers=CAROL).status_code == 404  # not hers to see
    r = client.delete(f"/v1/units/{uid}", headers=ALICE)
    assert r.status_code == 200 and r.json()["unit_ids"] == [uid]
    assert client.get(f"/v1/units/{uid}", headers=ALICE).status_code == 404
    out = search(client, ALICE, IDENT_QUERY)
    assert uid not in [h["unit_id"] for h in out["hits"]]
    assert client.delete(f"/v1/units/{uid}", headers=ALICE).status_code == 404
    assert client.delete("/v1/docs/target-para", headers=ALICE).status_code == 200
    out = search(client, ALICE, PARAPHRASE_QUERY)
    assert corpus["para"] not in [h["unit_id"] for h in out["hits"]]
