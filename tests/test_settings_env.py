"""Unknown ``SCDB_`` variables stop the server-side commands; docs/settings.md lists every
setting exactly once, and every ``SCDB_`` variable the repository uses is a setting or listed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from superchargedb.settings import (
    NOT_SERVER_SETTINGS,
    SERVER_ENV_ONLY,
    Settings,
    UnknownSetting,
    check_environment,
    setting_names,
)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "settings.md"
NAME = re.compile(r"\bSCDB_[A-Z0-9_]*[A-Z0-9]\b")
EXAMPLE = re.compile(r"unknown setting SCDB_\w+")  # the docs show the error message


def _cli(args: list[str], extra_env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCDB_")}
    # This checkout's package, whatever the working directory (PYTHONPATH may be relative).
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-m", "superchargedb.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


# The check runs before a command uses its arguments, so none of these opens the data dir or
# loads a model here. serve and worker run as real processes; the offline commands go through
# the same callback in-process (a subprocess each would only add start-up time).
@pytest.mark.parametrize("args", [["serve", "--port", "1"], ["worker", "--once"]], ids=str)
def test_unknown_variable_stops_serve_and_worker(args, tmp_path):
    r = _cli([*args, "--data", str(tmp_path / "d")], {"SCDB_EMBEDER": "minilm-int8"}, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown setting SCDB_EMBEDER: did you mean SCDB_EMBEDDER?" in r.stderr
    assert not (tmp_path / "d").exists()  # stopped before touching the data dir


OFFLINE_COMMANDS = [
    ["doctor"],
    ["keys", "list"],
    ["keys", "create", "--principal", "p"],
    ["audit", "verify"],
    ["backup", "somewhere"],
    ["restore", "somewhere"],
    ["reindex"],
    ["import", "units.jsonl"],
]


@pytest.mark.parametrize("args", OFFLINE_COMMANDS, ids=" ".join)
def test_unknown_variable_stops_the_offline_commands(args, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from superchargedb.cli.main import app

    for k in [k for k in os.environ if k.startswith("SCDB_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("SCDB_SQLITE_SYNCRONOUS", "NORMAL")
    r = CliRunner().invoke(app, [*args, "--data", str(tmp_path / "d")])
    assert r.exit_code == 2, r.output
    assert "unknown setting SCDB_SQLITE_SYNCRONOUS: did you mean SCDB_SQLITE_SYNCHRONOUS?" in (
        r.output
    )
    assert not (tmp_path / "d").exists()


def test_known_and_listed_variables_pass_the_check(tmp_path):
    env = {n: "1" for n in NOT_SERVER_SETTINGS} | {"SCDB_EMBED_THREADS": "1"}
    r = _cli(["audit", "verify", "--data", str(tmp_path / "d")], env, tmp_path)
    assert "unknown setting" not in r.stderr, r.stderr


def test_client_commands_are_not_checked(tmp_path):
    r = _cli(["ask", "--help"], {"SCDB_EMBEDER": "x"}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "unknown setting" not in r.stdout + r.stderr


def test_check_environment_names_every_unknown_variable():
    check_environment({"SCDB_PORT": "1", "OPENAI_API_KEY": "k", "SCDB_URL": "u", "PATH": "/x"})
    check_environment({n: "1" for n in setting_names() | SERVER_ENV_ONLY | NOT_SERVER_SETTINGS})
    with pytest.raises(UnknownSetting) as exc:
        check_environment({"SCDB_OPENAI_KEY": "k", "SCDB_ZQXJW": "1", "SCDB_PORT": "1"})
    msg = str(exc.value)
    assert "SCDB_OPENAI_KEY: did you mean SCDB_OPENAI_API_KEY?" in msg
    assert "SCDB_ZQXJW: no setting is close" in msg
    assert "SCDB_PORT" not in msg.replace("SCDB_OPENAI", "")
    # A mistyped bench variable points at the bench variable, not at a server setting.
    with pytest.raises(UnknownSetting, match="did you mean SCDB_EVAL_DIR"):
        check_environment({"SCDB_EVAL_DR": "x"})


def test_settings_object_rejects_unknown_fields():
    with pytest.raises(ValueError):
        Settings(data_dirr="x")


def _table(section: str) -> list[list[str]]:
    """Rows (cells) of the first table under the ``## section`` heading of docs/settings.md."""
    text = DOC.read_text()
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/settings.md has no '## {section}' section"
    rows = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    assert len(rows) > 2, f"no table under '## {section}'"
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in rows[2:]]


def _first_cell_names(section: str) -> list[str]:
    names = []
    for cells in _table(section):
        found = NAME.findall(cells[0])
        assert len(found) == 1, f"one setting per row in '{section}': {cells[0]!r}"
        names.append(found[0])
    return names


def test_docs_list_exactly_the_settings_one_row_each():
    names = _first_cell_names("Server settings")
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"listed twice: {dupes}"
    expected = setting_names() | SERVER_ENV_ONLY
    assert not expected - set(names), f"settings missing from docs: {sorted(expected - set(names))}"
    assert not set(names) - expected, f"documented but no setting: {sorted(set(names) - expected)}"


def test_docs_list_exactly_the_client_bench_and_test_variables():
    names = _first_cell_names("Not server settings")
    assert len(names) == len(set(names))
    assert set(names) == NOT_SERVER_SETTINGS


def test_every_variable_the_repository_uses_is_known():
    # A variable a test or benchmark exports reaches the servers it starts: unlisted, it would
    # stop them. Names ending in "_" are shorthand in prose (SCDB_INFLIGHT_<CLASS>).
    known = setting_names() | SERVER_ENV_ONLY | NOT_SERVER_SETTINGS
    used: dict[str, str] = {}
    for folder in ("src", "tests", "bench", "scripts", ".ci", "docs"):
        for p in (ROOT / folder).rglob("*"):
            if p == Path(__file__).resolve() or "results" in p.parts:
                continue  # this file's mistyped names are the point; results are records
            if p.is_file() and p.suffix in {".py", ".sh", ".md", ""}:
                text = EXAMPLE.sub("", p.read_text(errors="replace"))
                for n in NAME.findall(text):
                    used.setdefault(n, str(p.relative_to(ROOT)))
    for p in (ROOT / "Makefile", ROOT / "README.md", ROOT / "pyproject.toml"):
        for n in NAME.findall(p.read_text()):
            used.setdefault(n, p.name)
    shorthand = {"SCDB_OPENAI"}  # a prefix test in bench/load.py
    unknown = {n: f for n, f in used.items() if n not in known and n not in shorthand}
    assert not unknown, f"neither settings nor listed in docs/settings.md: {unknown}"
