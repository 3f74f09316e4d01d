"""The hand-written bad-input cases of tests/test_bad_input.py, as data.

``CASES``: requests that must be refused (status and stable ``error.code``, or a per-Unit
rejection inside a 200). ``PAYLOADS`` x ``FIELDS``: FTS5 syntax and SQL fragments in every string
field of every write and read request, each field with its outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from conftest import ALICE, BOB, CAROL, auth

SCOPE = "acme/alpha/backend"
# An admin in every payload's group (tests/test_bad_input.py creates it): a writer adds only
# groups it belongs to, and these cases store odd group names verbatim.
GROUPER = auth("aegis_sk_test_grouper")


@dataclass
class Case:
    method: str
    url: str
    json: Any = None
    content: Any = None
    headers: dict[str, Any] = field(default_factory=lambda: dict(ALICE))
    status: int = 422
    code: str | None = "validation_error"
    unit_error: str | None = None  # per-Unit rejection inside a 200
    raw: bool = False  # sent byte for byte over a socket (HTTP clients normalize '..' away)


def unit(**kw: Any) -> dict[str, Any]:
    return {"units": [{"text": "A perfectly fine sentence.", **kw}]}


def deep(n: int) -> Any:
    v: Any = "x"
    for _ in range(n):
        v = {"a": v}
    return v


# -- hand-written rejections -----------------------------------------------------------------
ADMIN = {"name": "eve", "perms": ["read"], "tier": "pro", "scopes": ["acme/alpha"]}
ING = "/v1/ingest"
SEARCH = "/v1/search"
U422 = {"status": 200, "code": None, "unit_error": "validation_error"}
TEN_MB = "x" * (10 * 1024 * 1024)

CASES: dict[str, Case] = {
    # Body shape and JSON itself.
    "empty-body": Case("POST", ING, content=b""),
    "body-null": Case("POST", ING, content=b"null"),
    "body-array": Case("POST", ING, json=[unit()]),
    "body-string": Case("POST", SEARCH, json="q"),
    "trailing-garbage": Case("POST", ING, content=json.dumps(unit()).encode() + b" }"),
    "nan-literal": Case("POST", SEARCH, content=b'{"q": "x", "top_k": NaN}'),
    "infinity-literal": Case("POST", SEARCH, content=b'{"q": "x", "budget": {"max_ms": Infinity}}'),
    "minus-infinity": Case(
        "POST", ING, content=b'{"units": [{"text": "x", "locator": -Infinity}]}'
    ),
    "overflow-to-inf": Case(
        "POST",
        ING,
        content=b'{"units": [{"text": "x", "locator": {"kind": "bbox", "box": [0, 0, 1e999, 5]}}]}',
    ),
    "huge-integer": Case("POST", SEARCH, content=b'{"q": "x", "top_k": 1' + b"0" * 400 + b"}"),
    "invalid-utf8-body": Case("POST", SEARCH, content=b'{"q": "caf\xc3\x28 \xff\xfe"}'),
    "invalid-utf8-ingest": Case("POST", ING, content=b'{"units": [{"text": "\xed\xa0\x80"}]}'),
    "lone-surrogate-escape": Case("POST", ING, content=b'{"units": [{"text": "\\ud800"}]}'),
    "depth-33": Case("POST", SEARCH, json={"q": "x", "filters": deep(32)}),
    "depth-5000": Case("POST", ING, content=b"[" * 5000 + b"]" * 5000),
    "wide-unknown-keys": Case(
        "POST", SEARCH, json={"q": "x", **{f"k{i}": i for i in range(20000)}}
    ),
    "ten-mb-text": Case("POST", ING, json=unit(text=TEN_MB), status=413, code="payload_too_large"),
    "ten-mb-query": Case("POST", SEARCH, json={"q": TEN_MB}, status=413, code="payload_too_large"),
    "declared-length-huge": Case(
        "POST",
        SEARCH,
        content=b'{"q": "x"}',
        headers={**ALICE, "Content-Length": str(10**12)},
        status=413,
        code="payload_too_large",
    ),
    "declared-length-negative": Case(
        "POST",
        SEARCH,
        content=b'{"q": "x"}',
        headers={**ALICE, "Content-Length": "-5"},
        status=413,
        code="payload_too_large",
    ),
    "chunked-over-limit": Case(
        "POST",
        ING,
        content=iter([b'{"units": [{"text": "'] + [b"y" * 1024 * 1024] * 9 + [b'"}]}']),
        status=413,
        code="payload_too_large",
    ),
    "batch-100k": Case(
        "POST",
        ING,
        json={"units": [{"text": f"u{i}"} for i in range(100_000)]},
        status=413,
        code="payload_too_large",
    ),
    "batch-1001": Case(
        "POST",
        ING,
        json={"units": [{"text": f"u{i}"} for i in range(1001)]},
        status=413,
        code="payload_too_large",
    ),
    "text-over-char-limit": Case("POST", ING, json=unit(text="z" * 1_000_001), **U422),
    # Wrong types and values, whole request.
    "units-object": Case("POST", ING, json={"units": {"text": "x"}}),
    "units-string": Case("POST", ING, json={"units": "x"}),
    "units-empty": Case("POST", ING, json={"units": []}),
    "mode-unknown": Case("POST", ING, json={**unit(), "mode": "merge"}),
    "ingest-extra-top-level": Case("POST", ING, json={**unit(), "scope": SCOPE}),
    "q-number": Case("POST", SEARCH, json={"q": 5}),
    "q-empty": Case("POST", SEARCH, json={"q": ""}),
    "q-null": Case("POST", SEARCH, json={"q": None}),
    "q-list": Case("POST", SEARCH, json={"q": ["a"]}),
    "q-too-long": Case("POST", SEARCH, json={"q": "a" * 4097}),
    "top-k-string": Case("POST", SEARCH, json={"q": "x", "top_k": "ten"}),
    "top-k-zero": Case("POST", SEARCH, json={"q": "x", "top_k": 0}),
    "top-k-negative": Case("POST", SEARCH, json={"q": "x", "top_k": -3}),
    "top-k-huge": Case("POST", SEARCH, json={"q": "x", "top_k": 10**6}),
    "top-k-fraction": Case("POST", SEARCH, json={"q": "x", "top_k": 1.5}),
    # Strict types: a bool is not an int, a numeric string is not a number or a bool.
    "top-k-bool": Case("POST", SEARCH, json={"q": "x", "top_k": True}),
    "top-k-numeric-string": Case("POST", SEARCH, json={"q": "x", "top_k": "5"}),
    "top-k-whole-float": Case("POST", SEARCH, json={"q": "x", "top_k": 5.0}),
    "rerank-string": Case("POST", SEARCH, json={"q": "x", "rerank": "true"}),
    "rerank-number": Case("POST", SEARCH, json={"q": "x", "rerank": 1}),
    "budget-bool": Case("POST", SEARCH, json={"q": "x", "budget": {"max_ms": True}}),
    "planes-unknown": Case("POST", SEARCH, json={"q": "x", "planes": ["sound"]}),
    "planes-string": Case("POST", SEARCH, json={"q": "x", "planes": "text"}),
    "planes-empty": Case("POST", SEARCH, json={"q": "x", "planes": []}),
    "mode-fuzzy": Case("POST", SEARCH, json={"q": "x", "mode": "fuzzy"}),
    "budget-negative": Case("POST", SEARCH, json={"q": "x", "budget": {"max_ms": -1}}),
    "budget-string": Case("POST", SEARCH, json={"q": "x", "budget": "fast"}),
    "filters-list": Case("POST", SEARCH, json={"q": "x", "filters": []}),
    "filters-bad-time": Case(
        "POST", SEARCH, json={"q": "x", "filters": {"time": {"from": "yesterday"}}}
    ),
    "filters-groups-string": Case(
        "POST", SEARCH, json={"q": "x", "filters": {"acl": {"groups": "g"}}}
    ),
    "scope-in-body": Case("POST", SEARCH, json={"q": "x", "scope": SCOPE}),
    "stream-on-search": Case("POST", SEARCH, json={"q": "x", "stream": True}),
    "answer-on-search": Case("POST", SEARCH, json={"q": "x", "answer": True}),
    "answer-false-on-answer": Case("POST", "/v1/answer", json={"q": "x", "answer": False}),
    "header-query-scope-disagree": Case(
        "POST",
        SEARCH + "?scope=acme/alpha",
        json={"q": "x"},
        headers={**ALICE, "X-Aegis-Scope": SCOPE},
    ),
    "scope-header-invalid-utf8": Case(
        "POST", SEARCH, json={"q": "x"}, headers={**ALICE, "X-Aegis-Scope": b"acme/\xff"}
    ),
    "scope-trailing-slash": Case("POST", SEARCH + "?scope=acme/alpha/", json={"q": "x"}),
    "scope-dotdot": Case("POST", SEARCH + "?scope=acme/alpha/..", json={"q": "x"}),
    "scope-upper": Case("POST", SEARCH + "?scope=ACME/alpha", json={"q": "x"}),
    "scope-newline": Case("POST", SEARCH + "?scope=acme/alpha%0A", json={"q": "x"}),
    "scope-cyrillic": Case("POST", SEARCH + "?scope=" + quote("\u0430cme/alpha"), json={"q": "x"}),
    # Wrong types and values inside a Unit: per-Unit rejections.
    "unit-not-object": Case("POST", ING, json={"units": [1]}, **U422),
    "unit-text-number": Case("POST", ING, json={"units": [{"text": 5}]}, **U422),
    "unit-text-list": Case("POST", ING, json={"units": [{"text": ["a"]}]}, **U422),
    "unit-text-null": Case("POST", ING, json={"units": [{"text": None}]}, **U422),
    "unit-text-blank": Case("POST", ING, json=unit(text="   \n\t "), **U422),
    "unit-text-nul-only": Case("POST", ING, json=unit(text="\x00"), **U422),
    "unit-text-nul-whitespace": Case("POST", ING, json=unit(text=" \x00\n\x00\t"), **U422),
    "unit-text-zero-width": Case("POST", ING, json=unit(text="\u200b\u200b\ufeff"), **U422),
    "unit-text-controls": Case("POST", ING, json=unit(text="\x01\x02\x7f\x1b"), **U422),
    # Text declared as a binary type is not stored as a text Unit.
    **{
        f"unit-text-mime-{m.replace('/', '-')}": Case("POST", ING, json=unit(mime=m), **U422)
        for m in ("image/png", "audio/wav", "video/mp4", "application/pdf", "IMAGE/PNG; q=1")
    },
    "unit-locator-start-bool": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": True, "end": 4}), **U422
    ),
    # The spec's own shape on a tier without the plane: the plane's default modality, 402.
    "unit-plane-only-free-visual": Case(
        "POST",
        ING,
        json={"units": [{"text": "A red bicycle.", "plane": "visual"}]},
        headers=CAROL,
        status=402,
        code="upgrade_required",
    ),
    "unit-plane-only-free-audio-malformed": Case(
        "POST",
        ING,
        json={"units": [{"text": "Hello.", "plane": "audio", "locator": "0-5"}]},
        headers=CAROL,
        status=402,
        code="upgrade_required",
    ),
    "unit-unknown-field": Case("POST", ING, json=unit(colour="red"), **U422),
    "unit-groups-string": Case("POST", ING, json=unit(acl_groups="g"), **U422),
    "unit-groups-numbers": Case("POST", ING, json=unit(acl_groups=[1, 2]), **U422),
    "unit-groups-65": Case("POST", ING, json=unit(acl_groups=[f"g{i}" for i in range(65)]), **U422),
    "unit-doc-id-empty": Case("POST", ING, json=unit(doc_id=""), **U422),
    "unit-doc-id-long": Case("POST", ING, json=unit(doc_id="d" * 513), **U422),
    "unit-modality-unknown": Case("POST", ING, json=unit(modality="clip"), **U422),
    "unit-plane-mismatch": Case("POST", ING, json=unit(modality="text", plane="audio"), **U422),
    "unit-captured-at-garbage": Case("POST", ING, json=unit(captured_at="last tuesday"), **U422),
    "unit-scope-invalid": Case("POST", ING, json=unit(scope="acme//alpha"), **U422),
    "unit-owner-not-admin": Case(
        "POST",
        ING,
        json={"units": [{"text": "x", "acl_owner": "alice"}]},
        headers=CAROL,
        **{**U422},
    ),
    "unit-scope-outside-grants": Case(
        "POST", ING, json=unit(scope="acme/beta"), **{**U422, "unit_error": "forbidden_scope"}
    ),
    "unit-object-escape": Case(
        "POST",
        ING,
        json={"units": [{"source_uri": "../../etc/passwd", "mime": "text/plain"}]},
        **{**U422, "unit_error": "not_found"},
    ),
    "unit-object-absolute": Case(
        "POST",
        ING,
        json={"units": [{"source_uri": "/etc/passwd", "mime": "text/plain"}]},
        **{**U422, "unit_error": "not_found"},
    ),
    # Malformed Locators (per-Unit).
    "loc-negative-start": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": -1, "end": 4}), **U422
    ),
    "loc-end-before-start": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": 9, "end": 4}), **U422
    ),
    "loc-empty-span": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": 4, "end": 4}), **U422
    ),
    "loc-span-fraction": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": 0.5, "end": 4}), **U422
    ),
    "loc-span-missing-end": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": 0}), **U422
    ),
    "loc-span-huge": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": 0, "end": 10**13}), **U422
    ),
    "loc-line-zero": Case(
        "POST", ING, json=unit(locator={"kind": "line_range", "start": 0, "end": 3}), **U422
    ),
    "loc-line-backwards": Case(
        "POST", ING, json=unit(locator={"kind": "line_range", "start": 5, "end": 2}), **U422
    ),
    "loc-bbox-inverted": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": [10, 10, 5, 5], "page": 1}), **U422
    ),
    "loc-bbox-negative": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": [-1, 0, 5, 5], "page": 1}), **U422
    ),
    "loc-bbox-outside-page": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": [0, 0, 2e6, 2e6], "page": 1}), **U422
    ),
    "loc-bbox-three": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": [0, 0, 5], "page": 1}), **U422
    ),
    "loc-bbox-page-zero": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": [0, 0, 5, 5], "page": 0}), **U422
    ),
    "loc-bbox-page-negative": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": [0, 0, 5, 5], "page": -2}), **U422
    ),
    "loc-bbox-strings": Case(
        "POST", ING, json=unit(locator={"kind": "bbox", "box": ["a", 0, 5, 5], "page": 1}), **U422
    ),
    "loc-time-backwards": Case(
        "POST",
        ING,
        json=unit(locator={"kind": "time_range", "t_start_ms": 500, "t_end_ms": 100}),
        **U422,
    ),
    "loc-time-negative": Case(
        "POST",
        ING,
        json=unit(locator={"kind": "time_range", "t_start_ms": -5, "t_end_ms": 100}),
        **U422,
    ),
    "loc-shot-negative": Case(
        "POST",
        ING,
        json=unit(locator={"kind": "time_range", "t_start_ms": 0, "t_end_ms": 100, "shot_idx": -1}),
        **U422,
    ),
    "loc-kind-unknown": Case("POST", ING, json=unit(locator={"kind": "circle", "r": 3}), **U422),
    "loc-extra-field": Case(
        "POST", ING, json=unit(locator={"kind": "char_span", "start": 0, "end": 3, "x": 1}), **U422
    ),
    "loc-string": Case("POST", ING, json=unit(locator="0-5"), **U422),
    # Object keys that try to escape, and object requests out of bounds.
    **{
        f"object-key-{name}": Case(
            "PUT",
            f"/v1/objects/{key}",
            content=b"payload",
            headers={**ALICE, "Content-Type": "text/plain"},
            raw=True,
        )
        for name, key in {
            "dotdot": f"{SCOPE}/../../../etc/passwd",
            "dotdot-encoded": f"{SCOPE}/%2e%2e/%2E%2E/etc/passwd",
            "dot-segment": f"{SCOPE}/./x.txt",
            "absolute": "/etc/passwd",
            "backslash": f"{SCOPE}/..%5C..%5Cx.txt",
            "nul": f"{SCOPE}/x.txt%00.png",
            "unicode-dots": f"{SCOPE}/%E2%80%A4%E2%80%A4/x.txt",
            "fullwidth-dot": f"{SCOPE}/%EF%BC%8E%EF%BC%8E/x.txt",
            "empty-segment": f"{SCOPE}//x.txt",
            "trailing-slash": f"{SCOPE}/dir/",
            "invalid-utf8": f"{SCOPE}/%FF%FE.txt",
            "too-long": f"{SCOPE}/" + "k" * 1100,
        }.items()
    },
    "object-key-other-scope": Case(
        "PUT",
        "/v1/objects/acme/beta/x.txt",
        content=b"payload",
        headers={**ALICE, "Content-Type": "text/plain"},
        status=403,
        code="forbidden_scope",
    ),
    "object-content-type-html-ish": Case(
        "PUT",
        f"/v1/objects/{SCOPE}/a.txt",
        content=b"payload",
        headers={**ALICE, "Content-Type": "text/<script>"},
    ),
    "object-overwrite-without-if-match": Case(
        "PUT",
        f"/v1/objects/{SCOPE}/notes.txt",
        content=b"other bytes",
        headers={**ALICE, "Content-Type": "text/plain"},
        status=409,
        code="conflict",
    ),
    "object-over-limit": Case(
        "PUT",
        f"/v1/objects/{SCOPE}/big.bin",
        content=b"\0" * (64 * 1024 + 1),
        headers={**ALICE, "Content-Type": "application/octet-stream"},
        status=413,
        code="payload_too_large",
    ),
    "object-over-limit-chunked": Case(
        "PUT",
        f"/v1/objects/{SCOPE}/big2.bin",
        content=iter([b"\1" * 16 * 1024] * 8),
        headers={**ALICE, "Content-Type": "application/octet-stream"},
        status=413,
        code="payload_too_large",
    ),
    "object-acl-groups-too-long": Case(
        "PUT",
        f"/v1/objects/{SCOPE}/g.txt?acl_groups=" + "g" * 3000,
        content=b"payload",
        headers={**ALICE, "Content-Type": "text/plain"},
    ),
    "object-read-only-key": Case(
        "PUT",
        f"/v1/objects/{SCOPE}/r.txt",
        content=b"payload",
        headers={**BOB, "Content-Type": "text/plain"},
        status=403,
        code="forbidden",
    ),
    # Listings, documents, usage, admin.
    "docs-limit-zero": Case("GET", "/v1/docs?limit=0"),
    "docs-limit-huge": Case("GET", "/v1/docs?limit=100000"),
    "docs-limit-string": Case("GET", "/v1/docs?limit=ten"),
    "docs-cursor-garbage": Case("GET", "/v1/docs?cursor=!!!not-base64!!!"),
    "docs-cursor-wrong-shape": Case("GET", "/v1/docs?cursor=WzEsMiwzXQ"),  # [1,2,3]
    "units-cursor-string": Case("GET", "/v1/units?cursor=ImEi"),  # "a"
    "docs-plane-unknown": Case("GET", "/v1/docs?plane=smell"),
    "jobs-state-unknown": Case("GET", "/v1/jobs?state=exploded"),
    "jobs-limit-zero": Case("GET", "/v1/jobs?limit=0"),
    "jobs-cursor-garbage": Case("GET", "/v1/jobs?cursor=!!"),
    "jobs-cursor-wrong-shape": Case("GET", "/v1/jobs?cursor=WzEsMiwzXQ"),  # [1,2,3]
    "jobs-cursor-int64-overflow": Case(
        "GET",
        "/v1/jobs?cursor=WzkyMjMzNzIwMzY4NTQ3NzU4MDgsICJqIl0",  # [2**63, "j"]
    ),
    "docs-from-garbage": Case("GET", "/v1/docs?from=2020-13-45"),
    "usage-to-garbage": Case("GET", "/v1/usage?to=soon"),
    "patch-groups-string": Case(
        "PATCH", "/v1/docs/q4-forecast?scope=acme/alpha", json={"acl_groups": "g"}
    ),
    "patch-groups-numbers": Case(
        "PATCH", "/v1/docs/q4-forecast?scope=acme/alpha", json={"acl_groups": [1]}
    ),
    "patch-extra-field": Case(
        "PATCH", "/v1/docs/q4-forecast?scope=acme/alpha", json={"acl_groups": ["g"], "owner": "x"}
    ),
    "patch-empty-body": Case("PATCH", "/v1/docs/q4-forecast?scope=acme/alpha", content=b""),
    "patch-too-many-groups": Case(
        "PATCH",
        "/v1/docs/q4-forecast?scope=acme/alpha",
        json={"acl_groups": [f"g{i}" for i in range(65)]},
    ),
    "put-doc-mismatched-id": Case(
        "PUT", "/v1/docs/q4-forecast", json={"units": [{"text": "x", "doc_id": "other"}]}
    ),
    "put-doc-extra": Case(
        "PUT", "/v1/docs/q4-forecast", json={"units": [{"text": "x"}], "mode": "append"}
    ),
    "admin-perm-unknown": Case(
        "POST",
        "/v1/admin/principals",
        json={"name": "eve", "perms": ["root"], "tier": "pro", "scopes": [SCOPE]},
        status=403,
        code="privilege_escalation",  # a perm alice does not hold, whatever its name
    ),
    "admin-tier-unknown": Case(
        "POST",
        "/v1/admin/principals",
        json={"name": "eve", "perms": ["read"], "tier": "gold", "scopes": [SCOPE]},
        status=403,
        code="privilege_escalation",  # checked against alice's own tier first
    ),
    "admin-scope-invalid": Case(
        "POST",
        "/v1/admin/principals",
        json={"name": "eve", "perms": ["read"], "tier": "pro", "scopes": ["ACME"]},
    ),
    "admin-escalate-scope": Case(
        "POST",
        "/v1/admin/principals",
        json={"name": "eve", "perms": ["read"], "tier": "pro", "scopes": ["acme/beta"]},
        status=403,
        code="forbidden_scope",
    ),
    "admin-escalate-tier": Case(
        "POST",
        "/v1/admin/principals",
        json={"name": "eve", "perms": ["read"], "tier": "enterprise", "scopes": [SCOPE]},
        status=403,
        code="privilege_escalation",
    ),
    "rotate-overlap-negative": Case(
        "POST", "/v1/admin/keys/k_nothing/rotate", json={"overlap_s": -1}
    ),
    # Found by these tests (each was a 500 or a silent coercion before the fix).
    "units-cursor-int64-overflow": Case(
        "GET", "/v1/units?cursor=OTIyMzM3MjAzNjg1NDc3NTgwOA"
    ),  # 2**63
    "admin-groups-mixed-types": Case(
        "POST", "/v1/admin/principals", json=ADMIN | {"groups": [1, "zz"]}
    ),
    "admin-groups-nested": Case(
        "POST", "/v1/admin/principals", json=ADMIN | {"groups": [["eng-backend"]]}
    ),
    "admin-groups-string": Case(
        "POST", "/v1/admin/principals", json=ADMIN | {"groups": "eng-backend"}
    ),
    "admin-perms-null": Case("POST", "/v1/admin/principals", json=ADMIN | {"perms": [None, "x"]}),
    "admin-perms-nested": Case("POST", "/v1/admin/principals", json=ADMIN | {"perms": [["read"]]}),
    "admin-scopes-object": Case(
        "POST", "/v1/admin/principals", json=ADMIN | {"scopes": {"acme/alpha": 1}}
    ),
    "admin-quota-overflow": Case("POST", "/v1/admin/principals", json=ADMIN | {"doc_quota": 2**63}),
    "admin-quota-bool": Case("POST", "/v1/admin/principals", json=ADMIN | {"doc_quota": True}),
    "admin-expires-overflow": Case(
        "POST", "/v1/admin/principals", json=ADMIN | {"expires_at": 2**63}
    ),
    "admin-expires-negative": Case("POST", "/v1/admin/principals", json=ADMIN | {"expires_at": -1}),
    "admin-too-many-scopes": Case(
        "POST",
        "/v1/admin/principals",
        json=ADMIN | {"scopes": [f"acme/alpha/s{i}" for i in range(257)]},
    ),
    "admin-patch-scopes-empty": Case("PATCH", "/v1/admin/principals/bob", json={"scopes": []}),
    "admin-patch-perms-mixed": Case("PATCH", "/v1/admin/principals/bob", json={"perms": [2, "x"]}),
    "admin-patch-groups-mixed": Case(
        "PATCH", "/v1/admin/principals/bob", json={"groups": [1, "zz"]}
    ),
    "admin-patch-quota-negative": Case("PATCH", "/v1/admin/principals/bob", json={"doc_quota": -1}),
    "admin-patch-disabled-string": Case(
        "PATCH", "/v1/admin/principals/bob", json={"disabled": "yes"}
    ),
    "key-expires-overflow": Case(
        "POST", "/v1/admin/principals/bob/keys", json={"expires_at": 2**63}
    ),
    "key-expires-negative": Case("POST", "/v1/admin/principals/bob/keys", json={"expires_at": -1}),
    "rotate-overlap-overflow": Case(
        "POST", "/v1/admin/keys/k_nothing/rotate", json={"overlap_s": 2**63}
    ),
    # Permission and scope on writes.
    "ingest-read-only": Case("POST", ING, json=unit(), headers=BOB, status=403, code="forbidden"),
    "ingest-header-outside": Case(
        "POST",
        ING,
        json=unit(),
        headers={**ALICE, "X-Aegis-Scope": "acme/beta"},
        status=403,
        code="forbidden_scope",
    ),
    "ingest-free-tier-plane": Case(
        "POST",
        ING,
        json={"units": [{"text": "x", "modality": "utterance"}]},
        headers=CAROL,
        status=402,
        code="upgrade_required",
    ),
    "answer-free-tier": Case(
        "POST", "/v1/answer", json={"q": "x"}, headers=CAROL, status=402, code="upgrade_required"
    ),
    "delete-doc-invisible": Case("DELETE", "/v1/docs/beta-launch", status=404, code="not_found"),
    "delete-unit-unknown": Case(
        "DELETE", "/v1/units/0190f1a4-0000-7000-8000-000000000000", status=404, code="not_found"
    ),
}

# Forged, truncated, wrong-prefix, revoked and expired keys, on a write and on a read.
BAD_AUTH = {
    "none": None,
    "scheme-only": "Bearer",
    "scheme-space": "Bearer ",
    "basic": "Basic YWxpY2U6eA==",
    "lowercase-scheme": "bearer aegis_sk_alice",
    "truncated": "Bearer aegis_sk_alic",
    "extended": "Bearer aegis_sk_alice2",
    "upper-case": "Bearer AEGIS_SK_ALICE",
    "wrong-prefix": "Bearer sk_live_alice",
    "prefix-only": "Bearer aegis_sk_",
    "over-long": "Bearer aegis_sk_" + "a" * 300,
    "sql": "Bearer ' OR 1=1 --",
    "revoked": "revoked",
    "expired": "expired",
    "latin1-bytes": b"Bearer aegis_sk_\xe9lice",
}
for name, value in BAD_AUTH.items():
    for route, method, body in (("ingest", "POST", unit()), ("docs", "GET", None)):
        CASES[f"auth-{name}-{route}"] = Case(
            method,
            ING if route == "ingest" else "/v1/docs",
            json=body,
            headers={} if value is None else {"Authorization": value},
            status=401,
            code="unauthorized",
        )


# -- FTS5 syntax and SQL fragments in every string field ---------------------------------------
PAYLOADS = {
    "quote": '"',
    "near": "NEAR(a b",
    "star": "a*",
    "caret": "^a",
    "column": "text:a",
    "acl-column": "acl:x OR 1",
    "or-1-1": "' OR 1=1 --",
    "drop": "x'; DROP TABLE units; --",
    "paren": '") OR ("',
    "like": "%_\\",
}

# (request builder, outcome) for each string field; outcome is "reject" (with status and code),
# "unit" (per-Unit 422), "read" (a 200 that changes nothing) or "write" (stored verbatim).
FIELDS: dict[str, tuple[Any, str]] = {
    # Reads.
    "search.q": (lambda s: Case("POST", SEARCH, json={"q": s}), "read"),
    "search.filters.doc_id": (
        lambda s: Case("POST", SEARCH, json={"q": "failover", "filters": {"doc_id": s}}),
        "exact:doc_id",
    ),
    "search.filters.modality": (
        lambda s: Case("POST", SEARCH, json={"q": "failover", "filters": {"modality": s}}),
        "exact:modality",
    ),
    "search.filters.acl.owner": (
        lambda s: Case("POST", SEARCH, json={"q": "failover", "filters": {"acl": {"owner": s}}}),
        "exact:acl_owner",
    ),
    "search.filters.acl.groups": (
        lambda s: Case("POST", SEARCH, json={"q": "failover", "filters": {"acl": {"groups": [s]}}}),
        "exact:acl_groups",
    ),
    "answer.q": (lambda s: Case("POST", "/v1/answer", json={"q": s}), "read"),
    "search.scope-query": (
        lambda s: Case("POST", SEARCH + "?scope=" + quote(s), json={"q": "x"}),
        "reject",
    ),
    "search.scope-header": (
        lambda s: Case("POST", SEARCH, json={"q": "x"}, headers={**ALICE, "X-Aegis-Scope": s}),
        "reject",
    ),
    "units.doc_id": (lambda s: Case("GET", "/v1/units?doc_id=" + quote(s)), "exact:doc_id"),
    "units.modality": (lambda s: Case("GET", "/v1/units?modality=" + quote(s)), "exact:modality"),
    "docs.cursor": (lambda s: Case("GET", "/v1/docs?cursor=" + quote(s)), "reject"),
    "docs.plane": (lambda s: Case("GET", "/v1/docs?plane=" + quote(s)), "reject"),
    "jobs.state": (lambda s: Case("GET", "/v1/jobs?state=" + quote(s)), "reject"),
    "jobs.cursor": (lambda s: Case("GET", "/v1/jobs?cursor=" + quote(s)), "reject"),
    "usage.from": (lambda s: Case("GET", "/v1/usage?from=" + quote(s)), "reject"),
    "unit.get": (
        lambda s: Case("GET", "/v1/units/" + quote(s, safe=""), status=404, code="not_found"),
        "reject",
    ),
    "unit.delete": (
        lambda s: Case("DELETE", "/v1/units/" + quote(s, safe=""), status=404, code="not_found"),
        "reject",
    ),
    "object.get": (
        lambda s: Case(
            "GET", f"/v1/objects/{SCOPE}/" + quote(s, safe=""), status=404, code="not_found"
        ),
        "reject",
    ),
    "job.get": (
        lambda s: Case("GET", "/v1/jobs/" + quote(s, safe=""), status=404, code="not_found"),
        "reject",
    ),
    "doc.delete": (
        lambda s: Case("DELETE", "/v1/docs/" + quote(s, safe=""), status=404, code="not_found"),
        "reject",
    ),
    "doc.patch-id": (
        lambda s: Case(
            "PATCH",
            "/v1/docs/" + quote(s, safe=""),
            json={"acl_groups": ["g"]},
            status=404,
            code="not_found",
        ),
        "reject",
    ),
    "admin.get-principal": (
        lambda s: Case(
            "GET", "/v1/admin/principals/" + quote(s, safe=""), status=404, code="not_found"
        ),
        "reject",
    ),
    # Writes that must be refused.
    "ingest.scope": (lambda s: Case("POST", ING, json=unit(scope=s), **U422), "reject"),
    "ingest.modality": (lambda s: Case("POST", ING, json=unit(modality=s), **U422), "reject"),
    "ingest.plane": (lambda s: Case("POST", ING, json=unit(plane=s), **U422), "reject"),
    "ingest.captured_at": (lambda s: Case("POST", ING, json=unit(captured_at=s), **U422), "reject"),
    "ingest.locator-kind": (
        lambda s: Case("POST", ING, json=unit(locator={"kind": s}), **U422),
        "reject",
    ),
    "ingest.mode": (lambda s: Case("POST", ING, json={**unit(), "mode": s}), "reject"),
    "ingest.header-scope": (
        lambda s: Case("POST", ING, json=unit(), headers={**ALICE, "X-Aegis-Scope": s}),
        "reject",
    ),
    "ingest.object-source": (
        lambda s: Case(
            "POST",
            ING,
            json={"units": [{"source_uri": s, "mime": "text/plain"}]},
            **{**U422, "unit_error": "not_found"},
        ),
        "reject",
    ),
    "object.put-key": (
        lambda s: Case(
            "PUT",
            f"/v1/objects/{SCOPE}/" + quote(s, safe=""),
            content=b"x",
            headers={**ALICE, "Content-Type": "text/plain"},
        ),
        "reject",
    ),
    "object.put-content-type": (
        lambda s: Case(
            "PUT", f"/v1/objects/{SCOPE}/ct.txt", content=b"x", headers={**ALICE, "Content-Type": s}
        ),
        "reject",
    ),
    "admin.scopes": (
        lambda s: Case(
            "POST",
            "/v1/admin/principals",
            json={"name": "eve", "perms": ["read"], "tier": "pro", "scopes": [s]},
        ),
        "reject",
    ),
    "admin.perms": (
        lambda s: Case(
            "POST",
            "/v1/admin/principals",
            json={"name": "eve", "perms": [s], "tier": "pro", "scopes": [SCOPE]},
            status=403,
            code="privilege_escalation",
        ),
        "reject",
    ),
    # Writes where any string is data: stored verbatim.
    "ingest.text": (lambda s: Case("POST", ING, json=unit(text=f"Verbatim {s} end")), "write:text"),
    "ingest.doc_id": (lambda s: Case("POST", ING, json=unit(doc_id=s)), "write:doc_id"),
    "ingest.source_uri": (lambda s: Case("POST", ING, json=unit(source_uri=s)), "write:source_uri"),
    "ingest.mime": (lambda s: Case("POST", ING, json=unit(mime=s)), "write:mime"),
    "ingest.acl_owner": (lambda s: Case("POST", ING, json=unit(acl_owner=s)), "write:acl_owner"),
    "ingest.acl_groups": (
        lambda s: Case("POST", ING, json=unit(acl_groups=[s]), headers=GROUPER),
        "write:acl_groups",
    ),
    # Other stored strings: object groups, a document's new groups, a principal's name.
    "object.put-acl-groups": (
        lambda s: Case(
            "PUT",
            f"/v1/objects/{SCOPE}/grp-" + str(abs(hash(s)) % 10**8) + ".txt?acl_groups=" + quote(s),
            content=b"group payload",
            headers={**GROUPER, "Content-Type": "text/plain"},  # a member of the odd groups
            status=201,
        ),
        "stored:object",
    ),
    "doc.patch-groups": (
        lambda s: Case(
            "PATCH",
            "/v1/docs/api-style?scope=acme/alpha",
            json={"acl_groups": [s, "eng-backend"]},
            headers=GROUPER,
        ),
        "stored:patch",
    ),
    "admin.name": (
        lambda s: Case(
            "POST",
            "/v1/admin/principals",
            json={**ADMIN, "name": "n-" + s},
            status=201,
        ),
        "stored:principal",
    ),
    "admin.groups": (
        lambda s: Case(
            "POST",
            "/v1/admin/principals",
            json={**ADMIN, "name": "g-eve", "groups": [s]},
            status=403,
            code="privilege_escalation",  # a group alice is not in
        ),
        "reject",
    ),
}


MATRIX = [(f, p) for f in sorted(FIELDS) for p in sorted(PAYLOADS)]
