"""Python client for the SuperChargeDB HTTP API: ``Client`` (sync) and ``AsyncClient`` (async).

Both wrap httpx and share everything but the I/O: one module-level ``build_*`` function per
endpoint returns a ``Req`` ``(method, path, params, headers, json)``, and the same ``from_json``
constructors turn answers into frozen dataclasses (each keeps the original JSON in ``.raw``).
Every non-2xx answer raises an ``APIError`` subclass chosen by the API's error ``code`` (by the
HTTP status when the body is not the API's JSON). Imports nothing of the server.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar, Unpack
from urllib.parse import quote

import httpx

from ._version import __version__

DEFAULT_URL = "http://127.0.0.1:8080"
T = TypeVar("T")
Json = dict[str, Any]
TimeArg = str | datetime | None

# -- errors ------------------------------------------------------------------------------------


class APIError(Exception):
    """A non-2xx answer: ``status``, the API's ``code`` and ``message``, any ``extra`` fields."""

    http_status = 0
    default_code = "error"

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.extra: Json = dict(extra or {})
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.request_id = self.headers.get("x-request-id")


class Unauthorized(APIError):
    http_status, default_code = 401, "unauthorized"


class Forbidden(APIError):
    """403; ``code`` is ``forbidden``, ``forbidden_scope``, ``privilege_escalation`` (with
    ``extra["lacks"]``) or ``self_lockout``."""

    http_status, default_code = 403, "forbidden"


class PaymentRequired(APIError):
    http_status, default_code = 402, "payment_required"


class UpgradeRequired(PaymentRequired):
    default_code = "upgrade_required"

    @property
    def required_tier(self) -> str | None:
        return self.extra.get("required_tier")


class QuotaExceeded(PaymentRequired):
    default_code = "quota_exceeded"

    @property
    def limit(self) -> int | None:
        return self.extra.get("limit")

    @property
    def used(self) -> int | None:
        return self.extra.get("used")

    @property
    def requested(self) -> int | None:
        return self.extra.get("requested")


class NotFound(APIError):
    http_status, default_code = 404, "not_found"


class Conflict(APIError):
    http_status, default_code = 409, "conflict"


class PayloadTooLarge(APIError):
    http_status, default_code = 413, "payload_too_large"


class ValidationFailed(APIError):
    http_status, default_code = 422, "validation_error"


class _RetryAfter(APIError):
    """An error that says when to come back (429 and 503 carry ``Retry-After``)."""

    @property
    def retry_after(self) -> float | None:
        """Seconds to wait, from ``Retry-After`` (delta-seconds or an HTTP date)."""
        v = self.headers.get("retry-after")
        if not v:
            return None
        try:
            return max(0.0, float(v))
        except ValueError:
            pass
        try:
            return max(0.0, (parsedate_to_datetime(v) - datetime.now(UTC)).total_seconds())
        except (TypeError, ValueError):
            return None


class RateLimited(_RetryAfter):
    http_status, default_code = 429, "rate_limited"


class Unavailable(_RetryAfter):
    """503: overloaded (admission control) or not ready yet."""

    http_status, default_code = 503, "unavailable"


_ERRORS: list[type[APIError]] = [Unauthorized, Forbidden, PaymentRequired, UpgradeRequired]
_ERRORS += [QuotaExceeded, NotFound, Conflict, PayloadTooLarge, ValidationFailed]
_ERRORS += [RateLimited, Unavailable]
_BY_CODE = {c.default_code: c for c in _ERRORS}
_BY_CODE.update(forbidden_scope=Forbidden, privilege_escalation=Forbidden, self_lockout=Forbidden)
_BY_CODE.update(last_admin=Conflict)
# When the code is unknown (or absent), by status: the first class listed for it wins.
_BY_STATUS = {c.http_status: c for c in reversed(_ERRORS)}


def make_error(
    status: int, err: Any, fallback: str = "", headers: Mapping[str, str] | None = None
) -> APIError:
    """The exception for an API error object ``{"code", "message", ...extra}`` and a status."""
    extra = dict(err) if isinstance(err, Mapping) else {}
    code = str(extra.pop("code", "") or "")
    message = str(extra.pop("message", "") or "") or fallback
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, APIError)
    return cls(status or cls.http_status, code or cls.default_code, message, extra, headers)


def error_from_response(resp: httpx.Response) -> APIError:
    try:
        body = resp.json()
    except ValueError:
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    fallback = resp.text.strip()[:500] or resp.reason_phrase
    return make_error(resp.status_code, err, fallback, resp.headers)


# -- typed results -----------------------------------------------------------------------------


def _make(cls: type[T], d: Json, **conv: Any) -> T:
    """``cls`` from the JSON fields of the same names, ``conv`` overriding, ``raw=d``."""
    kw = {f.name: d.get(f.name) for f in fields(cls) if f.name != "raw"}  # type: ignore[arg-type]
    return cls(**{**kw, **conv, "raw": d})


def _tuple(v: Any) -> tuple[Any, ...]:
    return tuple(v or ())


@dataclass(frozen=True)
class Locator:
    """A span in a source: ``char_span``/``line_range`` use start/end, ``time_range`` the
    ``t_*_ms`` fields and ``shot_idx``, ``bbox`` ``box`` (x0, y0, x1, y1) and ``page``."""

    kind: str
    start: int | None = None
    end: int | None = None
    t_start_ms: int | None = None
    t_end_ms: int | None = None
    shot_idx: int | None = None
    box: tuple[float, ...] | None = None
    page: int | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json | None) -> Locator | None:
        box = d.get("box") if d else None
        return _make(cls, d, box=tuple(box) if box is not None else None) if d else None


@dataclass(frozen=True)
class Hit:
    unit_id: str
    score: float
    plane: str
    modality: str
    doc_id: str
    scope: str
    source_uri: str | None
    mime: str | None
    text: str
    snippet: str | None  # None when searched with snippets=False
    locator: Locator | None
    ranks: dict[str, int | None]  # {"dense": rank or None, "lexical": rank or None}
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> Hit:
        return _make(
            cls, d, locator=Locator.from_json(d.get("locator")), ranks=d.get("ranks") or {}
        )


@dataclass(frozen=True)
class Citation:
    index: int
    unit_id: str
    source_uri: str | None
    locator: Locator | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> Citation:
        return _make(cls, d, locator=Locator.from_json(d.get("locator")))


@dataclass(frozen=True)
class AnswerSentence:
    """One sentence of an answer: ``supported`` by its cited passages, and whether it
    ``answers_question`` (states the asked type about the asked focus), which is not the same."""

    text: str
    citations: tuple[int, ...]
    supported: bool
    support_score: float | None
    quoted: bool
    answers_question: bool | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> AnswerSentence:
        return _make(
            cls,
            d,
            text=d.get("text") or "",
            citations=tuple(d.get("citations") or ()),
            supported=bool(d.get("supported")),
            quoted=bool(d.get("quoted")),
        )


@dataclass(frozen=True)
class QuestionInfo:
    """What the server recognized the question asks: ``type`` (person, date, year, num, place,
    org, yesno, choice, thing, other), its ``focus`` and, for compound questions, its
    ``parts``."""

    type: str
    focus: str
    options: tuple[str, ...]
    parts: tuple[str, ...]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json | None) -> QuestionInfo | None:
        if not isinstance(d, dict):
            return None
        return _make(
            cls,
            d,
            type=d.get("type") or "other",
            focus=d.get("focus") or "",
            options=_tuple(d.get("options")),
            parts=_tuple(d.get("parts")),
        )


@dataclass(frozen=True)
class Answer:
    """``refusal_code``: ``no_evidence``, ``type_mismatch``, ``focus_missing`` or
    ``chain_incomplete`` when ``refused``; ``unanswered_parts``: a compound question's parts
    left unanswered."""

    text: str
    citations: tuple[Citation, ...]
    nli_faithfulness: float | None
    extractive: bool
    sentences: tuple[AnswerSentence, ...]
    dropped: Any
    refused: bool
    refusal_code: str | None
    refusal_reason: str | None
    question: QuestionInfo | None
    unanswered_parts: tuple[str, ...]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> Answer:
        cites = tuple(Citation.from_json(c) for c in d.get("citations") or ())
        flags = {"extractive": bool(d.get("extractive")), "refused": bool(d.get("refused"))}
        sentences = tuple(
            AnswerSentence.from_json(s) for s in d.get("sentences") or () if isinstance(s, dict)
        )
        return _make(
            cls,
            d,
            text=d.get("text") or "",
            citations=cites,
            sentences=sentences,
            question=QuestionInfo.from_json(d.get("question")),
            unanswered_parts=_tuple(d.get("unanswered_parts")),
            **flags,
        )


@dataclass(frozen=True)
class SearchResult:
    """``/v1/search`` and ``/v1/answer``; ``answer`` is None for a search."""

    hits: tuple[Hit, ...]
    trace: Json
    context: Json
    answer: Answer | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> SearchResult:
        ans = d.get("answer")
        return _make(
            cls,
            d,
            hits=tuple(Hit.from_json(h) for h in d.get("hits") or ()),
            trace=d.get("trace") or {},
            context=d.get("context") or {},
            answer=Answer.from_json(ans) if isinstance(ans, dict) else None,
        )

    @property
    def effective_scopes(self) -> list[str]:
        return list(self.context.get("effective_scopes") or [])


@dataclass(frozen=True)
class UnitResult:
    """One entry of an ingest's ``results``: ``status`` created/unchanged/updated when ``ok``,
    ``unit_ids`` every chunk's id, ``error`` the API error object when not ``ok``."""

    ok: bool
    unit_id: str | None
    status: str | None
    unit_ids: tuple[str, ...]
    error: Json | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> UnitResult:
        uid = d.get("unit_id")
        ids = _tuple(d.get("unit_ids") or ([uid] if uid else []))
        return _make(cls, d, ok=bool(d.get("ok")), unit_ids=ids)


@dataclass(frozen=True)
class IngestResult:
    """``/v1/ingest`` and ``PUT /v1/docs/{doc_id}``; ``ingested`` counts created Units."""

    ingested: int
    results: tuple[UnitResult, ...]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> IngestResult:
        res = tuple(UnitResult.from_json(r) for r in d.get("results") or ())
        return _make(cls, d, ingested=int(d.get("ingested") or 0), results=res)

    @property
    def unit_ids(self) -> list[str]:
        return [r.unit_id for r in self.results if r.ok and r.unit_id]

    @property
    def failed(self) -> list[tuple[int, UnitResult]]:
        return [(i, r) for i, r in enumerate(self.results) if not r.ok]


@dataclass(frozen=True)
class Me:
    """``GET /v1/me``: the caller's identity, grants and quota (``quota`` as the server sends
    it: ``documents`` used/quota, object bytes, media pages and minutes used/cap)."""

    name: str
    perms: tuple[str, ...]
    tier: str
    scopes: tuple[str, ...]
    active_scope: str
    groups: tuple[str, ...]
    quota: Json
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> Me:
        return _make(
            cls,
            d,
            perms=_tuple(d.get("perms")),
            scopes=_tuple(d.get("scopes")),
            groups=_tuple(d.get("groups")),
            quota=d.get("quota") or {},
        )

    def may(self, perm: str) -> bool:
        return perm in self.perms


@dataclass(frozen=True)
class UnitRecord:
    """``GET /v1/units/{id}`` and listings; times are epoch ms."""

    unit_id: str
    text: str
    scope: str
    doc_id: str
    modality: str
    plane: str
    source_uri: str | None
    mime: str | None
    locator: Locator | None
    acl_owner: str
    acl_groups: tuple[str, ...]
    content_hash: str
    chunk: dict[str, int]  # {"index", "count"}
    created_at: int
    event_at: int | None
    t_bucket: int | None
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> UnitRecord:
        loc, groups = Locator.from_json(d.get("locator")), _tuple(d.get("acl_groups"))
        return _make(cls, d, locator=loc, acl_groups=groups, chunk=d.get("chunk") or {})


@dataclass(frozen=True)
class DocRecord:
    """One entry of ``GET /v1/docs``; ``units`` counts the Units visible to the caller."""

    doc_id: str
    scope: str
    units: int
    planes: tuple[str, ...]
    modalities: tuple[str, ...]
    source_uri: str | None
    created_at: int
    updated_at: int
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Json) -> DocRecord:
        return _make(cls, d, planes=_tuple(d.get("planes")), modalities=_tuple(d.get("modalities")))


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; pass ``next_cursor`` back as ``cursor`` (None on the last page)."""

    items: tuple[T, ...]
    next_cursor: str | None
    context: Json
    raw: Json = field(repr=False, compare=False)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def _page(d: Json, key: str, conv: Callable[[Json], T]) -> Page[T]:
    items = tuple(conv(x) for x in d.get(key) or ())
    return Page(items, d.get("next_cursor"), d.get("context") or {}, raw=d)


@dataclass(frozen=True)
class AnswerEvent:
    """One server-sent event of ``answer_stream``: ``sentence``, ``citation``, ``final`` or
    ``error``; ``data`` is the parsed JSON (the raw string when it is not JSON)."""

    event: str
    data: Any

    @property
    def result(self) -> SearchResult | None:
        """A ``final`` event's payload as a SearchResult, when it carries hits."""
        if self.event == "final" and isinstance(self.data, dict) and "hits" in self.data:
            return SearchResult.from_json(self.data)
        return None


class _SSE:
    """An incremental text/event-stream parser, fed one line (without its newline) at a time."""

    def __init__(self, raise_errors: bool) -> None:
        self.raise_errors, self.name, self.data = raise_errors, "message", list[str]()

    def feed(self, line: str) -> AnswerEvent | None:
        if not line:
            return self.flush()
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "event":
            self.name = value
        elif key == "data":
            self.data.append(value)
        return None  # comments (":..."), id: and retry: are ignored

    def flush(self) -> AnswerEvent | None:
        name, lines = self.name, self.data
        self.name, self.data = "message", []
        if not lines:
            return None
        try:
            data: Any = json.loads("\n".join(lines))
        except ValueError:
            data = "\n".join(lines)
        if name == "error" and self.raise_errors:
            err = data.get("error", data) if isinstance(data, dict) else {"message": data}
            raise make_error(int(err.get("status") or 0) if isinstance(err, dict) else 0, err)
        return AnswerEvent(name, data)


# -- request builders: one per endpoint, shared by both clients --------------------------------


class Req(NamedTuple):
    method: str
    path: str
    params: dict[str, Any] | None = None
    headers: dict[str, str] | None = None
    json: Any = None


class QueryOptions(TypedDict, total=False):
    """Keyword options of search/answer: the AegisQuery fields besides ``q``, and the scope
    (sent as X-Aegis-Scope, never in the body). Defaults: top_k=10, rerank=False, mode=hybrid."""

    scope: str | None
    planes: Sequence[str] | None  # text, visual, audio, doc_visual
    modalities: Sequence[str] | None
    filters: Mapping[str, Any] | None  # {"doc_id", "modality", "time": {"from", "to"}, "acl"}
    top_k: int
    rerank: bool
    budget: Mapping[str, Any] | None  # {"max_ms", "max_cost_usd"}
    mode: str  # hybrid, dense or lexical
    snippets: bool  # False: hits without highlighted snippets (snippet None)


class ListOptions(TypedDict, total=False):
    """Filters of the listings: page size, plane, modality, event-time range [from_, to), scope.
    Times are ISO-8601 strings or datetimes (naive = UTC)."""

    limit: int | None
    plane: str | None
    modality: str | None
    from_: TimeArg
    to: TimeArg
    scope: str | None


def _seg(value: str) -> str:
    return quote(str(value), safe="")


def _scope(scope: str | None) -> dict[str, str] | None:
    return {"X-Aegis-Scope": scope} if scope is not None else None


def _iso(t: TimeArg) -> str | None:
    if t is None or isinstance(t, str):
        return t
    d = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return d.isoformat().replace("+00:00", "Z")


def _epoch_ms(t: int | datetime | None) -> int | None:
    if t is None or isinstance(t, int):
        return t
    return int((t.replace(tzinfo=UTC) if t.tzinfo is None else t).timestamp() * 1000)


def _strs(v: Sequence[str] | str | None) -> list[str] | None:
    return None if v is None else [v] if isinstance(v, str) else list(v)


def _check(opts: Mapping[str, Any], allowed: type) -> None:
    unknown = set(opts) - set(allowed.__annotations__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {sorted(unknown)}")


def build_health() -> Req:
    return Req("GET", "/healthz")


def build_ready() -> Req:
    return Req("GET", "/readyz")


def build_metrics(token: str | None) -> Req:
    # /metrics takes the operator's SCDB_METRICS_TOKEN, not an API key.
    return Req("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else None)


def build_ingest(units: Sequence[Mapping[str, Any]], scope: str | None, mode: str) -> Req:
    return Req(
        "POST", "/v1/ingest", None, _scope(scope), {"units": [dict(u) for u in units], "mode": mode}
    )


def build_query(path: str, q: str, opts: QueryOptions, *, answer: bool, stream: bool) -> Req:
    """``POST /v1/search`` or ``/v1/answer`` with an AegisQuery body."""
    _check(opts, QueryOptions)
    body: Json = {"q": q, "top_k": opts.get("top_k", 10), "rerank": opts.get("rerank", False)}
    filters, budget = opts.get("filters"), opts.get("budget")
    optional = {
        "mode": opts.get("mode", "hybrid"),
        "planes": _strs(opts.get("planes")),
        "modalities": _strs(opts.get("modalities")),
        "filters": dict(filters) if filters is not None else None,
        "budget": dict(budget) if budget is not None else None,
        "answer": answer or None,
        "stream": stream or None,
        "snippets": None if opts.get("snippets", True) else False,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return Req("POST", path, None, _scope(opts.get("scope")), body)


def build_search(q: str, opts: QueryOptions) -> Req:
    return build_query("/v1/search", q, opts, answer=False, stream=False)


def build_answer(q: str, opts: QueryOptions, stream: bool = False) -> Req:
    return build_query("/v1/answer", q, opts, answer=True, stream=stream)


def build_me() -> Req:
    return Req("GET", "/v1/me")


def build_get_unit(unit_id: str) -> Req:
    return Req("GET", f"/v1/units/{_seg(unit_id)}")


def build_delete_unit(unit_id: str) -> Req:
    return Req("DELETE", f"/v1/units/{_seg(unit_id)}")


def build_list(path: str, cursor: str | None, opts: ListOptions, **extra: Any) -> Req:
    """``GET /v1/units`` (``extra`` = doc_id) or ``GET /v1/docs``."""
    _check(opts, ListOptions)
    raw = {**extra, "cursor": cursor, "limit": opts.get("limit"), "plane": opts.get("plane")}
    raw.update(modality=opts.get("modality"), to=_iso(opts.get("to")))
    raw["from"] = _iso(opts.get("from_"))
    params = {k: v for k, v in raw.items() if v is not None}
    return Req("GET", path, params, _scope(opts.get("scope")))


def build_list_units(doc_id: str | None, cursor: str | None, opts: ListOptions) -> Req:
    return build_list("/v1/units", cursor, opts, doc_id=doc_id)


def build_list_docs(cursor: str | None, opts: ListOptions) -> Req:
    return build_list("/v1/docs", cursor, opts)


def build_set_doc_acl(doc_id: str, acl_groups: Sequence[str], scope: str | None) -> Req:
    body = {"acl_groups": list(acl_groups)}
    return Req("PATCH", f"/v1/docs/{_seg(doc_id)}", None, _scope(scope), body)


def build_replace_doc(doc_id: str, units: Sequence[Mapping[str, Any]], scope: str | None) -> Req:
    body = {"units": [dict(u) for u in units]}
    return Req("PUT", f"/v1/docs/{_seg(doc_id)}", None, _scope(scope), body)


def build_delete_doc(doc_id: str, scope: str | None) -> Req:
    return Req("DELETE", f"/v1/docs/{_seg(doc_id)}", None, _scope(scope))


def build_usage(from_: TimeArg, to: TimeArg) -> Req:
    raw = {"from": _iso(from_), "to": _iso(to)}
    return Req("GET", "/v1/usage", {k: v for k, v in raw.items() if v is not None})


def build_create_principal(name: str, spec: Mapping[str, Any]) -> Req:
    return Req("POST", "/v1/admin/principals", json={"name": name, **spec})


def build_list_principals() -> Req:
    return Req("GET", "/v1/admin/principals")


def build_get_principal(name: str) -> Req:
    return Req("GET", f"/v1/admin/principals/{_seg(name)}")


def build_update_principal(name: str, changes: Mapping[str, Any]) -> Req:
    return Req("PATCH", f"/v1/admin/principals/{_seg(name)}", json=dict(changes))


def build_create_key(name: str, expires_at: int | datetime | None) -> Req:
    ms = _epoch_ms(expires_at)
    body = {"expires_at": ms} if ms is not None else {}
    return Req("POST", f"/v1/admin/principals/{_seg(name)}/keys", json=body)


def build_list_keys(name: str) -> Req:
    return Req("GET", f"/v1/admin/principals/{_seg(name)}/keys")


def build_revoke_key(key_id: str) -> Req:
    return Req("DELETE", f"/v1/admin/keys/{_seg(key_id)}")


def build_rotate_key(key_id: str, overlap_s: int) -> Req:
    return Req("POST", f"/v1/admin/keys/{_seg(key_id)}/rotate", json={"overlap_s": overlap_s})


def build_get_job(job_id: str) -> Req:
    return Req("GET", f"/v1/jobs/{_seg(job_id)}")


def _key_path(key: str) -> str:
    return "/v1/objects/" + quote(key, safe="/")


def build_audit_verify() -> Req:
    return Req("GET", "/v1/audit/verify")


def build_stats() -> Req:
    return Req("GET", "/v1/stats")


def _decode(resp: httpx.Response) -> Any:
    if resp.status_code >= 400:
        raise error_from_response(resp)
    return resp.json() if "json" in resp.headers.get("content-type", "") else resp.text


def _principal_spec(perms: Sequence[str], tier: str, scopes: Sequence[str], **rest: Any) -> Json:
    spec = {"perms": list(perms), "tier": tier, "scopes": list(scopes), **rest}
    spec["groups"] = list(spec.get("groups") or ())
    if spec.get("active_scope") is None:
        spec.pop("active_scope", None)
    return spec


# -- clients -----------------------------------------------------------------------------------


class _Base:
    def __init__(self, base_url: str, api_key: str | None, scope: str | None) -> None:
        key = api_key if api_key is not None else os.environ.get("SCDB_API_KEY")
        self.base_url, self.scope = base_url.rstrip("/"), scope
        h = {"User-Agent": f"superchargedb-python/{__version__}", "Accept": "application/json"}
        if key:
            h["Authorization"] = f"Bearer {key}"
        if scope is not None:
            h["X-Aegis-Scope"] = scope
        self._headers = h


_SSE_ACCEPT = {"Accept": "text/event-stream"}


class Client(_Base):
    """Synchronous client. ``api_key`` falls back to ``$SCDB_API_KEY``; ``scope`` is the default
    X-Aegis-Scope of every call (a per-call ``scope=`` overrides it)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        scope: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, scope)
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, r: Req) -> Any:
        resp = self._http.request(r.method, r.path, params=r.params, headers=r.headers, json=r.json)
        return _decode(resp)

    def health(self) -> Json:
        return dict(self._call(build_health()))

    def ready(self) -> Json:
        """``{"status": "ready"}``; raises Unavailable while the index is replaying."""
        return dict(self._call(build_ready()))

    def metrics(self, token: str | None = None) -> str:
        """The Prometheus text exposition; ``token`` is the server's ``SCDB_METRICS_TOKEN``."""
        return str(self._call(build_metrics(token)))

    def ingest(
        self, units: Sequence[Mapping[str, Any]], scope: str | None = None, mode: str = "replace"
    ) -> IngestResult:
        return IngestResult.from_json(self._call(build_ingest(units, scope, mode)))

    def search(self, q: str, **opts: Unpack[QueryOptions]) -> SearchResult:
        r = build_search(q, opts)
        return SearchResult.from_json(self._call(r))

    def answer(self, q: str, **opts: Unpack[QueryOptions]) -> SearchResult:
        """``POST /v1/answer``: a SearchResult with ``answer`` set."""
        r = build_answer(q, opts)
        return SearchResult.from_json(self._call(r))

    def answer_stream(
        self, q: str, *, raise_errors: bool = True, **opts: Unpack[QueryOptions]
    ) -> Iterator[AnswerEvent]:
        """``POST /v1/answer`` with ``stream: true``, yielding parsed events; an ``error`` event
        raises its APIError unless ``raise_errors=False`` (then it is yielded)."""
        r = build_answer(q, opts, stream=True)
        headers = {**(r.headers or {}), **_SSE_ACCEPT}
        with self._http.stream(r.method, r.path, headers=headers, json=r.json) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise error_from_response(resp)
            sse = _SSE(raise_errors)
            for line in resp.iter_lines():
                if (ev := sse.feed(line)) is not None:
                    yield ev
            if (ev := sse.flush()) is not None:
                yield ev

    def get_unit(self, unit_id: str) -> UnitRecord:
        return UnitRecord.from_json(self._call(build_get_unit(unit_id)))

    def me(self) -> Me:
        """Who this key is: perms, tier, granted and active scope, groups, quota."""
        return Me.from_json(self._call(build_me()))

    def put_object(
        self,
        key: str,
        data: bytes | Iterator[bytes],
        content_type: str = "application/octet-stream",
        *,
        scope: str | None = None,
        acl_groups: Sequence[str] | None = None,
        if_match: str | None = None,
    ) -> Json:
        """Store bytes under ``key`` (it must start with the target scope + '/')."""
        headers = {"Content-Type": content_type, **(_scope(scope) or {})}
        if if_match is not None:
            headers["If-Match"] = if_match
        params = None if acl_groups is None else {"acl_groups": ",".join(acl_groups)}
        resp = self._http.put(_key_path(key), content=data, headers=headers, params=params)
        return dict(_decode(resp))

    def object_etag(self, key: str) -> str | None:
        """The stored object's ETag (its sha256, quoted), or None when there is none."""
        resp = self._http.get(_key_path(key), headers={"Range": "bytes=0-0"})
        if resp.status_code == 404:
            return None
        if resp.status_code >= 400 and resp.status_code != 416:
            raise error_from_response(resp)
        return resp.headers.get("ETag")

    def get_object(self, key: str, range_: str | None = None) -> bytes:
        headers = {"Range": range_} if range_ else None
        resp = self._http.get(_key_path(key), headers=headers)
        if resp.status_code >= 400:
            raise error_from_response(resp)
        return resp.content

    def get_job(self, job_id: str) -> Json:
        return dict(self._call(build_get_job(job_id)))

    def delete_unit(self, unit_id: str) -> Json:
        """``{"deleted", "unit_ids"}``: every chunk of the submitted Unit goes."""
        return dict(self._call(build_delete_unit(unit_id)))

    def list_units(
        self, doc_id: str | None = None, *, cursor: str | None = None, **opts: Unpack[ListOptions]
    ) -> Page[UnitRecord]:
        r = build_list_units(doc_id, cursor, opts)
        return _page(self._call(r), "units", UnitRecord.from_json)

    def iter_units(
        self, doc_id: str | None = None, **opts: Unpack[ListOptions]
    ) -> Iterator[UnitRecord]:
        """Every matching Unit, following cursors (``limit`` is the page size)."""
        cursor: str | None = None
        while True:
            page = self.list_units(doc_id, cursor=cursor, **opts)
            yield from page
            if not (cursor := page.next_cursor):
                return

    def list_docs(
        self, *, cursor: str | None = None, **opts: Unpack[ListOptions]
    ) -> Page[DocRecord]:
        return _page(self._call(build_list_docs(cursor, opts)), "docs", DocRecord.from_json)

    def iter_docs(self, **opts: Unpack[ListOptions]) -> Iterator[DocRecord]:
        """Every visible document, following cursors (``limit`` is the page size)."""
        cursor: str | None = None
        while True:
            page = self.list_docs(cursor=cursor, **opts)
            yield from page
            if not (cursor := page.next_cursor):
                return

    def set_doc_acl(self, doc_id: str, acl_groups: Sequence[str], scope: str | None = None) -> Json:
        return dict(self._call(build_set_doc_acl(doc_id, acl_groups, scope)))

    def replace_doc(
        self, doc_id: str, units: Sequence[Mapping[str, Any]], scope: str | None = None
    ) -> IngestResult:
        return IngestResult.from_json(self._call(build_replace_doc(doc_id, units, scope)))

    def delete_doc(self, doc_id: str, scope: str | None = None) -> Json:
        return dict(self._call(build_delete_doc(doc_id, scope)))

    def usage(self, from_: TimeArg = None, to: TimeArg = None) -> Json:
        return dict(self._call(build_usage(from_, to)))

    def create_principal(
        self,
        name: str,
        *,
        perms: Sequence[str],
        tier: str,
        scopes: Sequence[str],
        groups: Sequence[str] = (),
        doc_quota: int | None = None,
        active_scope: str | None = None,
    ) -> Json:
        """``{"principal", "key_id", "key"}``: the key is shown this once only."""
        extra = {"groups": groups, "doc_quota": doc_quota, "active_scope": active_scope}
        spec = _principal_spec(perms, tier, scopes, **extra)
        return dict(self._call(build_create_principal(name, spec)))

    def list_principals(self) -> list[Json]:
        return list(self._call(build_list_principals())["principals"])

    def get_principal(self, name: str) -> Json:
        return dict(self._call(build_get_principal(name)))

    def update_principal(self, name: str, **changes: Any) -> Json:
        """Changes among perms, tier, scopes, active_scope, groups, doc_quota, disabled."""
        return dict(self._call(build_update_principal(name, changes)))

    def create_key(self, name: str, expires_at: int | datetime | None = None) -> Json:
        """``{"key_id", "key", "expires_at"}``; ``expires_at`` is epoch ms or a datetime."""
        return dict(self._call(build_create_key(name, expires_at)))

    def list_keys(self, name: str) -> list[Json]:
        return list(self._call(build_list_keys(name))["keys"])

    def revoke_key(self, key_id: str) -> Json:
        return dict(self._call(build_revoke_key(key_id)))

    def rotate_key(self, key_id: str, overlap_s: int = 0) -> Json:
        """``{"key_id", "key", "old_key_id", "overlap_s"}``; the old key lives ``overlap_s``."""
        return dict(self._call(build_rotate_key(key_id, overlap_s)))

    def audit_verify(self) -> Json:
        """``{"ok", "records"}``: the chain's integrity and your tenant's record count."""
        return dict(self._call(build_audit_verify()))

    def stats(self) -> Json:
        """Your tenant's figures (admins): Units per plane, documents, jobs, lag, objects."""
        return dict(self._call(build_stats()))


class AsyncClient(_Base):
    """The asynchronous twin of ``Client``: the same methods, awaited; iterators are async."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        scope: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, scope)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, r: Req) -> Any:
        resp = await self._http.request(
            r.method, r.path, params=r.params, headers=r.headers, json=r.json
        )
        return _decode(resp)

    async def health(self) -> Json:
        return dict(await self._call(build_health()))

    async def ready(self) -> Json:
        return dict(await self._call(build_ready()))

    async def metrics(self, token: str | None = None) -> str:
        return str(await self._call(build_metrics(token)))

    async def ingest(
        self, units: Sequence[Mapping[str, Any]], scope: str | None = None, mode: str = "replace"
    ) -> IngestResult:
        return IngestResult.from_json(await self._call(build_ingest(units, scope, mode)))

    async def search(self, q: str, **opts: Unpack[QueryOptions]) -> SearchResult:
        r = build_search(q, opts)
        return SearchResult.from_json(await self._call(r))

    async def answer(self, q: str, **opts: Unpack[QueryOptions]) -> SearchResult:
        r = build_answer(q, opts)
        return SearchResult.from_json(await self._call(r))

    async def answer_stream(
        self, q: str, *, raise_errors: bool = True, **opts: Unpack[QueryOptions]
    ) -> AsyncIterator[AnswerEvent]:
        r = build_answer(q, opts, stream=True)
        headers = {**(r.headers or {}), **_SSE_ACCEPT}
        async with self._http.stream(r.method, r.path, headers=headers, json=r.json) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                raise error_from_response(resp)
            sse = _SSE(raise_errors)
            async for line in resp.aiter_lines():
                if (ev := sse.feed(line)) is not None:
                    yield ev
            if (ev := sse.flush()) is not None:
                yield ev

    async def get_unit(self, unit_id: str) -> UnitRecord:
        return UnitRecord.from_json(await self._call(build_get_unit(unit_id)))

    async def me(self) -> Me:
        return Me.from_json(await self._call(build_me()))

    async def put_object(
        self,
        key: str,
        data: bytes,
        content_type: str = "application/octet-stream",
        *,
        scope: str | None = None,
        acl_groups: Sequence[str] | None = None,
        if_match: str | None = None,
    ) -> Json:
        headers = {"Content-Type": content_type, **(_scope(scope) or {})}
        if if_match is not None:
            headers["If-Match"] = if_match
        params = None if acl_groups is None else {"acl_groups": ",".join(acl_groups)}
        resp = await self._http.put(_key_path(key), content=data, headers=headers, params=params)
        return dict(_decode(resp))

    async def get_object(self, key: str, range_: str | None = None) -> bytes:
        headers = {"Range": range_} if range_ else None
        resp = await self._http.get(_key_path(key), headers=headers)
        if resp.status_code >= 400:
            raise error_from_response(resp)
        return resp.content

    async def get_job(self, job_id: str) -> Json:
        return dict(await self._call(build_get_job(job_id)))

    async def delete_unit(self, unit_id: str) -> Json:
        return dict(await self._call(build_delete_unit(unit_id)))

    async def list_units(
        self, doc_id: str | None = None, *, cursor: str | None = None, **opts: Unpack[ListOptions]
    ) -> Page[UnitRecord]:
        r = build_list_units(doc_id, cursor, opts)
        return _page(await self._call(r), "units", UnitRecord.from_json)

    async def iter_units(
        self, doc_id: str | None = None, **opts: Unpack[ListOptions]
    ) -> AsyncIterator[UnitRecord]:
        cursor: str | None = None
        while True:
            page = await self.list_units(doc_id, cursor=cursor, **opts)
            for unit in page:
                yield unit
            if not (cursor := page.next_cursor):
                return

    async def list_docs(
        self, *, cursor: str | None = None, **opts: Unpack[ListOptions]
    ) -> Page[DocRecord]:
        r = build_list_docs(cursor, opts)
        return _page(await self._call(r), "docs", DocRecord.from_json)

    async def iter_docs(self, **opts: Unpack[ListOptions]) -> AsyncIterator[DocRecord]:
        cursor: str | None = None
        while True:
            page = await self.list_docs(cursor=cursor, **opts)
            for doc in page:
                yield doc
            if not (cursor := page.next_cursor):
                return

    async def set_doc_acl(
        self, doc_id: str, acl_groups: Sequence[str], scope: str | None = None
    ) -> Json:
        return dict(await self._call(build_set_doc_acl(doc_id, acl_groups, scope)))

    async def replace_doc(
        self, doc_id: str, units: Sequence[Mapping[str, Any]], scope: str | None = None
    ) -> IngestResult:
        return IngestResult.from_json(await self._call(build_replace_doc(doc_id, units, scope)))

    async def delete_doc(self, doc_id: str, scope: str | None = None) -> Json:
        return dict(await self._call(build_delete_doc(doc_id, scope)))

    async def usage(self, from_: TimeArg = None, to: TimeArg = None) -> Json:
        return dict(await self._call(build_usage(from_, to)))

    async def create_principal(
        self,
        name: str,
        *,
        perms: Sequence[str],
        tier: str,
        scopes: Sequence[str],
        groups: Sequence[str] = (),
        doc_quota: int | None = None,
        active_scope: str | None = None,
    ) -> Json:
        extra = {"groups": groups, "doc_quota": doc_quota, "active_scope": active_scope}
        spec = _principal_spec(perms, tier, scopes, **extra)
        return dict(await self._call(build_create_principal(name, spec)))

    async def list_principals(self) -> list[Json]:
        return list((await self._call(build_list_principals()))["principals"])

    async def get_principal(self, name: str) -> Json:
        return dict(await self._call(build_get_principal(name)))

    async def update_principal(self, name: str, **changes: Any) -> Json:
        return dict(await self._call(build_update_principal(name, changes)))

    async def create_key(self, name: str, expires_at: int | datetime | None = None) -> Json:
        return dict(await self._call(build_create_key(name, expires_at)))

    async def list_keys(self, name: str) -> list[Json]:
        return list((await self._call(build_list_keys(name)))["keys"])

    async def revoke_key(self, key_id: str) -> Json:
        return dict(await self._call(build_revoke_key(key_id)))

    async def rotate_key(self, key_id: str, overlap_s: int = 0) -> Json:
        return dict(await self._call(build_rotate_key(key_id, overlap_s)))

    async def audit_verify(self) -> Json:
        return dict(await self._call(build_audit_verify()))

    async def stats(self) -> Json:
        return dict(await self._call(build_stats()))
