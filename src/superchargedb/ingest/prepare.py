"""Per-Unit validation and preparation for ``POST /v1/ingest`` (D-11, D-12, D-14, D-15).

Each raw Unit is validated on its own, so one bad Locator fails that Unit alone; what survives is
resolved to a scope, plane, doc_id, owner and groups, hashed, and chunked into the token window.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import orjson
from pydantic import ValidationError as PydanticValidationError

from ..auth.scopes import is_valid_scope, scope_within, within_any
from ..errors import SCDBError, ScopeForbiddenError, ValidationError
from ..schemas import UnitIn, locator_from_in
from ..types import MODALITY_PLANE, PLANES, Locator, Principal
from .chunking import Chunk, chunk_text


@dataclass
class Prepared:
    """A validated Unit ready to embed and write; ``chunks`` has one entry when it fits."""

    index: int
    scope: str
    doc_id: str
    modality: str
    plane: str
    source_uri: str
    mime: str | None
    locator: Locator | None
    acl_owner: str
    acl_groups: list[str]
    content_hash: str
    text: str
    event_at: int | None
    chunks: list[tuple[str, Locator | None]] = field(default_factory=list)
    vectors: Any = None  # np.ndarray (n_chunks, dim) once embedded
    object_key: str | None = None  # set when the Unit is derived from a stored object
    object_sha: str | None = None  # the blob it was derived from, fixed at ingest time
    context: str = ""  # the title line later chunks are embedded and indexed with
    captured_at: int | None = None  # capture time (epoch ms) without any locator offset
    spans: list[tuple[int, int]] = field(default_factory=list)  # each chunk's [start, end) in text


def pydantic_message(exc: PydanticValidationError) -> tuple[str, list[dict[str, Any]]]:
    details = [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    first = details[0] if details else {"loc": [], "msg": "invalid"}
    where = ".".join(first["loc"]) or "body"
    return f"{where}: {first['msg']}", details


def content_hash(u: UnitIn, text: str, source_uri: str, locator: Locator | None) -> str:
    canon = {
        "text": text,
        "plane": u.plane,
        "modality": u.modality,
        "locator": locator.to_dict() if locator else None,
        "source_uri": source_uri,
        "mime": u.mime,
    }
    return hashlib.sha256(orjson.dumps(canon, option=orjson.OPT_SORT_KEYS)).hexdigest()


def prepare_unit(
    index: int,
    raw: Any,
    principal: Principal,
    target_scope: str,
    header_scope: str | None,
    max_text_chars: int,
) -> Prepared:
    """Validate one raw Unit; raises an SCDBError that becomes this Unit's ``ok: false``."""
    if not isinstance(raw, dict):
        raise ValidationError("each unit must be a JSON object")
    try:
        u = UnitIn.model_validate(raw)
    except PydanticValidationError as exc:
        msg, details = pydantic_message(exc)
        raise ValidationError(msg, details=details) from None
    scope = u.scope if u.scope is not None else target_scope
    if not is_valid_scope(scope):
        raise ValidationError("scope: invalid scope grammar", field="scope")
    if header_scope is not None and not scope_within(scope, header_scope):
        raise ScopeForbiddenError("unit scope lies outside the X-Aegis-Scope of this request")
    if not within_any(scope, principal.scopes):
        raise ScopeForbiddenError("unit scope lies outside your effective scopes")
    object_key = None
    if u.text is None:
        # Derived from raw bytes: source_uri names a stored object, mime says what it is.
        if u.source_uri is None or u.mime is None:
            raise ValidationError(
                "a Unit needs text, or source_uri (an object key) and mime to derive it from",
                field="text",
            )
        object_key = u.source_uri.split("#", 1)[0]
        text = ""
    else:
        text = u.text
        if not has_content(text):
            raise ValidationError(
                "text is empty (only whitespace, NUL or other invisible characters)", field="text"
            )
    if len(text) > max_text_chars:
        raise ValidationError(
            f"text longer than the limit of {max_text_chars} characters", field="text"
        )
    owner = u.acl_owner or principal.name
    if owner != principal.name and not principal.has("admin"):
        raise ValidationError(
            "only an admin may set acl_owner to another principal", field="acl_owner"
        )
    groups = sorted(set(u.acl_groups if u.acl_groups is not None else principal.groups))
    locator = locator_from_in(u.locator) if u.locator is not None else None
    if u.doc_id is not None:
        doc_id = u.doc_id
    else:
        basis = u.source_uri if u.source_uri is not None else text
        doc_id = "d_" + hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    source_uri = u.source_uri or f"{scope}/{doc_id}"
    event_at = captured = None
    if u.captured_at is not None:
        cap = u.captured_at
        if cap.tzinfo is None:
            cap = cap.replace(tzinfo=UTC)
        event_at = captured = int(cap.timestamp() * 1000)
        if locator is not None and locator.t_start_ms is not None:
            event_at += locator.t_start_ms
    return Prepared(
        index=index,
        scope=scope,
        doc_id=doc_id,
        modality=str(u.modality),
        plane=str(u.plane),
        source_uri=source_uri,
        mime=u.mime,
        locator=locator,
        acl_owner=owner,
        acl_groups=groups,
        content_hash=content_hash(u, text, source_uri, locator),
        text=text,
        event_at=event_at,
        object_key=object_key,
        captured_at=captured,
    )


def has_content(text: str) -> bool:
    """Whether ``text`` holds anything visible: NULs and other control or format characters
    (zero-width spaces) embed and index as nothing, so such a Unit could never be found."""
    return any(ch.isprintable() and not ch.isspace() for ch in text)


def declared_plane(raw: Any) -> str | None:
    """The plane a raw Unit asks for (its ``plane``, else its ``modality``'s), read before it
    is validated so that the tier gate decides first; None when it names neither."""
    if not isinstance(raw, dict):
        return None
    plane, modality = raw.get("plane"), raw.get("modality")
    if isinstance(plane, str) and plane in PLANES:
        return plane
    if isinstance(modality, str) and modality in MODALITY_PLANE:
        return MODALITY_PLANE[modality]
    return None


def title_line(text: str) -> str:
    """The document's first non-empty line when it reads like a title (short)."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line if len(line) <= 200 else ""
    return ""


def chunk_prepared(p: Prepared, chunks: list[Chunk]) -> None:
    """Attach ``(text, locator)`` per chunk; child Locators are relative to the submitted text."""
    if len(chunks) <= 1:
        p.chunks = [(p.text, p.locator)]
        p.spans = [(0, len(p.text))]
        return
    p.context = title_line(p.text)
    by_lines = p.modality in ("code", "log")
    base_char = (p.locator.start or 0) if p.locator and p.locator.kind == "char_span" else 0
    base_line = (p.locator.start or 1) if p.locator and p.locator.kind == "line_range" else 1
    out: list[tuple[str, Locator | None]] = []
    for c in chunks:
        if p.locator is not None and p.locator.kind in ("bbox", "time_range"):
            loc: Locator | None = p.locator
        elif by_lines or (p.locator is not None and p.locator.kind == "line_range"):
            ls = c.line_start or 1
            le = c.line_end or ls
            loc = Locator(kind="line_range", start=base_line + ls - 1, end=base_line + le - 1)
        else:
            loc = Locator(kind="char_span", start=base_char + c.start, end=base_char + c.end)
        out.append((c.text, loc))
    p.chunks = out
    p.spans = [(c.start, c.end) for c in chunks]


def error_result(exc: SCDBError) -> dict[str, Any]:
    return {"ok": False, "error": exc.to_dict()}


__all__ = [
    "Prepared",
    "prepare_unit",
    "chunk_prepared",
    "chunk_text",
    "declared_plane",
    "error_result",
]
