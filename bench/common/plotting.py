"""matplotlib for report plots, headless; ``None`` where the bench extra is not installed."""

from __future__ import annotations

from typing import Any


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend, or None (reports then carry no plots)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt
