"""The README's curl examples, read as a test reads them (issue #18, D-262): every ``curl``
command of its ```bash blocks, in order, with the ``# -> {...}`` comment right under it if any.

A command runs to the end of its quotes and ``\\`` continuations (``-d '{...}'`` spans lines).
An expectation's JSON may elide with ``...``: a string value ending in ``...`` ("01a2...",
"j_...") says only that the key holds a string; a bare ``...`` in an object or an array says
there is more. What else the comment says after its JSON ("; GET /v1/jobs/<job_id>") is kept as
``note``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

ELIDED = "\u2026elided"  # what an elided string value becomes (matches any string)
_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)
_ELIDED_STR = re.compile(r'"(?:[^"\\]|\\.)*\.\.\."')
_BARE_DOTS = re.compile(r",\s*\.\.\.(?=\s*[\]}])|(?<=[\[{])\s*\.\.\.\s*,?")


@dataclass
class CurlExample:
    argv: list[str]  # the command as the shell would split it, ``curl`` first
    source: str  # as written (for messages)
    expect: Any = None  # the ``# ->`` JSON with elisions marked, or None
    note: str = ""  # the rest of the ``# ->`` line after its JSON


def _complete(text: str) -> bool:
    """Whether ``text`` is a whole command: no open quote, no trailing continuation."""
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text)
    except ValueError:  # "No closing quotation": the command goes on
        return False
    return True


def parse_expectation(text: str) -> tuple[Any, str]:
    """The JSON at the start of ``text`` (elisions marked) and what follows it."""
    marked = _BARE_DOTS.sub("", _ELIDED_STR.sub(lambda _m: json.dumps(ELIDED), text.strip()))
    value, end = json.JSONDecoder().raw_decode(marked)
    return value, marked[end:].strip(" ;")


def extract(readme: str) -> list[CurlExample]:
    out: list[CurlExample] = []
    for block in _BLOCK.findall(readme):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.lstrip().startswith("curl "):
                i += 1
                continue
            text = line
            while not _complete(text) and i + 1 < len(lines):
                i += 1
                # A continuation outside quotes joins lines as the shell does; inside a quote the
                # newline is part of the argument.
                text = text.rstrip()[:-1] + " " if text.rstrip().endswith("\\") else text + "\n"
                text += lines[i]
            if not _complete(text):
                raise ValueError(f"unterminated curl command in README.md: {text[:200]!r}")
            example = CurlExample(shlex.split(text), text)
            i += 1
            # The expectation is the comment right under its command, or none.
            if i < len(lines) and lines[i].startswith("# ->"):
                example.expect, example.note = parse_expectation(lines[i].removeprefix("# ->"))
                i += 1
            out.append(example)
    return out


def matches(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """What of ``expected`` is missing from ``actual`` (empty: it is all there). Objects match
    by their keys (more keys are fine), arrays element by element from the start."""
    if expected == ELIDED:
        return [] if isinstance(actual, str) and actual else [f"{path}: not a string: {actual!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: not an object: {actual!r}"]
        errs = []
        for k, v in expected.items():
            if k not in actual:
                errs.append(f"{path}.{k}: missing")
            else:
                errs += matches(v, actual[k], f"{path}.{k}")
        return errs
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            return [f"{path}: not an array of at least {len(expected)}: {actual!r}"]
        return [e for i, v in enumerate(expected) for e in matches(v, actual[i], f"{path}[{i}]")]
    return [] if expected == actual else [f"{path}: {actual!r} != {expected!r}"]
