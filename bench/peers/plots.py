"""The report's two plots: latency per hybrid cell, and quality against latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.common.plotting import pyplot
from bench.peers.cells import SYSTEMS, cell_key


def plots(r: dict[str, Any], out: Path, prefix: str = "peers") -> list[str]:
    plt = pyplot()
    if plt is None:  # no bench extra: the report goes without plots
        return []
    sysrep = r["systems"]
    ran = [s for s in SYSTEMS if sysrep.get(s, {}).get("ran")]
    colors = {"ours": "tab:blue", "lancedb": "tab:orange", "txtai": "tab:green"}
    keys = [k for k in r["config"]["cells"] if k.startswith("hybrid/")]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 4), sharey=True)
    for ax, key in zip(np.atleast_1d(axes), keys, strict=True):
        data = [sysrep[s]["_latency_raw"].get(key, [np.nan]) for s in ran]
        bp = ax.boxplot(data, showfliers=True, patch_artist=True, whis=(5, 95))
        for patch, s in zip(bp["boxes"], ran, strict=True):
            patch.set_facecolor(colors.get(s, "grey"))
            patch.set_alpha(0.6)
        ax.set_xticks(range(1, len(ran) + 1), ran)
        ax.set_yscale("log")
        ax.set_title(key)
        ax.grid(True, which="both", axis="y", alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("search latency, ms (log; whiskers p5-p95)")
    fig.suptitle(f"{r['dataset']['name']}: search latency per request (loaded 2-core machine)")
    fig.tight_layout()
    p1 = out / f"{prefix}_latency.png"
    fig.savefig(p1, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    markers = {"lexical": "s", "dense": "^", "hybrid": "o"}
    for s in ran:
        for mode, m in sysrep[s]["quality"].items():
            lat = sysrep[s]["latency_ms"].get(cell_key(mode, "100%", 1))
            if not lat:
                continue
            ax.scatter(
                lat["p50"],
                m["ndcg@10"],
                c=colors.get(s, "grey"),
                marker=markers.get(mode, "o"),
                s=70,
                label=f"{s} {mode}",
            )
            ax.annotate(
                f"{s}/{mode}",
                (lat["p50"], m["ndcg@10"]),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.margins(x=0.2, y=0.1)
    ax.set_xlabel("search p50, ms (concurrency 1, log)")
    ax.set_ylabel("nDCG@10")
    ax.set_title(f"{r['dataset']['name']}: quality vs latency")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    p2 = out / f"{prefix}_quality_latency.png"
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return [p1.name, p2.name]
