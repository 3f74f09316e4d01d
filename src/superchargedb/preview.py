"""``GET /v1/units/{id}/preview``: the PDF page or image with the Unit's box drawn on it.

Rendering runs in a subprocess with a memory limit and a timeout (a hostile PDF can crash only
that process, DECISIONS 42); it prints the PNG to stdout.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from .errors import UnavailableError, ValidationError

MAX_SIDE = 1600  # pixels of the longer side of a preview


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

    box = locator.get("box") if locator and locator.get("kind") == "bbox" else None
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
    if box:
        x0, y0, x1, y1 = (float(v) * scale for v in box)
        draw = ImageDraw.Draw(img, "RGBA")
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
