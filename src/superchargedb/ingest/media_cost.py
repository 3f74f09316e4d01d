"""What a media job will use of its owner's allowance, measured before the job is queued.

A tier's document pages and media minutes are counted from derived Units, so without an
estimate at ingest time every job queued while the allowance still had room would run: a free
key could queue a hundred PDFs at once against an empty counter. The estimate is the page count
(pdfium, in the rlimited media worker) or the duration (ffprobe, sandboxed like every engine),
reserved by the queued job until it finishes or fails. A file that cannot be measured reserves
nothing here: its derivation fails the job with the engine's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .derive_av import probe
from .derive_base import DerivationError, DeriveOptions, MediaLimits, family, run_worker


@dataclass(frozen=True)
class MediaCost:
    pages: int = 0
    ms: int = 0


def estimate(
    blob: Path,
    sniffed: str,
    planes: tuple[str, ...],
    *,
    pages: bool,
    minutes: bool,
    limits: MediaLimits,
    options: DeriveOptions,
) -> MediaCost:
    """The pages (when ``pages``) and milliseconds (when ``minutes``) the derivation of
    ``blob`` will count; zero for what is not capped or cannot be measured cheaply."""
    fam = family(sniffed)
    try:
        if fam == "pdf" and pages:
            args = {"path": str(blob), "max_pages": limits.max_pages}
            got = run_worker("pdf_pages", args, limits=limits, options=options, what="pdfium")
            return MediaCost(pages=int(got["pages"]))
        if fam == "image" and pages and "doc_visual" in planes:
            return MediaCost(pages=1)
        if fam == "av" and minutes:
            info = probe(blob, limits=limits, options=options)
            return MediaCost(ms=int(float(info["duration"]) * 1000))
    except DerivationError:
        pass
    return MediaCost()
