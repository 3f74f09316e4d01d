"""The web console's routes: its static files on ``/`` and ``/ui/...``.

The files are plain package data (``superchargedb/web``), read once at start-up, so a path
can only ever name one of them. Every console page is the same ``index.html`` (the ES modules
route on ``location``); its CSP allows scripts and styles from this origin only (no inline
script), connections and media only to this origin, and no framing (D-151).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import Response

from ..errors import NotFoundError
from ..preview import PreviewSource

WEB = Path(__file__).resolve().parent.parent / "web"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:;"
    " media-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'"
)
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
ASSET = re.compile(r"^[a-z0-9_-]+(/[a-z0-9_.-]+)?\.(js|css|svg|png)$")


def _load() -> dict[str, bytes]:
    files = {}
    for f in (WEB / "assets").rglob("*"):
        if f.is_file() and f.suffix in TYPES:
            files[f.relative_to(WEB / "assets").as_posix()] = f.read_bytes()
    return files


def page_headers(suffix: str) -> dict[str, str]:
    return {
        "Content-Type": TYPES[suffix],
        "Content-Security-Policy": CSP,
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        # The files change only with the package; revalidating is cheap and never stale.
        "Cache-Control": "no-cache",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


def other_page(src: PreviewSource, page: int | None) -> PreviewSource:
    """The viewer's previous/next page (``?page=``) of an authorized Unit's PDF: that page,
    drawn without the box, which belongs to the Unit's own page (a page past the end is 422)."""
    own = int((src.locator or {}).get("page") or 1)
    if page is None or page == own or src.mime != "application/pdf":
        return src
    return dataclasses.replace(src, locator={"kind": "bbox", "page": page, "box": None})


def register_ui(app: FastAPI) -> None:
    index = (WEB / "index.html").read_bytes()
    assets = _load()

    def page() -> Response:
        return Response(index, headers=page_headers(".html"))

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        return page()

    @app.get("/ui", include_in_schema=False)
    @app.get("/ui/{rest:path}", include_in_schema=False)
    async def ui(rest: str = "") -> Response:
        if rest.startswith("assets/"):
            name = rest[len("assets/") :]
            body = assets.get(name) if ASSET.match(name) else None
            if body is None:
                raise NotFoundError("no such console file")
            return Response(body, headers=page_headers(Path(name).suffix))
        return page()
