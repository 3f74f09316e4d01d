"""Input models at the edges: pydantic with ``extra="forbid"`` so typos are errors.

Used by the service facade (so the CLI and library share them) and by the API for OpenAPI.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .types import MODALITY_PLANE, PLANES, Locator

PlaneName = Literal["text", "visual", "audio", "doc_visual"]

# A Unit that names a plane but no modality gets the plane's plain kind (docs/decisions.md).
PLANE_MODALITY: dict[str, str] = {
    "text": "text",
    "visual": "image",
    "audio": "utterance",
    "doc_visual": "scan",
}
# Media types whose content is not text: ``text`` declared as one of them is refused.
_BINARY_FAMILIES = {"image", "audio", "video", "font", "model"}
_BINARY_TYPES = {"application/pdf", "application/octet-stream", "application/zip"}


def is_text_mime(mime: str) -> bool:
    m = mime.split(";", 1)[0].strip().lower()
    return m.split("/", 1)[0] not in _BINARY_FAMILIES and m not in _BINARY_TYPES


_Str = Annotated[str, Field(min_length=1, max_length=512)]


class _In(BaseModel):
    # Strict: ``top_k: true`` or ``"10"`` is a 422, not 1 or 10 (a bool is an int to Python).
    # Times stay lax: JSON has no datetime, so an ISO-8601 string must parse.
    model_config = ConfigDict(extra="forbid", strict=True)


class TimeRangeIn(_In):
    kind: Literal["time_range"]
    t_start_ms: int = Field(ge=0, le=10**13)
    t_end_ms: int = Field(ge=0, le=10**13)
    shot_idx: int | None = Field(default=None, ge=0, le=10**7)

    @model_validator(mode="after")
    def _order(self) -> TimeRangeIn:
        if self.t_end_ms <= self.t_start_ms:
            raise ValueError("time_range needs t_end_ms > t_start_ms (exclusive end)")
        return self


class BBoxIn(_In):
    kind: Literal["bbox"]
    box: list[float] = Field(min_length=4, max_length=4)
    page: int | None = Field(default=None, ge=1, le=10**6)

    @model_validator(mode="after")
    def _box(self) -> BBoxIn:
        x0, y0, x1, y1 = self.box
        if not all(math.isfinite(v) and 0 <= v <= 1e6 for v in self.box):
            raise ValueError("bbox coordinates must be finite, >= 0 and <= 1e6")
        if x1 <= x0 or y1 <= y0:
            raise ValueError("bbox needs x1 > x0 and y1 > y0 (top-left origin)")
        return self


class CharSpanIn(_In):
    kind: Literal["char_span"]
    start: int = Field(ge=0, le=10**12)
    end: int = Field(ge=0, le=10**12)

    @model_validator(mode="after")
    def _order(self) -> CharSpanIn:
        if self.end <= self.start:
            raise ValueError("char_span needs end > start (exclusive end)")
        return self


class LineRangeIn(_In):
    kind: Literal["line_range"]
    start: int = Field(ge=1, le=10**9)
    end: int = Field(ge=1, le=10**9)

    @model_validator(mode="after")
    def _order(self) -> LineRangeIn:
        if self.end < self.start:
            raise ValueError("line_range needs end >= start (1-based, inclusive)")
        return self


LocatorIn = Annotated[TimeRangeIn | BBoxIn | CharSpanIn | LineRangeIn, Field(discriminator="kind")]


def locator_from_in(loc: TimeRangeIn | BBoxIn | CharSpanIn | LineRangeIn) -> Locator:
    if isinstance(loc, TimeRangeIn):
        return Locator(
            kind="time_range",
            t_start_ms=loc.t_start_ms,
            t_end_ms=loc.t_end_ms,
            shot_idx=loc.shot_idx,
        )
    if isinstance(loc, BBoxIn):
        x0, y0, x1, y1 = loc.box
        return Locator(kind="bbox", box=(x0, y0, x1, y1), page=loc.page)
    return Locator(kind=loc.kind, start=loc.start, end=loc.end)


class UnitIn(_In):
    """One Unit of ``POST /v1/ingest`` (seed 002, per-Unit fields)."""

    text: str | None = None
    scope: str | None = None
    doc_id: _Str | None = None
    modality: str | None = None  # omitted: the plane's default (PLANE_MODALITY), else text
    plane: PlaneName | None = None
    source_uri: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    mime: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    locator: LocatorIn | None = None
    acl_owner: _Str | None = None
    acl_groups: list[_Str] | None = Field(default=None, max_length=64)
    # Capture time for t_bucket (D-20).
    captured_at: datetime | None = Field(default=None, strict=False)

    @field_validator("modality")
    @classmethod
    def _modality(cls, v: str | None) -> str | None:
        if v is not None and v not in MODALITY_PLANE:
            raise ValueError(f"unknown modality {v!r}; choose from {sorted(MODALITY_PLANE)}")
        return v

    @model_validator(mode="after")
    def _plane(self) -> UnitIn:
        if self.modality is None:
            self.modality = PLANE_MODALITY[self.plane] if self.plane is not None else "text"
        if self.text is not None and self.mime is not None and not is_text_mime(self.mime):
            raise ValueError(
                f"mime {self.mime!r} is not a text type: text is stored as text; send other"
                " content as an object (source_uri + mime, no text)"
            )
        implied = MODALITY_PLANE[self.modality]
        if self.plane is None:
            self.plane = implied
        elif self.plane != implied:
            raise ValueError(
                f"plane {self.plane!r} does not match modality {self.modality!r} ({implied})"
            )
        return self


class IngestRequest(_In):
    units: list[Any] = Field(min_length=1)
    mode: Literal["replace", "append"] = "replace"


class TimeFilter(_In):
    from_: datetime | None = Field(default=None, alias="from", strict=False)
    to: datetime | None = Field(default=None, strict=False)

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    def bounds_ms(self) -> tuple[int | None, int | None]:
        def ms(d: datetime | None) -> int | None:
            if d is None:
                return None
            if d.tzinfo is None:
                d = d.replace(tzinfo=UTC)
            return int(d.timestamp() * 1000)

        return ms(self.from_), ms(self.to)


class AclFilter(_In):
    owner: _Str | None = None
    groups: list[_Str] | None = Field(default=None, max_length=64)


class Filters(_In):
    doc_id: _Str | list[_Str] | None = None
    modality: str | list[str] | None = None
    time: TimeFilter | None = None
    acl: AclFilter | None = None

    def doc_ids(self) -> list[str] | None:
        return [self.doc_id] if isinstance(self.doc_id, str) else self.doc_id

    def modalities(self) -> list[str] | None:
        return [self.modality] if isinstance(self.modality, str) else self.modality


class Budget(_In):
    max_ms: float | None = Field(default=None, gt=0, le=600_000)
    max_cost_usd: float | None = Field(default=None, ge=0, le=1000)


class AegisQuery(_In):
    """The one query object of ``/v1/search`` and ``/v1/answer`` (D-22)."""

    q: Annotated[str, Field(min_length=1, max_length=4096)]
    planes: list[PlaneName] | None = Field(default=None, min_length=1, max_length=4)
    modalities: list[str] | None = Field(default=None, max_length=16)
    filters: Filters | None = None
    top_k: int = Field(default=10, ge=1, le=1000)
    rerank: bool = False
    budget: Budget | None = None
    answer: bool = False
    stream: bool = False
    mode: Literal["hybrid", "dense", "lexical"] = "hybrid"
    # Extension: ``false`` leaves each hit's ``snippet`` null. Callers that read ``text`` (an
    # LLM prompt, a reranker) skip building 100 highlighted windows, ~15 % of such a search.
    snippets: bool = True

    @field_validator("modalities")
    @classmethod
    def _mods(cls, v: list[str] | None) -> list[str] | None:
        for m in v or []:
            if m not in MODALITY_PLANE:
                raise ValueError(f"unknown modality {m!r}")
        return v

    @field_validator("planes")
    @classmethod
    def _planes(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [str(p) for p in PLANES if p in v]
