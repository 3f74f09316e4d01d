"""Core domain types: planes, modalities, Locators, Units, Principals and Hits.

Frozen dataclasses; validation of user input happens at the edges (``schemas.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

# An embedding as every layer passes it: one float32 row.
Vector = npt.NDArray[np.float32]

Plane = Literal["text", "visual", "audio", "doc_visual"]
PLANES: tuple[Plane, ...] = ("text", "visual", "audio", "doc_visual")

# Closed modality vocabulary (D-9): modality -> plane.
MODALITY_PLANE: dict[str, Plane] = {
    "text": "text",
    "markdown": "text",
    "code": "text",
    "log": "text",
    "transcript": "text",
    "image": "visual",
    "video_shot": "visual",
    "audio": "audio",
    "utterance": "audio",
    "pdf_page": "doc_visual",
    "scan": "doc_visual",
    "table": "doc_visual",
    "figure": "doc_visual",
}

PERMS = ("read", "write", "admin")
TIERS = ("free", "pro", "enterprise")
TIER_RANK = {t: i for i, t in enumerate(TIERS)}
# Planes each tier may ingest into and query (spec: free is text + doc_visual).
TIER_PLANES: dict[str, tuple[Plane, ...]] = {
    "free": ("text", "doc_visual"),
    "pro": PLANES,
    "enterprise": PLANES,
}


@dataclass(frozen=True)
class Locator:
    """A sub-unit span; ``kind`` discriminates which fields are meaningful.

    Conventions (D-21): char_span in code points with exclusive end; line_range 1-based
    inclusive; bbox top-left origin with 1-based page; time_range in ms with exclusive end.
    """

    kind: Literal["time_range", "bbox", "char_span", "line_range"]
    start: int | None = None
    end: int | None = None
    t_start_ms: int | None = None
    t_end_ms: int | None = None
    shot_idx: int | None = None
    box: tuple[float, float, float, float] | None = None
    page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "time_range":
            d: dict[str, Any] = {
                "kind": "time_range",
                "t_start_ms": self.t_start_ms,
                "t_end_ms": self.t_end_ms,
            }
            if self.shot_idx is not None:
                d["shot_idx"] = self.shot_idx
            return d
        if self.kind == "bbox":
            box = [int(v) if float(v).is_integer() else v for v in (self.box or ())]
            return {"kind": "bbox", "box": box, "page": self.page}
        return {"kind": self.kind, "start": self.start, "end": self.end}

    def to_columns(self) -> dict[str, Any]:
        """The typed catalog columns this Locator is stored in."""
        box = self.box or (None, None, None, None)
        return {
            "loc_kind": self.kind,
            "loc_start": self.start,
            "loc_end": self.end,
            "t_start_ms": self.t_start_ms,
            "t_end_ms": self.t_end_ms,
            "shot_idx": self.shot_idx,
            "page": self.page,
            "bbox_x0": box[0],
            "bbox_y0": box[1],
            "bbox_x1": box[2],
            "bbox_y1": box[3],
        }

    @staticmethod
    def from_row(row: Any) -> Locator | None:
        """Rebuild a Locator from the stored columns (``GET /v1/units/{id}``)."""
        kind = row["loc_kind"]
        if kind is None:
            return None
        if kind == "time_range":
            return Locator(
                kind="time_range",
                t_start_ms=row["t_start_ms"],
                t_end_ms=row["t_end_ms"],
                shot_idx=row["shot_idx"],
            )
        if kind == "bbox":
            return Locator(
                kind="bbox",
                box=(row["bbox_x0"], row["bbox_y0"], row["bbox_x1"], row["bbox_y1"]),
                page=row["page"],
            )
        return Locator(kind=kind, start=row["loc_start"], end=row["loc_end"])


@dataclass(frozen=True)
class Principal:
    id: str
    name: str
    perms: frozenset[str]
    tier: str
    scopes: tuple[str, ...]
    active_scope: str
    groups: frozenset[str]
    doc_quota: int | None = None
    is_operator: bool = False
    # The key that authenticated this request and who issued it (audit records carry both);
    # not part of identity: two keys of one principal are the same principal.
    key_id: str | None = field(default=None, compare=False)
    key_issuer: str | None = field(default=None, compare=False)

    def has(self, perm: str) -> bool:
        return perm in self.perms


@dataclass
class Stage:
    stage: str
    ms: float
    detail: str | None = None
    skipped: str | None = None
    tokens: Any = None
    # A transient failure degraded this stage: the response must not be cached.
    degraded: bool = False
    # Read on a node that may trail the primary (a hot standby): not cached either.
    fresh: bool = True

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"stage": self.stage, "ms": round(self.ms, 3), "neurons": 0}
        if self.detail is not None:
            d["detail"] = self.detail
        if self.skipped is not None:
            d["skipped"] = self.skipped
        if self.tokens is not None:
            d["tokens"] = self.tokens
        return d


@dataclass
class Trace:
    stages: list[Stage] = field(default_factory=list)
    est_cost_usd: float = 0.0
    cache: str = "miss"

    def to_dict(self) -> dict[str, Any]:
        stages = [s.to_dict() for s in self.stages]
        return {
            "stages": stages,
            "total_ms": round(sum(s.ms for s in self.stages), 3),
            "total_neurons": 0,
            "est_cost_usd": self.est_cost_usd,
            "cache": self.cache,
        }
