"""Support-check benchmark: catch rate and false-removal rate of the offline checker.

Runs ``LexicalDenseChecker`` (MiniLM int8) over ``tests/answer_cases.py`` and reports, for the
TUNE split, the TEST split (and its five blind rounds: cases written after the checker was
frozen, see tests/answer_cases.py) and ALL cases, the share of adversarial sentences caught (marked
unsupported) and the share of faithful sentences falsely removed, per kind too. D-36
asks for >= 90 % caught with <= 10 % false removals. Also times one check against three
passages, cold (nothing cached) and warm (passages primed, as the answer pipeline does).

``--tune`` grid-searches the thresholds on the TUNE split only and prints the best ones; the
module constants in ``superchargedb/answer/verify.py`` were set from its output. TEST is never
used for choosing anything.

    .venv/bin/python -m bench.support_check          # writes bench/results/support_check.json
    .venv/bin/python -m bench.support_check --tune   # also searches thresholds on TUNE
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common.paths import REPO, RESULTS
from bench.common.report import write_report
from superchargedb.answer.verify import (
    LexicalDenseChecker,
    Measurement,
    Thresholds,
    analyse,
)
from superchargedb.models.embedder import make_embedder


def _answer_cases() -> Any:
    """tests/answer_cases.py, the hand-written cases the test suite also checks, loaded by path
    (tests/ is not a package, and the import path stays as it is)."""
    spec = importlib.util.spec_from_file_location(
        "answer_cases", REPO / "tests" / "answer_cases.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("answer_cases", mod)  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


_AC = _answer_cases()
BLIND_FIRST_RUNS, CASES, Case = _AC.BLIND_FIRST_RUNS, _AC.CASES, _AC.Case

GRID: dict[str, tuple[float, ...]] = {
    "sim_min": (0.35, 0.4, 0.45, 0.5, 0.55),
    "coverage_min": (0.3, 0.4, 0.5, 0.6),
    "sim_strong": (0.55, 0.6, 0.65, 0.7),
    "coverage_strong": (0.6, 0.7, 0.8),
    "clause_coverage_min": (0.25, 0.35, 0.45, 0.55),
    "wrong_citation_margin": (0.05, 0.1, 0.15, 0.2, 0.3),
}


def rates(rows: list[tuple[Case, bool]]) -> dict[str, Any]:
    """Catch rate over adversarial cases, false-removal rate over good ones, and per kind."""
    adv = [ok for c, ok in rows if not c.supported]
    good = [ok for c, ok in rows if c.supported]
    kinds: dict[str, list[bool]] = {}
    for c, ok in rows:
        kinds.setdefault(c.kind, []).append(ok)
    return {
        "adversarial": len(adv),
        "caught": sum(not ok for ok in adv),
        "catch_rate": round(sum(not ok for ok in adv) / max(1, len(adv)), 4),
        "good": len(good),
        "removed": sum(not ok for ok in good),
        "false_removal_rate": round(sum(not ok for ok in good) / max(1, len(good)), 4),
        "per_kind": {
            k: {"n": len(v), "marked_supported": sum(v), "marked_unsupported": len(v) - sum(v)}
            for k, v in sorted(kinds.items())
        },
    }


def decide_all(
    checker: LexicalDenseChecker, measured: list[tuple[Case, Measurement]]
) -> list[tuple[Case, bool]]:
    return [(c, checker.decide(m).supported) for c, m in measured]


def tune(embedder: Any, measured: list[tuple[Case, Measurement]]) -> dict[str, Any]:
    """Best thresholds on TUNE: maximise catch - 2 * false removal (a removed true sentence
    costs the reader more than a kept false one is likely to), then prefer the combination
    closest to the centre of the tied ones (the widest margin on every side)."""
    tune_rows = [(c, m) for c, m in measured if c.split == "tune"]
    keys = list(GRID)
    scored: list[tuple[float, tuple[float, ...]]] = []
    for combo in itertools.product(*(GRID[k] for k in keys)):
        t = replace(Thresholds(), **dict(zip(keys, combo, strict=True)))
        r = rates(decide_all(LexicalDenseChecker(embedder, thresholds=t), tune_rows))
        scored.append((r["catch_rate"] - 2 * r["false_removal_rate"], combo))
    best = max(s for s, _ in scored)
    ties = [combo for s, combo in scored if s == best]
    centre = [statistics.mean(c[i] for c in ties) for i in range(len(keys))]
    spans = [max(GRID[k]) - min(GRID[k]) for k in keys]
    chosen = min(
        ties, key=lambda c: sum(((c[i] - centre[i]) / spans[i]) ** 2 for i in range(len(keys)))
    )
    return {"objective": best, "ties": len(ties), "chosen": dict(zip(keys, chosen, strict=True))}


def timings(embedder: Any) -> dict[str, float]:
    """One sentence against the three passages of each 3-passage context: cold (nothing
    cached), and warm (passages primed; only the sentence is embedded)."""
    contexts: dict[tuple[str, ...], list[Case]] = {}
    for c in CASES:
        if len(c.passages) == 3:
            contexts.setdefault(c.passages, []).append(c)
    cold: list[float] = []
    warm: list[float] = []
    for passages, cs in contexts.items():
        checker = LexicalDenseChecker(embedder)
        analyse.cache_clear()
        t0 = time.perf_counter()
        checker.check(cs[0].sentence, passages)
        cold.append(time.perf_counter() - t0)
        for c in cs[1:6]:
            t0 = time.perf_counter()
            checker.check(c.sentence, c.cited, c.others)
            warm.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for c in CASES[:20]:
        embedder.embed([c.sentence])
    one = (time.perf_counter() - t0) / 20
    return {
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "one_embedding_ms": round(1000 * one, 1),  # the unit cost: scale by it across machines
        "cold_ms_p50": round(1000 * statistics.median(cold), 1),
        "warm_ms_p50": round(1000 * statistics.median(warm), 1),
        "warm_ms_max": round(1000 * max(warm), 1),
        "n_cold": len(cold),
        "n_warm": len(warm),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tune", action="store_true", help="grid-search thresholds on TUNE")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    embedder = make_embedder("minilm-int8")
    checker = LexicalDenseChecker(embedder)
    t0 = time.perf_counter()
    measured = [(c, checker.measure(c.sentence, c.cited, c.others, lazy=False)) for c in CASES]
    measure_s = time.perf_counter() - t0
    decided = decide_all(checker, measured)

    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.python_version()}",
        "model": embedder.model_id,
        "thresholds": asdict(checker.t),
        "cases": len(CASES),
        "measure_s": round(measure_s, 2),
        "splits": {
            "tune": rates([(c, ok) for c, ok in decided if c.split == "tune"]),
            "test": rates([(c, ok) for c, ok in decided if c.split == "test"]),
            "test_blind1": rates([(c, ok) for c, ok in decided if c.blind == 1]),
            "test_blind2": rates([(c, ok) for c, ok in decided if c.blind == 2]),
            "test_blind3": rates([(c, ok) for c, ok in decided if c.blind == 3]),
            "test_blind4": rates([(c, ok) for c, ok in decided if c.blind == 4]),
            "test_blind5": rates([(c, ok) for c, ok in decided if c.blind == 5]),
            "all": rates(decided),
        },
        "misses": [
            {
                "id": c.id,
                "split": f"blind{c.blind}" if c.blind else c.split,
                "kind": c.kind,
                "sentence": c.sentence,
            }
            for c, ok in decided
            if ok != c.supported
        ],
        "timing": timings(embedder),
        "blind_first_runs": {
            str(r): {"caught": f"{c}/{a}", "falsely_removed": f"{x}/{g}"}
            for r, (c, a, x, g) in BLIND_FIRST_RUNS.items()
        },
        "blind_first_runs_pooled": {
            "rounds 1-4 (checker before the slot-swap guard)": pooled([1, 2, 3, 4]),
            "round 5 (after it)": pooled([5]),
        },
    }
    if args.tune:
        report["tuning"] = tune(embedder, measured)

    for name, r in report["splits"].items():
        print(
            f"{name.upper():>5}: caught {r['caught']}/{r['adversarial']} = {r['catch_rate']:.1%}"
            f"   false removals {r['removed']}/{r['good']} = {r['false_removal_rate']:.1%}"
        )
    print("\nper kind (ALL): n, marked unsupported")
    for kind, k in report["splits"]["all"]["per_kind"].items():
        print(f"  {kind:<22} {k['n']:>3} {k['marked_unsupported']:>4}")
    print("\nwrong decisions:")
    for m in report["misses"]:
        print(f"  [{m['split']}] {m['kind']}: {m['sentence']}")
    print("\nblind rounds, first runs (recorded in tests/answer_cases.py):")
    for name, r in report["blind_first_runs_pooled"].items():
        print(f"  {name}: caught {r['caught']}, false removals {r['falsely_removed']}")
    print("\ntiming:", report["timing"])
    if args.tune:
        print("\ntuning on TUNE:", report["tuning"])
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(args.out, "support_check", report, markdown(report))
    print(f"\nwrote {args.out / 'support_check.json'} and support_check.md")


def pooled(rounds: list[int]) -> dict[str, str]:
    c, a, x, g = (sum(BLIND_FIRST_RUNS[r][i] for r in rounds) for i in range(4))
    return {"caught": f"{c}/{a} = {c / a:.1%}", "falsely_removed": f"{x}/{g} = {x / g:.1%}"}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Support-check benchmark",
        "",
        f"Generated {report['when']} by `bench/support_check.py` ({report['machine']},"
        f" {report['model']}). D-36 asks for >= 90 % of adversarial sentences caught"
        " with <= 10 % of good ones falsely removed.",
        "",
        "## Current checker on every split",
        "",
        "| split | caught | false removals |",
        "|---|---|---|",
    ]
    for name, r in report["splits"].items():
        lines.append(
            f"| {name} | {r['caught']}/{r['adversarial']} = {r['catch_rate']:.1%}"
            f" | {r['removed']}/{r['good']} = {r['false_removal_rate']:.1%} |"
        )
    lines += [
        "",
        "TUNE chose the thresholds; TEST's guards were designed while reading all"
        " hand-written cases, and rounds 1-4 were fixed after their first runs, so their current"
        " numbers are not blind. Round 5 was not fixed: its current numbers are its first run.",
        "",
        "## Blind rounds, first runs (the honest estimate for unseen sentences)",
        "",
        "| round | caught | false removals |",
        "|---|---|---|",
    ]
    for r, v in report["blind_first_runs"].items():
        lines.append(f"| {r} | {v['caught']} | {v['falsely_removed']} |")
    for name, v in report["blind_first_runs_pooled"].items():
        lines.append(f"| {name} | {v['caught']} | {v['falsely_removed']} |")
    lines += ["", "## Wrong decisions (current checker)", ""]
    for m in report["misses"]:
        lines.append(f"- [{m['split']}] {m['kind']}: {m['sentence']}")
    tm = report["timing"]
    lines += [
        "",
        f"Timing: one embedding {tm['one_embedding_ms']} ms; one check against three passages"
        f" cold {tm['cold_ms_p50']} ms, warm {tm['warm_ms_p50']} ms (p50; load average"
        f" {tm['load_avg_1min']}).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
