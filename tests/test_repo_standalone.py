"""The repository stands alone: every decision cite resolves to an entry of docs/decisions.md,
nothing cites a file outside the repository, and no absolute path of one machine is written in
the code, the benchmarks or the docs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGISTER = ROOT / "docs" / "decisions.md"
TEXT = {".py", ".md", ".txt", ".json", ".toml", ".sh", ".yml", ".yaml", ".cfg", ".ini", ".html"}
TEXT |= {".js", ".css", ".sql", ""}
# .ci/run alone may name the evaluation data's home outside the repository (SCDB_EVAL_DIR).
OUTSIDE_ALLOWED = {".ci/run", "tests/test_repo_standalone.py"}

ENTRY = re.compile(r"^- \*\*D-(\d+)\b", re.M)
CITE = re.compile(r"\bD-(\d+)\b")
PLACEHOLDER = re.compile(r"\bD-\d*x+\b|\bD \d+\b(?=\))")
OUTSIDE = [
    re.compile(r"\bDECISIONS\b"),  # the project notes' decision file, outside the repository
    re.compile(r"\b(?:DESIGN|MODELS|ENGINES|STYLE)\.md\b"),
    re.compile(r"\bDESIGN\s*§?\s*\d"),
    re.compile(r"(?<![\w.-])shared/"),  # a path into the notes beside the repository
    re.compile(r"(?<=[(\"])Part \d\b"),  # a section of that file: (Part 2, "...")
]
# Homes of one machine; /srv/scdb, ~/.config/..., /usr/bin/env, /dev/null are generic.
MACHINE = re.compile(r"(?<![\w.~-])/(?:work|home|root|Users|mnt)/")
TMP = re.compile(r"(?<![\w.~-])/tmp/[\w.-]+")
# A /tmp path is an example when it is a command-line option's value (the reader picks it);
# in prose it names a folder that existed on one machine.
OPTION_BEFORE = re.compile(r"(?:^|[\s`(])-{1,2}[A-Za-z][\w-]*[ =]$")


def _files(*roots: str) -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", *roots], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):  # not a checkout: walk the folders
        out = [
            str(p.relative_to(ROOT))
            for r in roots
            for p in ([ROOT / r] if (ROOT / r).is_file() else (ROOT / r).rglob("*"))
        ]
    return [
        f
        for f in out
        if f and Path(f).suffix in TEXT and (ROOT / f).is_file() and "tokenizer" not in f
    ]


def _read(rel: str) -> str:
    return (ROOT / rel).read_text(errors="replace")


def _where(text: str, pos: int, rel: str) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"{rel}:{line}: {text.splitlines()[line - 1].strip()[:120]}"


def _entries() -> set[int]:
    nums = [int(n) for n in ENTRY.findall(REGISTER.read_text())]
    assert len(nums) == len(set(nums)), "an entry number is used twice in docs/decisions.md"
    return set(nums)


def test_register_has_the_decisions_code_relies_on():
    entries = _entries()
    # The first build's decisions keep their numbers, the later ones theirs.
    assert set(range(1, 51)) <= entries
    assert set(range(101, 137)) <= entries


def test_every_decision_cite_resolves():
    entries = _entries()
    bad = []
    for rel in _files("src", "bench", "tests", "docs", "scripts", "README.md"):
        text = _read(rel)
        for m in CITE.finditer(text):
            if int(m.group(1)) not in entries:
                bad.append(_where(text, m.start(), rel))
        for m in PLACEHOLDER.finditer(text):
            bad.append(_where(text, m.start(), rel))
    assert not bad, "cites with no entry in docs/decisions.md:\n" + "\n".join(bad)


def test_nothing_cites_a_file_outside_the_repository():
    bad = []
    for rel in _files("."):
        if rel in OUTSIDE_ALLOWED:
            continue
        text = _read(rel)
        for pattern in OUTSIDE:
            bad += [_where(text, m.start(), rel) for m in pattern.finditer(text)]
    assert not bad, "cites of files outside the repository:\n" + "\n".join(sorted(set(bad)))


def test_no_absolute_machine_path():
    bad = []
    for rel in _files("src", "bench", "docs", "README.md"):
        text = _read(rel)
        bad += [_where(text, m.start(), rel) for m in MACHINE.finditer(text)]
        if rel.startswith("docs/") or rel == "README.md":
            for m in TMP.finditer(text):
                before = text[max(0, m.start() - 40) : m.start()]
                if not OPTION_BEFORE.search(before):
                    bad.append(_where(text, m.start(), rel))
    assert not bad, "absolute paths of one machine:\n" + "\n".join(bad)


def test_the_checks_catch_what_they_are_for():
    # Each pattern flags the form it exists for and passes its legitimate neighbour.
    assert CITE.search("(D-42)") and not CITE.search("(ND-42)")
    # Samples are built from pieces so that the cite rewriting script leaves them as they are.
    d, decisions, design = "D", "DECISIONS", "DESIGN"
    assert PLACEHOLDER.search(f"({d}-1xx)") and PLACEHOLDER.search(f"({d} 9)")
    samples = [f"{decisions} 4", f"{design}.md", f"{design} §5", "../shared/eval", "(Part 2, x)"]
    for pattern, sample in zip(OUTSIDE, samples, strict=True):
        assert pattern.search(sample), sample
    assert OUTSIDE[3].search("--dataset ../shared/eval/adi")
    assert OUTSIDE[4].search('"source": "Part 4"') and not OUTSIDE[4].search("the second Part 2")
    assert not any(p.search("a shared, loaded machine; Decisions") for p in OUTSIDE)
    work = "/" + "work"  # built from pieces: the repository holds no machine path itself
    assert MACHINE.search(f"Path('{work}/data/eval')") and MACHINE.search("/home/me/x")
    assert not MACHINE.search("--data /srv/scdb and ~/.config/superchargedb, objects/tmp/")
    m = TMP.search("bench/scale.py --data-root /tmp/scale4 --keep")
    assert m and OPTION_BEFORE.search("bench/scale.py --data-root ")
    assert not OPTION_BEFORE.search("the 1M data set at ")
