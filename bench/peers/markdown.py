"""The Markdown report (``peers.md``, ``peers_scale<N>.md``) and the scale summary in peers.md."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.peers.cells import HEADLINE, PEERS, SYSTEMS, cell_key


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def markdown(r: dict[str, Any]) -> str:
    ds, env = r["dataset"], r["environment"]
    sysrep = r["systems"]
    ran = [s for s in SYSTEMS if sysrep.get(s, {}).get("ran")]
    peers = [s for s in ran if s != "ours"]
    lines = [
        f"# Side by side: ours vs {', '.join(PEERS)} on {ds['name']}",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs, Python {env['python']}). Load average at start"
        f" {env['loadavg']}, at end {env.get('loadavg_end')}: **a shared, loaded machine; the"
        " absolute latencies are pessimistic, the ratios (measured alternately) are what to"
        " read.**",
        "",
        f"- {ds['docs']} documents, {ds.get('units', '?')} Units, {ds['queries_scored']}"
        f" queries (split `{ds['split']}`)"
        + (" — **limited run, not comparable with published numbers**" if ds["limited"] else "")
        + ".",
        f"- Every system indexes the same Units with the same vectors (`{r['config']['embedder']}`,"
        " precomputed); no system embeds while measured. top_k"
        f" = {r['config']['top_k']}; {r['config']['recall_note']}.",
        f"- {r['config']['rounds']} alternating rounds; each system in its own subprocess.",
        "",
        "## Headline (hybrid)",
        "",
        "| | " + " | ".join(ran) + "".join(f" | ours/{p}" for p in peers) + " |",
        "|---|" + "---|" * (len(ran) + len(peers)),
    ]

    def row(label: str, path: Sequence[str], nd: int, ratio_key: str | None) -> None:
        cells = []
        for s in ran:
            cur: Any = sysrep[s]
            for p in path:
                cur = cur.get(p) if isinstance(cur, dict) else None
            cells.append(fmt(cur, nd))
        rat = [fmt(r["ratios"].get(p, {}).get(ratio_key), 2) if ratio_key else "" for p in peers]
        lines.append(f"| {label} | " + " | ".join(cells + rat) + " |")

    row("nDCG@10", ("quality", "hybrid", "ndcg@10"), 3, "ndcg@10_hybrid")
    row("Recall@100", ("quality", "hybrid", "recall@100"), 3, None)
    row("MRR@10", ("quality", "hybrid", "mrr@10"), 3, None)
    row("ingest docs/s (vectors given)", ("ingest", "docs_per_s"), 1, "ingest_docs_per_s")
    row("index build s", ("index_build_s",), 2, "index_build_s")
    for c in (1, 8):
        for p in ("p50", "p95", "p99"):
            row(
                f"search {p} ms, concurrency {c}",
                ("latency_ms", f"hybrid/100%/c{c}", p),
                1,
                f"{p}_c{c}_ms",
            )
    row("throughput q/s, concurrency 8", ("qps", "hybrid/100%/c8"), 1, "qps_c8")
    row("search p50 ms, 1 % filter", ("latency_ms", "hybrid/1%/c1", "p50"), 1, "p50_filter1pct_ms")
    row("search p95 ms, 1 % filter", ("latency_ms", "hybrid/1%/c1", "p95"), 1, "p95_filter1pct_ms")
    row("peak RSS MB", ("peak_rss_mb",), 0, "peak_rss_mb")
    lines += [
        "",
        "Ratios are ours / peer: above 1 means ours is larger (better for nDCG, docs/s and q/s;"
        " worse for seconds, ms and MB).",
        "",
    ]
    vs = r.get("vs_faster_peer") or {}
    a, b = vs.get("hybrid/1%/c1:p50"), vs.get("hybrid/1%/c1:p95")
    if a and b:
        lines += [
            f"**Against the faster peer, hybrid with the 1 % filter:** p50 {fmt(a['ours_ms'])} ms"
            f" vs {fmt(a['peer_ms'])} ms ({a['peer']}), ours/peer **{a['ratio']:.2f}**; p95"
            f" {fmt(b['ours_ms'])} vs {fmt(b['peer_ms'])} ms ({b['peer']}), **{b['ratio']:.2f}**"
            " (the goal, ours at least 2x faster, is a ratio of 0.5 or less).",
            "",
        ]
    snip = r.get("snippets")
    if snip and a:
        w, wo = snip["with_ms"], snip["without_ms"]
        est = a["ours_ms"] + w["p50"] - wo["p50"]
        lines += [
            f"**Our default hits, with snippets** (highlighted windows, which the peers do not"
            f" build; the cells above leave them out), 1 % filter, paired per query after the"
            f" rounds (n={snip['n']}): p50 {fmt(w['p50'])} / p95 {fmt(w['p95'])} ms against"
            f" {fmt(wo['p50'])} / {fmt(wo['p95'])} without. This line runs alone (no peer in"
            f" between, warmer caches than the rounds), so its difference is what to read: the"
            f" rounds' p50 plus it, {fmt(est)} ms, would make ours/{a['peer']}"
            f" **{est / a['peer_ms']:.2f}** with snippets.",
            "",
        ]
    http = r.get("http_overhead")
    if http:
        lines.append(
            f"**Our HTTP overhead** (same hybrid queries, `POST /v1/search` on local uvicorn,"
            f" paired per query): p50 {fmt(http['overhead_ms']['p50'])} ms,"
            f" p95 {fmt(http['overhead_ms']['p95'])} ms over the in-process call"
            f" (in-process p50 {fmt(http['in_process_ms']['p50'])} ms, HTTP p50"
            f" {fmt(http['http_ms']['p50'])} ms; {http['response']})."
        )
    e = r["embedding"]
    live = e.get("live_sample")
    if live and live.get("query_ms"):
        lines.append(
            f"\n**Embedding** (`{e['model']}`, live, 1 thread, measured between phases on a sample;"
            " not in any number above): a query takes p50"
            f" {fmt(live['query_ms']['p50'])} / p95 {fmt(live['query_ms']['p95'])} ms; Units embed"
            f" at {fmt(live['units_per_s'])} /s ({live['units']} Units in batches of 32) — the"
            " cost every system would add to ingest and search with this model."
        )
    elif e.get("query_live_ms"):
        lines.append(
            f"\n**Query embedding** (`{e['model']}`, live, one query per call, not in any number"
            f" above): p50 {fmt(e['query_live_ms']['p50'])} ms, p95"
            f" {fmt(e['query_live_ms']['p95'])} ms."
        )
    else:
        lines.append(
            f"\n**Query embedding** (`{e['model']}`): all query vectors came from the cache in"
            " this run; see bench/results/quality.json for live embedding time."
        )
    lines += [
        "",
        f"**Hybrid + rerank:** not run: {r['hybrid+rerank']['reason']}.",
        "",
        "## Every cell (p50 / p95 / p99 ms; q/s)",
        "",
        "| cell | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for key in r["config"]["cells"]:
        cells = []
        for s in ran:
            p = sysrep[s]["latency_ms"].get(key)
            q = sysrep[s]["qps"].get(key)
            cells.append(
                f"{fmt(p['p50'])} / {fmt(p['p95'])} / {fmt(p['p99'])}; {fmt(q)}" if p else "—"
            )
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    if "ours" in ran:
        ex = sysrep["ours"]["latency_excluding_embed_ms"].get(HEADLINE)
        if ex:
            lines.append(
                f"\nOurs, {HEADLINE}, trace total minus the `embed` stage: p50 {fmt(ex['p50'])}"
                f" / p95 {fmt(ex['p95'])} ms (the stage is a cache lookup here)."
            )
    lines += [
        "",
        "## Quality per leg (nDCG@10 / Recall@100 / MRR@10)",
        "",
        "| mode | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for mode in ("lexical", "dense", "hybrid"):
        cells = []
        for s in ran:
            m = sysrep[s]["quality"].get(mode)
            cells.append(
                f"{m['ndcg@10']:.3f} / {m['recall@100']:.3f} / {m['mrr@10']:.3f}" if m else "—"
            )
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    if r.get("baselines"):
        lines += ["", "Published (full SciFact test; not comparable with a limited run):", ""]
        for b in r["baselines"]:
            lines.append(
                f"- {b['system']} ({b['compare_to']}): nDCG@10 {b['ndcg@10']}, Recall@100"
                f" {b['recall@100'] if b['recall@100'] is not None else '—'} — {b['source']}"
            )
    lines += [
        "",
        "## Filters (hybrid, concurrency 1)",
        "",
        "| | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for level in ("10%", "1%"):
        key = cell_key("hybrid", level, 1)
        lines.append(
            f"| {level}: hits returned / min(top_k, Units in filter) | "
            + " | ".join(fmt(sysrep[s]["filtered_fill"].get(key), 3) for s in ran)
            + " |"
        )
    lines.append(
        "| hits outside the filter (all cells) | "
        + " | ".join(str(sum(sysrep[s]["filter_violations"].values())) for s in ran)
        + " |"
    )
    lines += ["", "## Ingest and memory", ""]
    lines += [
        "| | " + " | ".join(ran) + " |",
        "|---|" + "---|" * len(ran),
    ]
    for label, fn in (
        ("version", lambda s: sysrep[s]["version"]),
        ("ingest s", lambda s: fmt(sysrep[s]["ingest"]["seconds"], 2)),
        ("of which live embedding s", lambda s: fmt(sysrep[s]["ingest"]["live_embedding_s"], 2)),
        (
            "ours' chunking alone, s (peers get chunks)",
            lambda s: fmt(sysrep[s]["ingest"].get("chunking_s_estimate"), 2),
        ),
        ("Units/s (vectors given)", lambda s: fmt(sysrep[s]["ingest"]["units_per_s"], 1)),
        ("index build s", lambda s: fmt(sysrep[s]["index_build_s"], 2)),
        ("index build is", lambda s: sysrep[s]["index_note"]),
        ("RSS after import MB", lambda s: fmt(sysrep[s]["rss_after_import_mb"], 0)),
        ("RSS after load MB", lambda s: fmt(sysrep[s]["rss_after_load_mb"], 0)),
        (
            "RSS after warm-up at concurrency 1 / then 8, MB",
            lambda s: (
                f"{fmt(sysrep[s]['rss_after_warmup_mb'].get('c1'), 0)} / "
                f"{fmt(sysrep[s]['rss_after_warmup_mb'].get('c8'), 0)}"
            ),
        ),
        ("peak RSS MB", lambda s: fmt(sysrep[s]["peak_rss_mb"], 0)),
    ):
        lines.append(f"| {label} | " + " | ".join(str(fn(s)) for s in ran) + " |")
    not_ran = [s for s in SYSTEMS if s in sysrep and not sysrep[s].get("ran")]
    for s in not_ran:
        lines.append(f"\n**{s}: not run** — {sysrep[s].get('error', 'unknown reason')}")
    lines += ["", "## Configurations", ""]
    for s in ran:
        lines.append(f"**{s}** {sysrep[s]['version']}")
        lines.append("")
        for k, v in sysrep[s]["config"].items():
            lines.append(f"- {k}: `{json.dumps(v) if not isinstance(v, str) else v}`")
        lines.append("")
    lines += [
        *(f"![{p.split('_', 1)[-1].removesuffix('.png')}]({p})\n" for p in r.get("plots", [])),
    ]
    return "\n".join(lines) + "\n"


def add_scale_section(path: Path, r: dict[str, Any], prefix: str) -> None:
    """Put (or replace) this scale run's summary in peers.md, between markers."""
    begin, end = f"<!-- {prefix} -->", f"<!-- /{prefix} -->"
    text = path.read_text()
    if begin in text and end in text:
        text = text[: text.index(begin)] + text[text.index(end) + len(end) :].lstrip("\n")
    n = r["dataset"]["scale"]
    lines = [
        begin,
        f"## At {n:,} Units (`python -m bench.peers --scale {n}`, {r['generated_at']})",
        "",
        f"Same query set (SciFact test claims, vectors given), Units of bench/scale_data.py"
        f" bulk-loaded with the same vectors into every system; latency only (no relevance"
        " judgments at scale: quality is the table above)."
        f" Full report: [{prefix}.md]({prefix}.md).",
        "",
        "| hybrid cell | "
        + " | ".join(s for s in SYSTEMS if r["systems"].get(s, {}).get("ran"))
        + " | ours / faster peer (p50, p95) |",
        "|---|" + "---|" * (1 + sum(1 for s in SYSTEMS if r["systems"].get(s, {}).get("ran"))),
    ]
    vs = r.get("vs_faster_peer", {})
    for key in r["config"]["cells"]:
        cells = []
        for s in SYSTEMS:
            rep = r["systems"].get(s, {})
            if rep.get("ran"):
                lat = rep["latency_ms"].get(key)
                cells.append(f"{fmt(lat['p50'])} / {fmt(lat['p95'])}" if lat else "—")
        a, b = vs.get(f"{key}:p50"), vs.get(f"{key}:p95")
        rat = f"{a['ratio']:.2f} ({a['peer']}), {b['ratio']:.2f} ({b['peer']})" if a and b else "—"
        lines.append(f"| {key} (p50 / p95 ms) | " + " | ".join(cells) + f" | {rat} |")
    snip, a = r.get("snippets"), vs.get("hybrid/1%/c1:p50")
    if snip and a:
        w, wo = snip["with_ms"]["p50"], snip["without_ms"]["p50"]
        est = a["ours_ms"] + w - wo
        lines += [
            "",
            f"Ours returns hits without snippets here, as the peers do. Our default, with"
            f" snippets, costs {fmt(w - wo)} ms more at the 1 % filter (p50, paired per query):"
            f" ~{fmt(est)} ms, ours/{a['peer']} ~{est / a['peer_ms']:.2f} with them.",
        ]
    lines += ["", end, ""]
    path.write_text(text.rstrip("\n") + "\n\n" + "\n".join(lines))
