"""``superchargedb bench``: retrieval quality and the side-by-side peer benchmark.

Runs the benchmarks of the source checkout's ``bench`` package with this interpreter, one after
the other, with their progress bars: ``python -m bench.quality`` (our BM25 / dense / hybrid
quality beside the published baselines) and ``python -m bench.peers`` (ours vs LanceDB vs txtai,
each in its own subprocess). The dataset is ``--dataset``, or ``scifact/`` of the evaluation
data's folder (``--eval-dir`` or ``SCDB_EVAL_DIR``; there is no default path). Reports land in
``--out`` (default ``bench/results``) as Markdown + JSON + PNG. The peers need the ``bench``
extra (``scripts/install_bench.sh``); without it they are reported as not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import typer

QUICK_DOCS = 300
QUICK_QUERIES = 30
QUICK_ROUNDS = 3


def bench_dir() -> Path:
    """``bench/`` of the source checkout (the package is installed editable from it)."""
    env = os.environ.get("SCDB_BENCH_DIR")
    if env:
        return Path(env)
    import superchargedb

    return Path(superchargedb.__file__).resolve().parents[2] / "bench"


def _steps(
    dataset: Path,
    out: Path,
    quick: bool,
    peers: bool,
    rounds: int | None,
    limit_docs: int | None = None,
    limit_queries: int | None = None,
) -> list[tuple[str, list[str]]]:
    if quick:
        limit_docs = limit_docs or QUICK_DOCS
        limit_queries = limit_queries or QUICK_QUERIES
    limits = []
    if limit_docs is not None:
        limits += ["--limit-docs", str(limit_docs)]
    if limit_queries is not None:
        limits += ["--limit-queries", str(limit_queries)]
    common = ["--dataset", str(dataset), "--out", str(out), *limits]
    steps = [("quality", ["quality", *common])]
    if peers:
        r = rounds if rounds is not None else (QUICK_ROUNDS if quick else 5)
        steps.append(("peers", ["peers", *common, "--rounds", str(r)]))
    return steps


def _child_env(root: Path) -> dict[str, str]:
    """This environment with the checkout's root on PYTHONPATH: ``python -m bench.x`` from
    anywhere."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    return env


def _default_dataset(root: Path, eval_dir: Path | None) -> Path:
    """``scifact/`` of the eval folder, as ``bench.common.evaldir`` resolves it (the one lookup);
    exits 2 with its message, which names SCDB_EVAL_DIR, when the folder is not given."""
    argv = [sys.executable, "-m", "bench.common.evaldir", "scifact"]
    argv += ["--eval-dir", str(eval_dir)] if eval_dir is not None else []
    proc = subprocess.run(argv, env=_child_env(root), capture_output=True, text=True)
    if proc.returncode != 0:
        typer.echo((proc.stderr.strip() or "no dataset") + "; or pass --dataset", err=True)
        raise typer.Exit(2)
    return Path(proc.stdout.strip())


def register(app: typer.Typer) -> None:
    @app.command()
    def bench(
        dataset: Path = typer.Option(
            None,
            "--dataset",
            help="A BEIR-layout folder (corpus, queries, qrels); default: scifact/ of --eval-dir",
        ),
        eval_dir: Path = typer.Option(
            None,
            "--eval-dir",
            help="The evaluation data's folder (default: $SCDB_EVAL_DIR; no built-in default)",
        ),
        quick: bool = typer.Option(
            False,
            "--quick",
            help=f"At most {QUICK_DOCS} documents and {QUICK_QUERIES} queries, "
            f"{QUICK_ROUNDS} rounds",
        ),
        out: Path = typer.Option(Path("bench/results"), "--out", help="Report folder"),
        peers: bool = typer.Option(
            True, "--peers/--no-peers", help="Also run the side-by-side peer benchmark"
        ),
        rounds: int = typer.Option(None, "--rounds", help="Alternating rounds (peers)"),
        limit_docs: int = typer.Option(None, "--limit-docs", help="Ingest at most N documents"),
        limit_queries: int = typer.Option(None, "--limit-queries", help="Score at most N queries"),
    ) -> None:
        """Benchmark retrieval quality and compare with LanceDB and txtai (Markdown/JSON/PNG)."""
        from tqdm import tqdm

        scripts = bench_dir()
        if not (scripts / "quality.py").is_file() or not (scripts / "__init__.py").is_file():
            typer.echo(
                f"no benchmark scripts at {scripts}: `superchargedb bench` runs from a source"
                " checkout (or set SCDB_BENCH_DIR)",
                err=True,
            )
            raise typer.Exit(2)
        root = scripts.resolve().parent
        if dataset is None:
            dataset = _default_dataset(root, eval_dir)
        dataset = dataset.resolve()
        if not (dataset / "corpus.jsonl").is_file():
            typer.echo(f"{dataset} is not a BEIR folder (no corpus.jsonl)", err=True)
            raise typer.Exit(2)
        out.mkdir(parents=True, exist_ok=True)
        steps = _steps(dataset, out.resolve(), quick, peers, rounds, limit_docs, limit_queries)
        failed = []
        with tqdm(total=len(steps), desc="bench", unit="step", file=sys.stderr) as bar:
            for name, argv in steps:
                bar.set_postfix_str(name)
                t0 = time.monotonic()
                # Children inherit stderr, so their own progress bars show below this one.
                cmd = [sys.executable, "-m", f"bench.{argv[0]}", *argv[1:]]
                rc = subprocess.call(cmd, env=_child_env(root))
                tqdm.write(f"{name}: exit {rc} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
                if rc != 0:
                    failed.append(name)
                bar.update(1)
        for name, _ in steps:
            for ext in ("md", "json"):
                p = out / f"{name}.{ext}"
                if p.exists():
                    typer.echo(f"report: {p}")
        if failed:
            typer.echo(f"failed: {', '.join(failed)}", err=True)
            raise typer.Exit(1)
