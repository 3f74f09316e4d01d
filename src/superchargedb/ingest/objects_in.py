"""Resolving an ingested Unit that points at a stored object (source_uri + mime, no text).

Text objects become text Units at once; media objects are checked cheaply (type sniffed from the
bytes, declared mime and modality consistent with it, obvious truncation) so that a zero-byte,
mistyped, malformed or truncated file fails its own Unit at ingest time, and the planes the
derivation will produce are known for the tier gate (D-9) before a job is queued.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ..errors import ValidationError
from ..types import MODALITY_PLANE
from .derive import sniff
from .prepare import Prepared, has_content

if TYPE_CHECKING:
    from ..storage.protocols_service import StoredObject

DOC_MODALITIES = {"scan", "pdf_page", "table", "figure"}
TEXT_SUFFIX_MODALITY = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".log": "log",
    ".py": "code",
    ".js": "code",
    ".ts": "code",
    ".go": "code",
    ".rs": "code",
    ".java": "code",
    ".c": "code",
    ".h": "code",
    ".cpp": "code",
    ".rb": "code",
    ".sh": "code",
    ".vtt": "transcript",
    ".srt": "transcript",
}


def family(mime: str) -> str:
    if mime == "application/pdf":
        return "pdf"
    return mime.split("/", 1)[0]


def implied_planes(mime: str, modality: str) -> tuple[str, ...]:
    """The planes a derivation of this content produces."""
    fam = family(mime)
    if fam == "pdf":
        return ("doc_visual",)
    if fam == "image":
        return ("doc_visual",) if modality in DOC_MODALITIES else ("visual",)
    if fam == "audio":
        return ("audio",)
    if fam == "video":
        return ("audio", "visual")
    return ("text",)


def default_modality(mime: str, key: str) -> str:
    fam = family(mime)
    if fam == "pdf":
        return "pdf_page"
    if fam == "image":
        return "image"
    if fam == "audio":
        return "audio"
    if fam == "video":
        return "video_shot"
    return TEXT_SUFFIX_MODALITY.get(Path(key).suffix.lower(), "text")


def probe(path: Path, mime: str) -> None:
    """Cheap structural checks that catch truncated and malformed files before queueing."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(64)
        f.seek(max(0, size - 2048))
        tail = f.read()
    if mime == "application/pdf" and b"%%EOF" not in tail:
        raise ValidationError(
            "malformed PDF: no end-of-file marker (truncated?)", field="source_uri"
        )
    if mime in ("audio/wav", "audio/x-wav", "audio/wave") and head[:4] == b"RIFF":
        riff = struct.unpack("<I", head[4:8])[0]
        if riff + 8 > size:
            raise ValidationError(
                f"truncated WAV: header declares {riff + 8} bytes, file has {size}",
                field="source_uri",
            )


def resolve(
    p: Prepared, obj: StoredObject, blob: Path, declared_modality_given: bool, max_text_chars: int
) -> tuple[str, tuple[str, ...]]:
    """Fill ``p`` from its object; returns ``(sniffed mime, implied planes)``.

    A text object becomes an ordinary text Unit (``p.text`` set); a media object keeps
    ``p.text == ""`` and is derived by a job.
    """
    size = obj.size
    if size == 0:
        raise ValidationError("the object is empty (zero bytes)", field="source_uri")
    with open(blob, "rb") as f:
        head = f.read(8192)
    sniffed = sniff(head, obj.object_key)
    declared = (p.mime or "").split(";")[0].strip().lower()
    if sniffed == "application/octet-stream":
        raise ValidationError(f"unsupported file type (declared {declared})", field="mime")
    if family(sniffed) != family(declared) and not (
        {family(sniffed), family(declared)} <= {"audio", "video"}
    ):
        raise ValidationError(
            f"declared mime {declared} but the content is {sniffed}", field="mime"
        )
    modality = p.modality if declared_modality_given else default_modality(sniffed, obj.object_key)
    planes = implied_planes(sniffed, modality)
    if family(sniffed) == "text":
        if size > max_text_chars * 4:
            raise ValidationError("text object larger than the text limit", field="source_uri")
        try:
            text = blob.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationError("text object is not valid UTF-8", field="source_uri") from None
        if not has_content(text):
            raise ValidationError("text object is empty", field="source_uri")
        p.text = text
        if MODALITY_PLANE.get(modality) != "text":
            raise ValidationError(f"modality {modality} does not match text content", field="mime")
    else:
        probe(blob, sniffed)
        if declared_modality_given and MODALITY_PLANE.get(modality) not in planes:
            raise ValidationError(
                f"modality {modality} does not match {sniffed} content", field="modality"
            )
    p.modality = modality
    p.object_sha = obj.sha256
    p.plane = planes[0] if family(sniffed) != "video" else "visual"
    p.mime = declared or sniffed
    canon = {
        "object": obj.sha256,
        "mime": p.mime,
        "modality": modality,
        "locator": p.locator.to_dict() if p.locator else None,
        "source_uri": p.source_uri,
    }
    p.content_hash = hashlib.sha256(orjson.dumps(canon, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return sniffed, planes
