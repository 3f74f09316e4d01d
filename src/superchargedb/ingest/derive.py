"""Raw media -> derived Units with exact Locators (D-91, D-21 and D-42).

``derive(path, mime, modality, limits=...)`` sniffs the bytes, checks them against what was asked,
and dispatches: PDF -> doc_visual blocks (``derive_pdf``), image -> scan paragraphs or one visual
Unit (``derive_ocr``), audio/video -> utterances and shots (``derive_av``). The shared pieces
(limits, options, the sandboxed engine runner) are in ``derive_base.py``, re-exported here.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..types import MODALITY_PLANE
from .derive_base import (
    AV_MIMES,
    MODALITY_FAMILIES,
    UNSPECIFIED_MIMES,
    WORKER,
    DerivationError,
    Derived,
    DeriveOptions,
    MediaLimits,
    describe_rc,
    engine_env,
    family,
    plane_of,
    run_engine,
    run_worker,
    sniff,
    tail,
)

__all__ = [
    "AV_MIMES",
    "UNSPECIFIED_MIMES",
    "WORKER",
    "MODALITY_FAMILIES",
    "DerivationError",
    "Derived",
    "DeriveOptions",
    "MediaLimits",
    "describe_rc",
    "engine_env",
    "family",
    "plane_of",
    "run_engine",
    "run_worker",
    "sniff",
    "tail",
    "derive",
    "dispatch",
]


def derive(
    path: Path,
    mime: str,
    modality: str | None,
    *,
    limits: MediaLimits | None = None,
    options: DeriveOptions | None = None,
) -> list[Derived]:
    """Derive the Units of one media file; DerivationError when it cannot (a per-Unit error)."""
    limits = limits or MediaLimits()
    options = options or DeriveOptions()
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as exc:
        raise DerivationError(f"cannot read media file: {exc.strerror}") from None
    if size == 0:
        raise DerivationError("the media file is empty (0 bytes)")
    sniffed = sniff(head, path.name)
    fam = family(sniffed)
    asked = family(mime or "")
    if modality is not None and modality not in MODALITY_PLANE:
        raise DerivationError(f"unknown modality {modality!r}")
    if asked not in ("unknown", fam):
        raise DerivationError(f"declared mime {mime} contradicts the content, which is {sniffed}")
    if fam == "text":
        raise DerivationError("text objects are ingested as text Units, not derived as media")
    if fam not in ("pdf", "image", "av"):
        raise DerivationError(
            f"unsupported media type: the content is {sniffed} (declared {mime or 'nothing'})"
        )
    if modality is not None and fam not in MODALITY_FAMILIES.get(modality, ()):
        raise DerivationError(f"modality {modality!r} does not fit the content, which is {sniffed}")
    try:
        return dispatch(path, sniffed, modality, limits, options)
    except DerivationError as exc:  # engine messages may name server-side paths: hide them
        exc.message = PATH_RE.sub("<file>", exc.message)
        exc.args = (exc.message,)
        raise


PATH_RE = re.compile(r"(?<![\w/])/(?:[\w.\-]+/)+[\w.\-]*")


def dispatch(
    path: Path, sniffed: str, modality: str | None, limits: MediaLimits, options: DeriveOptions
) -> list[Derived]:
    fam = family(sniffed)
    if fam == "pdf":
        from .derive_pdf import derive_pdf

        return derive_pdf(path, limits=limits, options=options)
    if fam == "image":
        from .derive_ocr import derive_image, derive_scan

        if modality in ("scan", "pdf_page", "table", "figure"):
            return derive_scan(path, limits=limits, options=options)
        return derive_image(path, sniffed, limits=limits, options=options)
    from .derive_av import derive_av

    return derive_av(path, modality, limits=limits, options=options)
