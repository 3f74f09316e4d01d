"""Text ingest through the HTTP API against the raw embedding bound, in alternating rounds.

The server (``superchargedb serve --demo`` in its own process, default settings: one
onnxruntime thread, batch 32, 256 tokens) ingests real SciFact abstracts (``title + "\\n" +
text``) 64 documents per ``POST /v1/ingest``. Each round then embeds, in this process and with
a model built from the same Settings (the same onnxruntime session options), exactly the texts
that batch's Units were embedded as (the chunker run the same way, later chunks with their title
line) in one ``embed()`` call, as the server does. The order of the two alternates by round, so
the load of this shared machine hits both alike. The ratio ingest Units/s / raw texts/s is the
share of the embedding bound the API keeps (goal >= 0.8).

``--breakdown`` also ingests one batch in-process (live model) and times its phases (chunking,
embedding, the write transaction, the index apply), to show where the rest goes.

    .venv/bin/python -m bench.ingest_throughput --rounds 4
    .venv/bin/python -m bench.ingest_throughput --rounds 2 --batch 16 --out /tmp/x   # smoke

Writes ``<out>/ingest_throughput.json`` and ``ingest_throughput.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import evaldir
from bench.common.data import doc_scope, load_dataset, unit_text
from bench.common.embedcache import live_embedder
from bench.common.env import environment
from bench.common.evaldir import shown
from bench.common.paths import RESULTS
from bench.common.report import command, write_report
from bench.common.server import Server, free_port
from bench.common.service import PRINCIPAL_KEY, embedded, make_service


def unit_texts(text: str, emb: Any, settings: Any) -> list[str]:
    """The texts the Service embeds for one submitted document (Ingestor._chunk_and_embed)."""
    from superchargedb.ingest.chunking import chunk_text
    from superchargedb.ingest.prepare import title_line

    chunks = chunk_text(text, emb, settings.chunk_tokens, settings.chunk_overlap_tokens)
    if len(chunks) <= 1:
        return [text]
    ctx = title_line(text)
    return [f"{ctx}\n{c.text}" if ctx and i > 0 else c.text for i, c in enumerate(chunks)]


def ingest_http(client: Any, docs: list[dict[str, str]]) -> tuple[float, int]:
    body = {"units": docs}
    t0 = time.perf_counter()
    r = client.post("/v1/ingest", json=body)
    secs = time.perf_counter() - t0
    r.raise_for_status()
    out = r.json()
    units = 0
    for res in out["results"]:
        if not res.get("ok") or res.get("status") != "created":
            raise RuntimeError(f"ingest failed: {res}")
        units += len(res.get("unit_ids") or [res["unit_id"]])
    return secs, units


def breakdown(corpus: dict[str, Any], ids: list[str]) -> dict[str, float]:
    """One batch in-process with the live model, phases timed by wrapping the Ingestor's."""
    from superchargedb.ingest import pipeline

    live = live_embedder()
    tmp = Path(tempfile.mkdtemp(prefix="scdb-ingest-bd-"))
    times: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - t0

        return run

    try:
        svc, alice = make_service(tmp / "data", live)
        try:
            ing = svc.ingestor
            emb = svc.embedder
            orig_chunk = pipeline.chunk_text
            pipeline.chunk_text = timed("chunk", orig_chunk)  # type: ignore[assignment]
            emb.embed = timed("embed", emb.embed)  # type: ignore[method-assign]
            ing._write = timed("write (SQL, FTS, audit)", ing._write)  # type: ignore[method-assign]
            sync = embedded(svc).sync
            sync.apply_pending = timed("apply (vector index)", sync.apply_pending)  # type: ignore[method-assign]
            docs = [{"text": unit_text(corpus[d]), "doc_id": d, "scope": doc_scope(d)} for d in ids]
            t0 = time.perf_counter()
            svc.ingest(alice, {"units": docs})
            total = time.perf_counter() - t0
            pipeline.chunk_text = orig_chunk  # type: ignore[assignment]
        finally:
            svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    times["total"] = total
    times["other (validation, idempotency lookups, quota)"] = total - sum(
        v for k, v in times.items() if k != "total"
    )
    return {k: round(v, 4) for k, v in times.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import httpx
    from tqdm import tqdm

    from superchargedb.settings import Settings

    corpus, _, _ = load_dataset(args.dataset, "test")
    ids = sorted(corpus)[args.offset : args.offset + args.rounds * args.batch]
    batches = [ids[i : i + args.batch] for i in range(0, len(ids), args.batch)]
    settings = Settings()
    raw = live_embedder()  # the same Settings -> the same session options as the server
    raw.embed(["warm-up"])
    env = environment()
    data = Path(tempfile.mkdtemp(prefix="scdb-ingest-tp-"))
    server_env = {
        **os.environ,
        "SCDB_AUDIT_KEY": os.environ.get("SCDB_AUDIT_KEY") or secrets.token_hex(32),
        "SCDB_RATE_KEY_RPS": "0",
        "SCDB_RATE_IP_RPS": "0",
        "SCDB_JOB_WORKERS": "0",
    }
    server = Server(data / "data", free_port(), data / "server.log", server_env)
    rounds: list[dict[str, Any]] = []
    try:
        server.start()
        headers = {"Authorization": f"Bearer {PRINCIPAL_KEY}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=3600) as client:
            # Warm-up: the server's first request loads lazily initialised parts.
            client.post(
                "/v1/ingest", json={"units": [{"text": "warm up", "doc_id": "warm-up"}]}
            ).raise_for_status()
            for r, batch in enumerate(tqdm(batches, desc="rounds", file=sys.stderr)):
                docs = [
                    {"text": unit_text(corpus[d]), "doc_id": d, "scope": doc_scope(d)}
                    for d in batch
                ]
                texts = [t for d in docs for t in unit_texts(d["text"], raw, settings)]
                row: dict[str, Any] = {"round": r, "docs": len(docs), "raw_first": r % 2 == 1}
                for step in ("raw", "api") if r % 2 else ("api", "raw"):
                    if step == "api":
                        secs, units = ingest_http(client, docs)
                        row.update(api_s=secs, units=units)
                    else:
                        t0 = time.perf_counter()
                        raw.embed(texts)
                        row.update(raw_s=time.perf_counter() - t0, raw_texts=len(texts))
                        t0 = time.perf_counter()
                        raw.embed([d["text"] for d in docs])
                        row["raw_docs_s"] = time.perf_counter() - t0
                if row["units"] != row["raw_texts"]:
                    raise RuntimeError(f"the server stored {row['units']} Units, raw {len(texts)}")
                row["ratio"] = (row["units"] / row["api_s"]) / (row["raw_texts"] / row["raw_s"])
                rounds.append(row)
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    units = sum(x["units"] for x in rounds)
    api_s = sum(x["api_s"] for x in rounds)
    raw_s = sum(x["raw_s"] for x in rounds)
    docs_n = sum(x["docs"] for x in rounds)
    report: dict[str, Any] = {
        "benchmark": "ingest_throughput",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command("ingest_throughput", args.argv),
        "environment": {**env, "loadavg_end": environment()["loadavg"]},
        "config": {
            "dataset": shown(args.dataset),
            "docs_per_request": args.batch,
            "rounds": len(rounds),
            "model": raw.model_id,
            "onnxruntime": {
                "intra_op_num_threads": settings.embed_threads,
                "batch_size": settings.embed_batch_size,
                "max_tokens": settings.embed_max_tokens,
            },
            "server": "superchargedb serve --demo (own process), POST /v1/ingest over loopback",
        },
        "rounds": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in x.items()} for x in rounds
        ],
        "totals": {
            "docs": docs_n,
            "units": units,
            "api_s": round(api_s, 3),
            "raw_s": round(raw_s, 3),
            "api_units_per_s": round(units / api_s, 3),
            "api_docs_per_s": round(docs_n / api_s, 3),
            "raw_texts_per_s": round(units / raw_s, 3),
            "raw_abstracts_per_s": round(docs_n / sum(x["raw_docs_s"] for x in rounds), 3),
            "ratio": round((units / api_s) / (units / raw_s), 4),
            "ratio_median_round": round(statistics.median(x["ratio"] for x in rounds), 4),
        },
    }
    if args.breakdown:
        report["breakdown_s"] = breakdown(corpus, batches[0][:32])
    return report


def markdown(r: dict[str, Any]) -> str:
    t, env, c = r["totals"], r["environment"], r["config"]
    lines = [
        "# Ingest throughput vs the raw embedding bound",
        "",
        f"Generated {r['generated_at']} by `{r['command']}` (commit `{env['git_commit']}`,"
        f" {env['cpus']} CPUs; load average {env['loadavg']} -> {env['loadavg_end']}: a shared,"
        " loaded machine; the two sides alternate by round, read the ratio).",
        "",
        f"Model `{c['model']}`, onnxruntime {json.dumps(c['onnxruntime'])} on both sides;"
        f" {c['docs_per_request']} documents of {Path(c['dataset']).name} per request"
        f' (`title + "\\n" + text`); {c["server"]}.',
        "",
        "| | value |",
        "|---|---|",
        f"| documents / Units ingested | {t['docs']} / {t['units']} |",
        f"| ingest through the API, Units/s | {t['api_units_per_s']:.2f} |",
        f"| ingest through the API, documents/s | {t['api_docs_per_s']:.2f} |",
        f"| raw embedding of the same Unit texts, texts/s | {t['raw_texts_per_s']:.2f} |",
        f"| raw embedding of the abstracts (one text each), texts/s |"
        f" {t['raw_abstracts_per_s']:.2f} |",
        f"| **ratio** (API Units/s / raw texts/s), all rounds | **{t['ratio']:.3f}** |",
        f"| ratio, median round | {t['ratio_median_round']:.3f} |",
        "",
        "| round | docs | Units | API s | raw s | ratio | order |",
        "|---|---|---|---|---|---|---|",
    ]
    for x in r["rounds"]:
        order = "raw, API" if x["raw_first"] else "API, raw"
        lines.append(
            f"| {x['round']} | {x['docs']} | {x['units']} | {x['api_s']:.2f} | {x['raw_s']:.2f} |"
            f" {x['ratio']:.3f} | {order} |"
        )
    if r.get("breakdown_s"):
        b = r["breakdown_s"]
        lines += [
            "",
            "Where one batch's time goes (in-process, live model, seconds):",
            "",
            "| phase | s | share |",
            "|---|---|---|",
        ]
        for k, v in b.items():
            if k != "total":
                lines.append(f"| {k} | {v:.3f} | {v / b['total']:.1%} |")
        lines.append(f"| total | {b['total']:.3f} | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, help="default: scifact/ of --eval-dir")
    evaldir.add_argument(ap)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64, help="documents per ingest request")
    ap.add_argument("--offset", type=int, default=0, help="first document (sorted ids)")
    ap.add_argument("--breakdown", action="store_true", help="time one batch's phases")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    args.dataset = evaldir.dataset_arg(args, "scifact")
    args.argv = argv if argv is not None else sys.argv[1:]
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args)
    md = markdown(report)
    write_report(args.out, "ingest_throughput", report, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
