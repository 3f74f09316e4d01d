"""Retrieval metrics against hand-computed values, and the BEIR loader on the shared data."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.common import evaldir
from superchargedb.evaluation import aggregate_docs, load_beir, mrr_at_k, ndcg_at_k, recall_at_k

NO_ADI = evaldir.skip_reason("classic-adi")  # the data comes from SCDB_EVAL_DIR
NO_SCIFACT = evaldir.skip_reason("scifact")

LOG2_3 = math.log2(3)  # 1.5849625007211563; 1 / LOG2_3 = 0.6309297535714575


# -- nDCG ------------------------------------------------------------------------------------


def test_ndcg_graded_three_docs():
    # ranking a, b, c; qrels a=1, c=2 (b not judged).
    # DCG  = 1/log2(2) + 0/log2(3) + 2/log2(4) = 1 + 0 + 2/2 = 2
    # IDCG = ideal order c(2), a(1): 2/log2(2) + 1/log2(3) = 2 + 0.63093 = 2.63093
    # nDCG = 2 / 2.63093 = 0.760188
    got = ndcg_at_k(["a", "b", "c"], {"a": 1, "c": 2}, 3)
    assert got == pytest.approx(0.7601875334318685, abs=1e-12)
    assert got == pytest.approx(2 / (2 + 1 / LOG2_3))


def test_ndcg_gain_is_rel_not_exponential():
    # With gain 2^rel - 1: DCG = 1 + 3/log2(4) = 2.5, IDCG = 3 + 1/log2(3) = 3.63093 -> 0.6885.
    # trec_eval's gain = rel gives 0.7602 (above).
    assert ndcg_at_k(["a", "b", "c"], {"a": 1, "c": 2}, 3) != pytest.approx(2.5 / (3 + 1 / LOG2_3))


def test_ndcg_cutoff_one():
    # top-1 is a (rel 1): DCG = 1/log2(2) = 1; IDCG@1 = c's 2/log2(2) = 2; nDCG@1 = 0.5
    assert ndcg_at_k(["a", "b", "c"], {"a": 1, "c": 2}, 1) == pytest.approx(0.5)


def test_ndcg_unretrieved_relevant_counts_in_ideal():
    # ranking b, a; qrels a=1, z=1 (z never retrieved)
    # DCG = 0 + 1/log2(3) = 0.63093; IDCG = 1 + 1/log2(3) = 1.63093; nDCG = 0.386853
    got = ndcg_at_k(["b", "a"], {"a": 1, "z": 1}, 10)
    assert got == pytest.approx(0.38685280723454163, abs=1e-12)


def test_ndcg_zero_grade_is_not_relevant():
    # a has grade 0: DCG = 0 + 1/log2(3); IDCG = 1 (only b); nDCG = 0.63093
    assert ndcg_at_k(["a", "b"], {"a": 0, "b": 1}, 10) == pytest.approx(1 / LOG2_3)


def test_duplicate_doc_ids_count_once_at_first_rank():
    # a, a, b dedupes to a, b: b at rank 2 -> nDCG = (1/log2(3)) / 1 = 0.63093, MRR = 1/2
    assert ndcg_at_k(["a", "a", "b"], {"b": 1}, 10) == pytest.approx(1 / LOG2_3)
    assert mrr_at_k(["a", "a", "b"], {"b": 1}, 10) == 0.5
    # without dedupe, b would sit at rank 3 and a 2-cutoff would miss it
    assert recall_at_k(["a", "a", "b"], {"b": 1}, 2) == 1.0


# -- recall ----------------------------------------------------------------------------------


def test_recall_fewer_relevant_than_k():
    # 2 relevant docs, k = 100, one found: 1 / 2 = 0.5 (the denominator is R, not k)
    assert recall_at_k(["x", "a", "y"], {"a": 1, "b": 1}, 100) == 0.5
    # both found within k = 10: 2 / 2
    assert recall_at_k(["x", "a", "y", "b"], {"a": 1, "b": 1}, 10) == 1.0
    # cutoff 3 keeps x, a, y: 1 / 2
    assert recall_at_k(["x", "a", "y", "b"], {"a": 1, "b": 1}, 3) == 0.5


def test_recall_ignores_grades_and_zero_grades():
    # relevant = {b, c} (a has grade 0); found c only -> 1/2
    assert recall_at_k(["a", "c"], {"a": 0, "b": 2, "c": 1}, 10) == 0.5


# -- MRR -------------------------------------------------------------------------------------


def test_mrr_first_relevant_at_rank_three():
    # x, y, a: first relevant at rank 3 -> 1/3
    assert mrr_at_k(["x", "y", "a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1 / 3)
    # cut at 2, nothing relevant in the top 2 -> 0
    assert mrr_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0


# -- edge cases ------------------------------------------------------------------------------


def test_empty_ranking_scores_zero():
    qrels = {"a": 1}
    assert ndcg_at_k([], qrels, 10) == 0.0
    assert recall_at_k([], qrels, 100) == 0.0
    assert mrr_at_k([], qrels, 10) == 0.0


@pytest.mark.parametrize("fn", [ndcg_at_k, recall_at_k, mrr_at_k])
def test_query_without_relevant_docs_is_an_error(fn):
    with pytest.raises(ValueError):
        fn(["a"], {}, 10)
    with pytest.raises(ValueError):
        fn(["a"], {"a": 0}, 10)
    with pytest.raises(ValueError):
        fn(["a"], {"a": 1}, 0)


def test_aggregate_docs_first_occurrence_order():
    hits = [
        {"doc_id": "d1", "unit_id": "u1"},
        {"doc_id": "d2", "unit_id": "u2"},
        {"doc_id": "d1", "unit_id": "u3"},  # second chunk of d1: ignored
        {"doc_id": None, "unit_id": "u4"},  # no document: dropped
        {"doc_id": "d3", "unit_id": "u5"},
    ]
    assert aggregate_docs(hits) == ["d1", "d2", "d3"]
    assert aggregate_docs([]) == []


# -- properties ------------------------------------------------------------------------------

doc_ids = st.sampled_from([f"d{i}" for i in range(30)])
qrels_st = st.dictionaries(doc_ids, st.integers(0, 3), min_size=1, max_size=15).filter(
    lambda q: any(g > 0 for g in q.values())
)


@given(qrels_st, st.lists(doc_ids, max_size=40), st.integers(1, 50))
def test_metrics_bounded(qrels, ranking, k):
    for fn in (ndcg_at_k, recall_at_k, mrr_at_k):
        v = fn(ranking, qrels, k)
        assert 0.0 <= v <= 1.0 + 1e-12


@given(qrels_st, st.lists(doc_ids, unique=True, max_size=10), st.integers(1, 50))
def test_ideal_ranking_scores_one(qrels, noise, k):
    # relevant docs by grade (best first), then unjudged/irrelevant noise
    ideal = sorted((d for d, g in qrels.items() if g > 0), key=lambda d: -qrels[d])
    ranking = ideal + [d for d in noise if d not in ideal]
    assert ndcg_at_k(ranking, qrels, k) == pytest.approx(1.0)
    assert mrr_at_k(ranking, qrels, k) == 1.0
    if k >= len(ideal):
        assert recall_at_k(ranking, qrels, k) == 1.0


@given(qrels_st, st.permutations([f"d{i}" for i in range(30)]), st.integers(1, 30))
def test_ndcg_never_beats_ideal_and_swapping_in_relevant_helps(qrels, perm, k):
    v = ndcg_at_k(perm, qrels, k)
    assert v <= 1.0 + 1e-12
    # moving the best relevant doc to rank 1 never lowers nDCG@k
    best = max(qrels, key=lambda d: qrels[d])
    moved = [best] + [d for d in perm if d != best]
    assert ndcg_at_k(moved, qrels, k) >= v - 1e-12


# -- loader ----------------------------------------------------------------------------------


@pytest.mark.skipif(NO_ADI is not None, reason=str(NO_ADI))
def test_load_beir_adi():
    corpus, queries, qrels = load_beir(evaldir.dataset("classic-adi"))
    assert len(corpus) == 82
    assert len(queries) == 35
    assert set(qrels) == set(queries)
    assert sum(len(v) for v in qrels.values()) == 170  # SOURCE.md: 170 binary qrels
    assert all(set(doc) == {"title", "text"} for doc in corpus.values())
    assert all(g == 1 for v in qrels.values() for g in v.values())
    assert all(d in corpus for v in qrels.values() for d in v)


@pytest.mark.skipif(NO_SCIFACT is not None, reason=str(NO_SCIFACT))
def test_load_beir_scifact_test_split():
    corpus, queries, qrels = load_beir(evaldir.dataset("scifact"), "test")
    assert len(corpus) == 5183
    assert len(queries) == 300  # only the queries with test qrels, as BEIR loads them
    assert sum(len(v) for v in qrels.values()) == 339
    assert all(d in corpus for v in qrels.values() for d in v)


def test_load_beir_missing_header_rejected(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "1", "title": "t", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q", "text": "x"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("q\t1\t1\n")
    with pytest.raises(ValueError):
        load_beir(tmp_path)
