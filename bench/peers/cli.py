"""``python -m bench.peers``: arguments, the run, the report files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.common import evaldir
from bench.common.paths import CACHE_DIR, RESULTS
from bench.common.report import write_report
from bench.peers.cells import LANCEDB_ANN_MIN_ROWS, SYSTEMS
from bench.peers.child import child_main
from bench.peers.markdown import add_scale_section, markdown
from bench.peers.plots import plots
from bench.peers.run import run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument(
        "--dataset", type=Path, help="a BEIR folder (default: classic-adi/ of --eval-dir)"
    )
    evaldir.add_argument(ap)
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit-docs", type=int)
    ap.add_argument("--limit-queries", type=int)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (query batches)")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--lancedb-ann-min-rows", type=int, default=LANCEDB_ANN_MIN_ROWS)
    ap.add_argument(
        "--scale",
        type=int,
        help="latency at N Units of bench/scale_data.py (bulk-loaded with their vectors) instead"
        " of a dataset; SciFact test claims as queries; writes peers_scale<N>.*",
    )
    ap.add_argument("--work-dir", type=Path, help="where the temporary data dirs go")
    ap.add_argument(
        "--max-docs",
        type=int,
        help="with --scale: source documents of the text/vector pool (smoke runs)",
    )
    ap.add_argument(
        "--txtai-unlocked",
        action="store_true",
        help="call txtai concurrently without its Application's lock (crashed in trials)",
    )
    args = ap.parse_args(argv)
    if args.child:
        assert args.work is not None
        return child_main(args.child, args.work)
    args.argv = argv if argv is not None else sys.argv[1:]
    # Stops here, naming SCDB_EVAL_DIR, when the data's folder is not given (--scale reads the
    # corpora of the eval folder too).
    args.eval_dir = evaldir.eval_dir(args.eval_dir) if args.scale else args.eval_dir
    args.dataset = None if args.scale else evaldir.dataset_arg(args, "classic-adi")
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args)
    prefix = f"peers_scale{args.scale}" if args.scale else "peers"
    report["plots"] = plots(report, args.out, prefix)
    md = markdown(report)
    raw = {s: rep.pop("_latency_raw", None) for s, rep in report["systems"].items()}
    report["latency_samples_ms"] = raw
    write_report(args.out, prefix, report, md)
    if args.scale and (args.out / "peers.md").exists():
        add_scale_section(args.out / "peers.md", report, prefix)
    print(md)
    print(f"wrote {args.out}/{prefix}.json, {prefix}.md and {report['plots']}", file=sys.stderr)
    return 0
