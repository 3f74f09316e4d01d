"""Every number in a benchmark report (JSON), with its path: the smoke tests' NaN checks."""

from __future__ import annotations

from typing import Any


def numbers(obj: Any, path: str = "") -> list[tuple[str, float]]:
    """``(path, value)`` of every int/float leaf; booleans, strings and None are not numbers."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return []
    if isinstance(obj, int | float):
        return [(path, float(obj))]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in numbers(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [x for i, v in enumerate(obj) for x in numbers(v, f"{path}[{i}]")]
    return []
