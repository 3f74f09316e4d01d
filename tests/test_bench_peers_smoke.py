"""`superchargedb bench --quick` on ADI: quality + ours vs LanceDB vs txtai, end to end.

Asserts the reports' schema and sanity bounds (D-77):
our nDCG@10 on ADI > 0.3, no NaN, p95 >= p50 > 0 in every cell, every peer actually ran, no hit
outside its filter, and the same vectors really were fed to every system (identical dense-only
quality). Skipped, with the reason, only when the `bench` extra is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bench.common import evaldir
from report_numbers import numbers

NO_ADI = evaldir.skip_reason("classic-adi")  # the data comes from SCDB_EVAL_DIR
MISSING = [m for m in ("lancedb", "txtai", "matplotlib") if importlib.util.find_spec(m) is None]
SYSTEMS = ("ours", "lancedb", "txtai")
CELLS = (
    "hybrid/100%/c1",
    "hybrid/100%/c8",
    "hybrid/10%/c1",
    "hybrid/1%/c1",
    "dense/100%/c1",
    "lexical/100%/c1",
)


def _pct_ok(p: dict[str, Any], what: str) -> None:
    assert p is not None, what
    assert p["p99"] >= p["p95"] >= p["p50"] > 0, (what, p)
    assert p["n"] > 0, what


@pytest.mark.slow
@pytest.mark.skipif(NO_ADI is not None, reason=str(NO_ADI))
@pytest.mark.skipif(
    bool(MISSING),
    reason=f"bench extra not installed ({', '.join(MISSING)} missing):"
    " run scripts/install_bench.sh",
)
def test_bench_quick_adi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from superchargedb.cli.bench import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a group, so that the command is invoked by name as in the real CLI
        pass

    register(app)
    out = tmp_path / "results"
    monkeypatch.setenv("SCDB_BENCH_CACHE", str(tmp_path / "cache"))  # embeds ADI afresh
    adi = str(evaldir.dataset("classic-adi"))
    res = CliRunner().invoke(
        app, ["bench", "--dataset", adi, "--quick", "--out", str(out), "--rounds", "2"]
    )
    assert res.exit_code == 0, res.output

    # -- quality.json --
    q = json.loads((out / "quality.json").read_text())
    assert q["benchmark"] == "quality" and q["dataset"]["name"] == "classic-adi"
    assert set(q["modes"]) == {"lexical", "dense", "hybrid"}
    for mode, m in q["modes"].items():
        for k in ("ndcg@10", "recall@100", "mrr@10"):
            assert 0.0 < m[k] <= 1.0, (mode, k, m[k])
        _pct_ok(m["latency_ms"]["in_process"], f"quality {mode}")
    assert q["modes"]["hybrid"]["ndcg@10"] > 0.3
    assert q["hybrid+rerank"]["ran"] is False and "reranker" in q["hybrid+rerank"]["reason"]
    assert (out / "quality.md").read_text().startswith("# Retrieval quality: classic-adi")

    # -- peers.json --
    r = json.loads((out / "peers.json").read_text())
    assert r["benchmark"] == "peers"
    for path, v in numbers(r):
        assert math.isfinite(v), f"{path} is {v}"
    assert r["dataset"]["docs"] == 82 and r["dataset"]["queries_scored"] == 30
    assert r["hybrid+rerank"]["ran"] is False
    assert set(r["systems"]) == set(SYSTEMS)
    for s in SYSTEMS:
        rep = r["systems"][s]
        assert rep["ran"] is True, (s, rep.get("error"))
        assert rep["units"] == r["dataset"]["units"] >= 82, s
        assert rep["ingest"]["docs_per_s"] > 0 and rep["index_build_s"] >= 0, s
        assert rep["peak_rss_mb"] >= rep["rss_after_import_mb"] > 10, s
        assert rep["config"], s  # the configuration is printed
        for cell in CELLS:
            _pct_ok(rep["latency_ms"][cell], f"{s} {cell}")
            assert rep["qps"][cell] > 0, (s, cell)
            assert rep["filter_violations"][cell] == 0, (s, cell)
        assert set(rep["quality"]) == {"lexical", "dense", "hybrid"}, s
        for mode, m in rep["quality"].items():
            for k in ("ndcg@10", "recall@100", "mrr@10"):
                assert 0.0 < m[k] <= 1.0, (s, mode, k)
        assert rep["quality"]["hybrid"]["ndcg@10"] > 0.3, s
        for level in ("10%", "1%"):
            assert rep["filtered_fill"][f"hybrid/{level}/c1"] > 0.5, (s, level)
    ours = r["systems"]["ours"]
    assert ours["quality"]["hybrid"]["ndcg@10"] > 0.3
    assert ours["ingest"]["live_embedding_s"] == 0  # the cache was warmed in another process
    _pct_ok(ours["latency_excluding_embed_ms"]["hybrid/100%/c1"], "ours excl. embed")
    # Same Units, same vectors: the dense-only rankings must agree across the systems.
    for peer in ("lancedb", "txtai"):
        a = ours["quality"]["dense"]["ndcg@10"]
        b = r["systems"][peer]["quality"]["dense"]["ndcg@10"]
        assert abs(a - b) < 0.02, (peer, a, b)
        ratios = r["ratios"][peer]
        assert all(v is not None and v >= 0 for v in ratios.values()), (peer, ratios)
    live = r["embedding"]["live_sample"]  # the embedding cost, measured on its own line
    _pct_ok(live["query_ms"], "live query embedding")
    assert live["units_per_s"] > 0
    http = r["http_overhead"]
    _pct_ok(http["http_ms"], "http")
    _pct_ok(http["in_process_ms"], "in-process (paired with http)")
    assert http["http_ms"]["p50"] > 0

    md = (out / "peers.md").read_text()
    assert md.startswith("# Side by side")
    for needle in ("ours/lancedb", "ours/txtai", "HTTP overhead", "Configurations", "loaded"):
        assert needle in md, needle
    for png in ("peers_latency.png", "peers_quality_latency.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, png
