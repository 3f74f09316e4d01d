"""The Markdown report and the plot of bench/stack_scale.py (JSON in, Markdown and a PNG out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common.plotting import pyplot

LEVEL_NAMES = ("1%", "10%", "none")
ARMS = ("embedded", "stack")


def fmt(v: Any, nd: int = 1) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def _pp(d: dict[str, Any] | None) -> str:
    return "—" if d is None else f"{fmt(d['p50'])} / {fmt(d['p95'])}"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**NOT met**"


def markdown(r: dict[str, Any]) -> str:
    env, cfg, g = r["environment"], r["config"], r["goals"]
    thr = r["throughput"]["summary"]
    lines = [
        "# The server stack vs the embedded default at scale (`bench/stack_scale.py`)",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs shared with other jobs; load average {env['loadavg']} at the start,"
        f" {env['loadavg_end']} at the end; {r['wall_s'] / 60:.1f} min in all).",
        "",
        f"- {cfg['units']:,} Units in each store: {cfg['data']}. Imported with the bulk import;"
        " the stack is PostgreSQL 16 + pgvector (durable), SeaweedFS (S3) and Valkey, started by"
        " the benchmark on loopback ports and stopped at the end.",
        f"- Searches: `POST /v1/search`, {cfg['mode']}, top_k {cfg['top_k']}, as the Units'"
        f" owner; {cfg['queries']}; {cfg['queries_per_level']} queries per filter. The query's"
        " scope selects ~1 % / ~10 % / all of the Units. Result cache, query-embedding cache and"
        " rate limits off, so every request embeds its query and runs both legs.",
        "",
        "## Hybrid latency, one request at a time (ms, p50 / p95)",
        "",
        "Each query went to the embedded server and to the one-process stack in turn, neither"
        " process confined. *Client* is the whole HTTP request (query embedding included);"
        " *search* is the server's traced time less the embedding.",
        "",
        "| filter | embedded client | stack client | embedded search | stack search |"
        " stack search stages (p50 ms) | same top 10 |",
        "|---|---|---|---|---|---|---|",
    ]
    for lv in LEVEL_NAMES:
        e, s = r["latency"]["embedded"][lv], r["latency"]["stack"][lv]
        stages = ", ".join(f"{k} {v:.1f}" for k, v in s["stages_p50"].items())
        lines.append(
            f"| {lv} | {_pp(e['wall_ms'])} | {_pp(s['wall_ms'])} | {_pp(e['server_less_embed_ms'])}"
            f" | {_pp(s['server_less_embed_ms'])} | {stages} |"
            f" {s['same_top10_as_embedded']}/{s['wall_ms']['n']} |"
        )
    ing = r["ingest"]
    imp = r["import"]
    lines += [
        "",
        f"Goal: the stack's 1 %-filter hybrid p50 at most {cfg['goals']['p50_ratio_1pct_max']:.0f}x"
        f" the embedded default's: {g['p50_ratio_1pct']:.2f}x through the API —"
        f" {_met(g['p50_ratio_1pct_met'])} (the search alone, embedding left out:"
        f" {g['p50_ratio_1pct_less_embed']:.2f}x).",
        "",
        "## Ingest",
        "",
        "| | `POST /v1/ingest` Units/s (batches of"
        f" {ing['embedded']['batch']}, server embeds) | batch p50 s | bulk import Units/s |"
        " bulk import s |",
        "|---|---|---|---|---|",
    ]
    for arm in ARMS:
        i, b = ing[arm], imp[arm]
        reused = " (reused)" if b.get("reused") else ""
        lines.append(
            f"| {arm} | {fmt(i['units_per_s'])} ({i['units']} Units) | {fmt(i['batch_s_p50'], 2)}"
            f" | {fmt(b.get('units_per_s'), 0)}{reused} | {fmt(b.get('wall_s'))} |"
        )
    quota = cfg["quota_cores_per_api_process"]
    lines += [
        "",
        f"## Throughput at concurrency {cfg['concurrency']}, each API process capped at"
        f" {quota if quota is not None else 'no'} core",
        "",
        f"A closed loop of {cfg['concurrency']} clients (outside the cgroups, a new connection per"
        " request so the kernel spreads them over the API processes) sends the latency phase's"
        " queries, for *all filters* the three filters in turn, for *1 % filter* those of the"
        f" 1 % filter only; {cfg['seconds_per_run']:.0f} s per run, {cfg['rounds']} rounds with"
        " the configurations interleaved, medians of the rounds. CPU per request: the API"
        " cgroups' `cpuacct.usage` over the window; *all* adds PostgreSQL's and Valkey's (an"
        " accounting-only group): they run outside the quota, on the same two cores.",
        "",
        "| queries | configuration | requests/s | latency p50 / p95 ms | API CPU ms/request |"
        " all CPU ms/request | non-200 |",
        "|---|---|---|---|---|---|---|",
    ]
    for mix, per in thr.items():
        for name, t in per.items():
            lines.append(
                f"| {mix} | {name} | {fmt(t['rps'], 2)} | {fmt(t['latency_p50_ms'])}"
                f" / {fmt(t['latency_p95_ms'])} | {fmt(t['api_cpu_ms_per_request'])}"
                f" | {fmt(t['cpu_ms_per_request'])} | {t['non_200']} |"
            )
    lines += [
        "",
        f"Goal: two half-core API processes at least {cfg['goals']['two_vs_one_min']}x the"
        " throughput of one: "
        + "; ".join(
            f"{mix} {v['ratio']:.2f}x — {_met(v['met'])}"
            for mix, v in g["two_vs_one_process"].items()
        )
        + ".",
        "",
        "Every run (cores used per API process = its cgroup's CPU seconds / window seconds;"
        " throttled = CFS periods in which the quota stopped it):",
        "",
        "| queries | configuration | round | requests/s | cores used per API process |"
        " throttled periods | /proc CPU s per process |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in r["throughput"]["runs"]:
        lines.append(
            f"| {run['mix']} | {run['config']} | {run['round']} | {fmt(run['rps'], 2)}"
            f" | {', '.join(f'{x:.2f}' for x in run['api_cores_used'])}"
            f" | {', '.join(str(x) for x in run['throttled_periods']) or '—'}"
            f" | {', '.join(f'{x:.1f}' for x in run['proc_stat_cpu_s'])} |"
        )
    lines += [
        "",
        "Server start (s, models and indexes loaded): "
        + ", ".join(f"{k} {v}" for k, v in r["server_start_s"].items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def plots(r: dict[str, Any], out: Path) -> list[str]:
    plt = pyplot()
    if plt is None:  # the bench extra is not installed: the report goes without a plot
        return []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = range(len(LEVEL_NAMES))
    for k, arm in enumerate(ARMS):
        cells = [r["latency"][arm][lv]["wall_ms"] for lv in LEVEL_NAMES]
        xs = [i + (k - 0.5) * 0.38 for i in x]
        ax1.bar(xs, [c["p50"] for c in cells], width=0.36, label=f"{arm} p50")
        ax1.scatter(xs, [c["p95"] for c in cells], marker="_", s=300, color="black")
    ax1.set_xticks(list(x), [f"filter {lv}" for lv in LEVEL_NAMES])
    ax1.set_ylabel("hybrid search, client ms (bar p50, tick p95)")
    ax1.legend()
    thr = r["throughput"]["summary"]
    mixes = list(thr)
    names = list(thr[mixes[0]])
    width = 0.8 / len(mixes)
    for k, mix in enumerate(mixes):
        xs = [i + (k - (len(mixes) - 1) / 2) * width for i in range(len(names))]
        ax2.bar(xs, [thr[mix][n]["rps"] for n in names], width=width * 0.95, label=mix)
        for run in r["throughput"]["runs"]:
            if run["mix"] == mix:
                x = xs[names.index(run["config"])]
                ax2.scatter(x, run["rps"], color="black", s=12, zorder=3)
    ax2.set_xticks(range(len(names)), names)
    ax2.legend()
    ax2.set_ylabel(f"requests/s at concurrency {r['config']['concurrency']} (dots: rounds)")
    ax2.set_title("each API process capped at half a core")
    fig.tight_layout()
    path = out / "stack_scale.png"
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path.name]
