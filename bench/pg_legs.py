"""Both search legs through the storage Protocols, embedded backend vs PostgreSQL, in one run.

The same synthetic Units (Zipf-distributed words, clustered random vectors) go into a fresh
SQLite backend and a fresh PostgreSQL database (a local server from the wheel, durable
settings); then, for a 1 % owner-only reader, a 10 % group reader and an unfiltered one: the
dense leg's latency, plan and recall@10 against brute force, and the lexical leg's latency and
whether PostgreSQL's top 10 is the embedded backend's. Plus the ingest rate of each. Client-side
wall time per call, one thread, after one warm-up pass; the machine's load is in the header.

    .venv/bin/python -m bench.pg_legs --units 20000 --dim 384 --queries 30
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import superchargedb  # noqa: F401  (onnxruntime before usearch, D-101)
from bench.common.env import environment
from bench.common.paths import REPO
from bench.common.report import command, write_report
from bench.common.stats import pct
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import UnitRecord
from superchargedb.storage.sqlite.backend import SqliteBackend

KEY = bytes(range(32))
K = 10


def corpus(n: int, dim: int, seed: int) -> tuple[list[UnitRecord], np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    units = []
    for i in range(n):
        words = rng.choice(len(vocab), size=int(rng.integers(20, 120)), p=p)
        rare = i % 100 == 0  # 1 %: owned by carol, shared with nobody
        units.append(
            UnitRecord(
                unit_id=f"u{i}",
                scope=f"acme/s{i % 5}",
                doc_id=f"d{i // 4}",
                plane="text",
                modality="text",
                text=" ".join(vocab[w] for w in words),
                acl_owner="carol" if rare else "bob",
                acl_groups=() if rare else (("g10", "all") if i % 10 == 1 else ("all",)),
                content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
                created_at=1_700_000_000_000 + i,
            )
        )
    centers = rng.standard_normal((64, dim)).astype(np.float32)
    vecs = centers[rng.integers(0, 64, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return units, vecs, vocab


def readers() -> dict[str, ReadFilter]:
    def rf(name: str, groups: set[str]) -> ReadFilter:
        return ReadFilter(name, ("acme",), frozenset(groups), ("text",))

    return {"1%": rf("carol", set()), "10%": rf("erin", {"g10"}), "none": rf("alice", {"all"})}


def load(b: Any, units: list[UnitRecord], vecs: np.ndarray) -> float:
    t0 = time.perf_counter()
    for s in range(0, len(units), 200):
        with b.write() as tx:
            for u, v in zip(units[s : s + 200], vecs[s : s + 200], strict=True):
                tx.units.insert(u, v)
        b.outbox.replay()
    return len(units) / (time.perf_counter() - t0)


def timed(fn: Any, args: list[Any]) -> tuple[list[Any], list[float]]:
    for a in args:  # warm-up pass
        fn(*a)
    out, ms = [], []
    for a in args:
        t0 = time.perf_counter()
        out.append(fn(*a))
        ms.append((time.perf_counter() - t0) * 1000)
    return out, ms


def forced_plans(pg: Any, rf: ReadFilter, qvecs: list[Any], truth: list[set[str]]) -> Any:
    """Each dense plan forced, whatever the rule would pick: what it costs and recalls here,
    and what deciding (the bounded count at exact_max) costs."""
    from superchargedb.storage.postgres import vectors as pv
    from superchargedb.storage.postgres.filter_sql import count_admitted

    out: dict[str, Any] = {}
    with pg.pool.connection() as conn:
        runs = {
            "exact": lambda q: pv._exact(conn, "text", pv._query(q), K, rf),
            "hnsw": lambda q: pv._hnsw(conn, "text", pv._query(q), K, rf, pv.MAX_SCAN_TUPLES),
        }
        for plan, fn in runs.items():
            got, ms = timed(fn, [(q,) for q in qvecs])
            rec = [len({r[0] for r in g} & t) / K for g, t in zip(got, truth, strict=True)]
            out[f"forced_{plan}_ms"] = pct(ms)
            out[f"forced_{plan}_recall@10"] = round(float(np.mean(rec)), 4)
        _, ms = timed(lambda: count_admitted(conn, rf, pg.exact_max, "text"), [()] * len(qvecs))
        out["plan_count_ms"] = pct(ms)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--units", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)

    from superchargedb.stack import postgres
    from superchargedb.storage.postgres.backend import PgBackend

    units, vecs, vocab = corpus(args.units, args.dim, 1)
    rng = np.random.default_rng(2)
    qvecs = [vecs[i] + 0.3 * rng.standard_normal(args.dim).astype(np.float32)
             for i in rng.integers(0, len(units), args.queries)]  # fmt: skip
    qtext = [" ".join(vocab[j] for j in rng.integers(20, 2000, int(rng.integers(1, 4))))
             for _ in range(args.queries)]  # fmt: skip
    stored = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    stored = stored.astype(np.float16).astype(np.float32)

    tmp = Path(tempfile.mkdtemp(prefix="scdb-pglegs-"))
    # Its own temp dir: the postgres user must own it (and tmp's 0700 would keep it out).
    pg_dir = Path(tempfile.mkdtemp(prefix="scdb-pglegs-pg-"))
    server = lite = pg = None
    try:
        server = postgres.start(pg_dir, durable=True)
        with __import__("psycopg").connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        lite = SqliteBackend.open(tmp / "lite", dim=args.dim, model_id="m", audit_key=KEY)
        pg = PgBackend.open(
            server.url("bench"), dim=args.dim, model_id="m", audit_key=KEY, objects_dir=tmp / "o"
        )
        report: dict[str, Any] = {
            "command": command("pg_legs", argv),
            "environment": environment(),
            "units": args.units,
            "dim": args.dim,
            "queries": args.queries,
            "ingest_units_per_s": {"sqlite": round(load(lite, units, vecs), 1)},
        }
        report["ingest_units_per_s"]["postgres"] = round(load(pg, units, vecs), 1)
        with __import__("psycopg").connect(server.url("bench"), autocommit=True) as conn:
            conn.execute("ANALYZE")
        rows: dict[str, Any] = {}
        for name, rf in readers().items():
            ok = np.array([rf.admits(scope=u.scope, owner=u.acl_owner, groups=u.acl_groups,
                                     plane="text", modality="text") for u in units])  # fmt: skip
            row: dict[str, Any] = {"admitted": int(ok.sum())}
            truth = []
            for q in qvecs:
                s = stored @ (q / np.linalg.norm(q))
                s[~ok] = -np.inf
                truth.append({units[i].unit_id for i in np.argsort(-s)[:K]})
            for kind, b in (("sqlite", lite), ("postgres", pg)):
                got, ms = timed(b.vectors.search, [("text", q, K, rf) for q in qvecs])
                rec = np.mean(
                    [len({h.unit_id for h in g} & t) / K for g, t in zip(got, truth, strict=True)]
                )
                row[f"dense_{kind}_ms"] = pct(ms)
                row[f"dense_{kind}_recall@10"] = round(float(rec), 4)
                lex, lms = timed(b.lexical.search, [(t, K, rf) for t in qtext])
                row[f"lexical_{kind}_ms"] = pct(lms)
                row[f"lexical_{kind}_top10"] = [[h.unit_id for h in r] for r in lex]
            row["dense_postgres_plan"] = pg.vectors.search_planned("text", qvecs[0], K, rf)[1]
            row.update(forced_plans(pg, rf, qvecs, truth))
            tops = row.pop("lexical_sqlite_top10"), row.pop("lexical_postgres_top10")
            same = [a == b for a, b in zip(*tops, strict=True)]
            row["lexical_same_top10"] = f"{sum(same)}/{len(same)}"
            rows[name] = row
        report["filters"] = rows
    finally:
        for b in (lite, pg):
            if b is not None:
                b.close()
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(pg_dir, ignore_errors=True)

    md = [
        "# Search legs: embedded backend vs PostgreSQL (`bench/pg_legs.py`)",
        "",
        f"`{report['command']}`; {args.units} synthetic Units, {args.dim}-d clustered random"
        f" vectors, {args.queries} queries per row, k = {K}; load average"
        f" {report['environment']['loadavg']} on {report['environment']['cpus']} CPUs.",
        "",
        f"Ingest (Units/s, batches of 200, replay after each): sqlite"
        f" {report['ingest_units_per_s']['sqlite']}, postgres"
        f" {report['ingest_units_per_s']['postgres']}.",
        "",
        "| filter | admitted | dense p50 / p95 ms sqlite | postgres | plan | recall@10 sqlite"
        " | postgres | lexical p50 / p95 ms sqlite | postgres | same top 10 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["filters"].items():

        def ms(key: str, r: dict[str, Any] = r) -> str:
            return f"{r[key]['p50']} / {r[key]['p95']}"

        md.append(
            f"| {name} | {r['admitted']} | {ms('dense_sqlite_ms')} | {ms('dense_postgres_ms')}"
            f" | {r['dense_postgres_plan']} | {r['dense_sqlite_recall@10']}"
            f" | {r['dense_postgres_recall@10']} | {ms('lexical_sqlite_ms')}"
            f" | {ms('lexical_postgres_ms')} | {r['lexical_same_top10']} |"
        )
    md += [
        "",
        "PostgreSQL's dense plans forced (whatever the rule picks): p50 / p95 ms and recall@10,"
        " and the bounded count that decides.",
        "",
        "| filter | exact ms | exact recall | hnsw ms | hnsw recall | count ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in report["filters"].items():
        e, h, c = r["forced_exact_ms"], r["forced_hnsw_ms"], r["plan_count_ms"]
        md.append(
            f"| {name} | {e['p50']} / {e['p95']} | {r['forced_exact_recall@10']}"
            f" | {h['p50']} / {h['p95']} | {r['forced_hnsw_recall@10']}"
            f" | {c['p50']} / {c['p95']} |"
        )
    md += [
        "",
        "The embedded backend's rows are its Protocol adapter's (`SqliteBackend.vectors`, which"
        " resolves the readable ids from the catalog on every call), not the served search path"
        " (cached candidates, the signature mask): compare the two backends' lexical columns and"
        " the plans, not the embedded dense latency.",
    ]
    for p in write_report(args.out, "pg_legs", report, "\n".join(md) + "\n"):
        print(p)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
