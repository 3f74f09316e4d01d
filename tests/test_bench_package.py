"""bench/ is a package: every module imports as ``bench.<name>``, nothing edits the import path,
and the evaluation data's folder comes only from ``--eval-dir`` / ``SCDB_EVAL_DIR``: without it a
benchmark stops, and says which setting is missing."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import bench
from bench.common import evaldir
from bench.common.report import command

REPO = Path(__file__).resolve().parent.parent


def _env_without_eval_dir() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != evaldir.ENV}


def test_every_bench_module_imports_as_a_package() -> None:
    names = [m.name for m in pkgutil.walk_packages(bench.__path__, "bench.")]
    assert {"bench.quality", "bench.peers.run", "bench.peers.ours", "bench.common.evaldir"} <= set(
        names
    )
    for name in names:
        if name.endswith(".__main__"):
            continue  # runs the benchmark
        importlib.import_module(name)


def test_nothing_edits_the_import_path() -> None:
    needle = "sys." + "path"  # spelled in two halves, so this file does not match itself
    hits = [
        f"{p.relative_to(REPO)}:{i}"
        for top in ("bench", "tests")
        for p in sorted((REPO / top).rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if needle in line
    ]
    assert hits == []


def test_the_eval_dir_has_no_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(evaldir.ENV, raising=False)
    with pytest.raises(evaldir.EvalDirMissing, match=evaldir.ENV):
        evaldir.eval_dir()
    with pytest.raises(evaldir.EvalDirMissing, match=evaldir.ENV):
        evaldir.dataset("scifact")
    reason = evaldir.skip_reason("scifact")
    assert reason is not None and evaldir.ENV in reason

    (tmp_path / "scifact").mkdir()
    monkeypatch.setenv(evaldir.ENV, str(tmp_path))
    assert evaldir.dataset("scifact") == (tmp_path / "scifact").resolve()
    assert evaldir.skip_reason("scifact") is None
    with pytest.raises(evaldir.EvalDirMissing, match="xquad-en"):
        evaldir.dataset("xquad-en")
    assert "xquad-en" in str(evaldir.skip_reason("xquad-en"))
    # --eval-dir wins over the setting
    other = tmp_path / "other"
    (other / "xquad-en").mkdir(parents=True)
    assert evaldir.dataset("xquad-en", other) == (other / "xquad-en").resolve()
    monkeypatch.setenv(evaldir.ENV, str(tmp_path / "nowhere"))
    with pytest.raises(evaldir.EvalDirMissing, match="not a folder"):
        evaldir.eval_dir()


def test_a_report_names_the_setting_not_the_machine_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(evaldir.ENV, str(tmp_path))
    got = command("quality", ["--dataset", str(tmp_path / "scifact"), "--out", str(REPO / "x")])
    assert got == "python -m bench.quality --dataset $SCDB_EVAL_DIR/scifact --out x"
    assert evaldir.shown(tmp_path / "scifact") == "$SCDB_EVAL_DIR/scifact"


@pytest.mark.parametrize(
    "argv",
    [
        ["bench.quality"],
        ["bench.peers", "--systems", "ours"],
        ["bench.scale", "--sizes", "1000"],
        ["bench.scifact"],
        ["bench.common.evaldir", "scifact"],
    ],
)
def test_a_benchmark_without_the_setting_stops_naming_it(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=REPO,
        env=_env_without_eval_dir(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert evaldir.ENV in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_evaldir_module_prints_the_dataset_folder(tmp_path: Path) -> None:
    (tmp_path / "classic-adi").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.common.evaldir", "classic-adi", "--eval-dir", str(tmp_path)],
        cwd=REPO,
        env=_env_without_eval_dir(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == (tmp_path / "classic-adi").resolve()


def test_superchargedb_bench_without_data_says_which_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from superchargedb.cli.bench import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a group, so that the command is invoked by name as in the real CLI
        pass

    register(app)
    monkeypatch.delenv(evaldir.ENV, raising=False)
    monkeypatch.setenv("SCDB_BENCH_DIR", str(REPO / "bench"))
    res = CliRunner().invoke(app, ["bench", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert evaldir.ENV in res.output and "--dataset" in res.output
    # --eval-dir alone is enough to find the dataset (here: a folder that is no BEIR set)
    (tmp_path / "scifact").mkdir()
    res = CliRunner().invoke(app, ["bench", "--eval-dir", str(tmp_path), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "is not a BEIR folder" in res.output
