"""A small Prometheus registry: counters and summaries rendered in the text format.

Label values are route templates, status codes and stage names only: never keys, principals'
secrets or user text.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels
    )
    return "{" + inner + "}"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
        self._sums: dict[str, dict[tuple[tuple[str, str], ...], list[float]]] = defaultdict(dict)
        self._help: dict[str, tuple[str, str]] = {}
        self._gauges: dict[str, Callable[[], dict[tuple[tuple[str, str], ...], float]]] = {}

    def inc(self, name: str, help_: str, value: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._help.setdefault(name, ("counter", help_))
            series = self._counters[name]
            series[key] = series.get(key, 0.0) + value

    def observe(self, name: str, help_: str, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._help.setdefault(name, ("summary", help_))
            s = self._sums[name].setdefault(key, [0.0, 0.0])
            s[0] += value
            s[1] += 1

    def gauge(
        self, name: str, help_: str, fn: Callable[[], dict[tuple[tuple[str, str], ...], float]]
    ) -> None:
        self._help[name] = ("gauge", help_)
        self._gauges[name] = fn

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            counters = {k: dict(v) for k, v in self._counters.items()}
            sums = {k: {lk: list(lv) for lk, lv in v.items()} for k, v in self._sums.items()}
        for name, (kind, help_) in sorted(self._help.items()):
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
            if kind == "counter":
                for key, v in sorted(counters.get(name, {}).items()):
                    lines.append(f"{name}{_labels(key)} {v:g}")
            elif kind == "summary":
                for key, (total, count) in sorted(sums.get(name, {}).items()):
                    lines.append(f"{name}_sum{_labels(key)} {total:g}")
                    lines.append(f"{name}_count{_labels(key)} {count:g}")
            else:
                try:
                    values = self._gauges[name]()
                except Exception:  # a gauge must never break the scrape
                    values = {}
                for key, v in sorted(values.items()):
                    lines.append(f"{name}{_labels(key)} {v:g}")
        return "\n".join(lines) + "\n"
