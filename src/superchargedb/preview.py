"""``GET /v1/units/{id}/preview``: the PDF page or image with the Unit's box drawn on it, or
with the boxes of a citation inside it (``?boxes=``, D-255: one per line the cited words sit on).

A request is served in three steps, in this order: the service resolves the Unit for the caller
(``Service.preview_source``: the same 404 as a missing id when the caller may not read it), the
rendering cache is asked (``preview_cache``: keyed by blob, page, box and size, never by who
asks), and only on a miss is it rendered, under the caller's share of the render slots
(``preview_gate``). ``Previews.png`` takes a ``PreviewSource``, which only the authorization
step makes, so nothing cached is served before that check.

Rendering runs in a subprocess with a memory limit and a timeout (a hostile PDF can crash only
that process, D-42); it prints the PNG to stdout.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UnavailableError, ValidationError
from .preview_cache import RenderCache
from .preview_gate import RenderGate

if TYPE_CHECKING:
    from .settings import Settings

MAX_SIDE = 1600  # pixels of the longer side of a preview
MAX_BOXES = 64  # a cited sentence's line boxes; more is not a citation
SLACK = 0.01  # the localizer rounds boxes to 2 decimals: a clipped box may stick out by that


@dataclass(frozen=True)
class PreviewSource:
    """What a caller, already authorized for the Unit, may see drawn: its blob and locator, or
    a video shot's kept keyframe (``still``, served as it is: there is no box to draw)."""

    blob: Path | None
    sha256: str
    mime: str  # "application/pdf" or "image"; a still's own type ("image/jpeg")
    locator: dict[str, Any] | None
    still: bytes | None = None

    def render_key(self) -> tuple[Any, ...]:
        """Everything the picture depends on (blob, page, boxes, size) and nothing else."""
        page = int((self.locator or {}).get("page") or 1) if self.mime == "application/pdf" else 1
        drawn = tuple(tuple(map(float, b)) for b in drawn_boxes(self.locator))
        return (self.sha256, self.mime, page, drawn, MAX_SIDE)


def drawn_boxes(locator: dict[str, Any] | None) -> list[Any]:
    """What a preview draws: every box of ``boxes`` when present, else the union ``box``."""
    if not locator or locator.get("kind") != "bbox":
        return []
    if locator.get("boxes"):
        return list(locator["boxes"])
    return [locator["box"]] if locator.get("box") else []


def with_boxes(src: PreviewSource, raw: str | None) -> PreviewSource:
    """The preview with a citation's boxes (``?boxes=x0,y0,x1,y1;...``, in the Unit's own
    coordinates) drawn instead of the Unit's box. Each must lie inside the Unit's box, so the
    picture never shows a spot outside the Unit the caller was authorized for (422 if not)."""
    if raw is None:
        return src
    own = (src.locator or {}).get("box") if (src.locator or {}).get("kind") == "bbox" else None
    if not own or src.still is not None:
        raise ValidationError("this unit has no box to draw boxes inside")
    boxes = []
    for part in raw.split(";"):
        try:
            b = [float(v) for v in part.split(",")]
        except ValueError:
            raise ValidationError("boxes: x0,y0,x1,y1 numbers, boxes separated by ';'") from None
        if len(b) != 4 or not all(math.isfinite(v) for v in b) or b[0] > b[2] or b[1] > b[3]:
            raise ValidationError("boxes: each box is x0,y0,x1,y1 with x0 <= x1 and y0 <= y1")
        lo, hi = (own[0] - SLACK, own[1] - SLACK), (own[2] + SLACK, own[3] + SLACK)
        if b[0] < lo[0] or b[1] < lo[1] or b[2] > hi[0] or b[3] > hi[1]:
            raise ValidationError("boxes: a box does not lie inside this unit's box")
        boxes.append(b)
    if len(boxes) > MAX_BOXES:
        raise ValidationError(f"boxes: at most {MAX_BOXES} boxes")
    return dataclasses.replace(src, locator={**(src.locator or {}), "boxes": boxes})


class Previews:
    """The rendering cache and the render slots of one server."""

    def __init__(self, settings: Settings) -> None:
        s = settings
        self.cache = RenderCache(s.preview_cache_max_bytes)
        self.gate = RenderGate(
            s.preview_renders, s.preview_renders_per_principal, s.preview_queue, s.preview_wait_s
        )
        self.memory_mb = s.media_memory_mb

    async def png(self, who: str, src: PreviewSource) -> bytes:
        """The PNG for an authorized caller ``who`` (a principal's name)."""
        key = src.render_key()
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        return await self.gate.run(who, lambda: self._render(key, src))

    def _render(self, key: tuple[Any, ...], src: PreviewSource) -> bytes:
        """In a worker thread, holding a render slot."""
        hit = self.cache.get(key)  # rendered for someone else while this one waited
        if hit is not None:
            return hit
        assert src.blob is not None  # a still is never rendered
        png = render_preview(src.blob, src.mime, src.locator, memory_mb=self.memory_mb)
        self.cache.put(key, png)
        return png


def render_preview(
    blob: Path,
    mime: str,
    locator: dict[str, Any] | None,
    timeout_s: float = 30,
    memory_mb: int = 1024,
) -> bytes:
    args = json.dumps({"path": str(blob), "mime": mime, "locator": locator, "memory_mb": memory_mb})
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "superchargedb.preview", args],
            capture_output=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UnavailableError("preview rendering timed out") from None
    if proc.returncode != 0 or not proc.stdout.startswith(b"\x89PNG"):
        raise ValidationError("this object cannot be previewed")
    return proc.stdout


def _render(path: str, mime: str, locator: dict[str, Any] | None) -> bytes:
    from PIL import Image, ImageDraw

    if mime == "application/pdf":
        import pypdfium2 as pdfium

        pdf = pdfium.PdfDocument(path)
        page_no = int((locator or {}).get("page") or 1)
        if not 1 <= page_no <= len(pdf):
            raise SystemExit(2)
        page = pdf[page_no - 1]
        w, h = page.get_size()  # points of the rotated page, the frame bbox is expressed in
        scale = min(2.0, MAX_SIDE / max(w, h))
        img = page.render(scale=scale).to_pil().convert("RGB")
    else:
        Image.MAX_IMAGE_PIXELS = 50_000_000
        img = Image.open(path).convert("RGB")
        scale = min(1.0, MAX_SIDE / max(img.size))
        if scale < 1.0:
            img = img.resize((int(img.width * scale), int(img.height * scale)))
    draw = ImageDraw.Draw(img, "RGBA")
    for box in drawn_boxes(locator):
        x0, y0, x1, y1 = (float(v) * scale for v in box)
        draw.rectangle(
            (x0, y0, x1, y1), outline=(230, 30, 30, 255), width=3, fill=(255, 220, 0, 60)
        )
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def main() -> None:
    args = json.loads(sys.argv[1])
    limit = int(args.get("memory_mb", 1024)) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.stdout.buffer.write(_render(args["path"], args["mime"], args.get("locator")))


if __name__ == "__main__":
    main()
