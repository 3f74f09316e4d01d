"""Generated worlds and the independent, set-based reference of who may read what.

Nothing here calls the server's own checks: scopes are split into segment lists, ACLs are Python
sets, and the scope grammar is re-stated from D-1. Every Unit, object and job carries a
unique secret marker (in its text, doc_id, source_uri or key), so a leak in any text field of
any response is found by substring.
"""

from __future__ import annotations

import io
import re
import string
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

# Segment look-alikes, all valid: `_` is LIKE's wildcard, `.` and `-` sort before `/`, `0` is
# the byte right after `/` (the upper bound of the range test), `alphabet` extends `alpha`.
SEGS = ["acme", "alpha", "alphabet", "al_ha", "alpha.b", "alpha-b", "acme0", "b"]
GROUPS = ["g1", "g2", "G1", "g1x"]  # case and prefix look-alikes are different groups
READERS = ["p0", "p1", "p2"]
OWNERS = [*READERS, "P0", "p0x"]  # look-alike owners that are nobody
CREATORS = ["operator", *READERS]
TOPICS = ["storage", "billing", "search", "latency", "audit", "quotas", "tiers", "keys"]
QUERIES = ["shared report topic", "billing figures", "latency of search", "audit keys"]
MARKER = re.compile(r"sec[uoj]\d{3}[0-9a-f]{6}")


def pool_text(topic: int, marker: str) -> str:
    t = TOPICS[topic]
    return f"Shared report {marker} says the {t} figures rose in March. The {t} team agreed."


# -- the reference ------------------------------------------------------------------------
_FIRST = set(string.ascii_lowercase + string.digits)
_REST = _FIRST | set("._-")


def ref_valid_scope(s: str) -> bool:
    parts = s.split("/")
    if not 1 <= len(parts) <= 8:
        return False
    for p in parts:
        if p in ("", ".", "..") or len(p) > 63 or p[0] not in _FIRST:
            return False
        if any(ch not in _REST for ch in p):
            return False
    return True


def ref_inside(inner: str, outer: str) -> bool:
    a, b = inner.split("/"), outer.split("/")
    return a[: len(b)] == b


def ref_effective(request: str, grants: set[str]) -> set[str] | None:
    if any(ref_inside(request, g) for g in grants):
        return {request}
    inner = {g for g in grants if ref_inside(g, request)}
    return {g for g in inner if not any(o != g and ref_inside(g, o) for o in inner)} or None


def acl_ok(owner: str, groups: set[str] | list[str], name: str, pgroups: set[str]) -> bool:
    return owner == name or bool(set(groups) & pgroups)


def may_destroy(u: dict[str, Any], p: P) -> bool:
    """Delete, replace or re-permission: one's own Units within one's grants, with or without
    read; anyone else's only when readable (the ACL and the read permission)."""
    if not any(ref_inside(u["scope"], g) for g in p.grants):
        return False
    return u["owner"] == p.name or (p.reads and bool(set(u["groups"]) & p.groups))


@dataclass
class P:
    """A reader principal as generated."""

    name: str
    grants: set[str]
    groups: set[str]
    perms: set[str]
    tier: str

    @property
    def reads(self) -> bool:
        return "read" in self.perms


@dataclass
class World:
    principals: list[P]
    units: dict[str, dict[str, Any]] = field(default_factory=dict)  # unit_id -> spec
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> spec
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # job_id -> spec
    requests: list[dict[str, Any]] = field(default_factory=list)
    doc_creator: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def unit_readable(self, u: dict[str, Any], p: P, scopes: set[str]) -> bool:
        in_scope = any(ref_inside(u["scope"], e) for e in scopes)
        return in_scope and acl_ok(u["owner"], u["groups"], p.name, p.groups)

    def object_readable(self, key: str, p: P) -> bool:
        o = self.objects[key]
        own = any(ref_inside(o["scope"], g) for g in p.grants) and acl_ok(
            o["owner"], o["groups"], p.name, p.groups
        )
        via = any(
            u.get("object") == key and self.unit_readable(u, p, p.grants)
            for u in self.units.values()
        )
        return p.reads and (own or via)

    def job_readable(self, j: dict[str, Any], p: P) -> bool:
        # The submitter may follow its own work; everyone else needs the Units' ACL.
        in_grants = any(ref_inside(j["scope"], g) for g in p.grants)
        mine = j["creator"] == p.name or acl_ok(j["owner"], j["groups"], p.name, p.groups)
        return p.reads and in_grants and mine

    def markers_of_unit(self, u: dict[str, Any]) -> set[str]:
        return set(MARKER.findall(u["text"] + u["doc_id"] + u["source_uri"]))

    def all_markers(self) -> set[str]:
        out: set[str] = set()
        for u in self.units.values():
            out |= self.markers_of_unit(u)
        out |= {o["marker"] for o in self.objects.values()}
        out |= {j["marker"] for j in self.jobs.values()}
        return out


# -- generated worlds ----------------------------------------------------------------------
scope_st = st.lists(st.sampled_from(SEGS), min_size=1, max_size=3).map("/".join)


def valid_variants(s: str) -> list[str]:
    """Valid look-alikes of ``s``: itself, child, parent, siblings that share a prefix."""
    parts = s.split("/")
    last = parts[-1]
    out = [s, s + "/alpha"]
    if len(parts) > 1:
        out.append("/".join(parts[:-1]))
    for alt in (last + "0", last + "-x", last + ".b", last + "bet", "_" + last[1:]):
        out.append("/".join([*parts[:-1], alt]))
    return [v for v in out if ref_valid_scope(v)]


def invalid_variants(s: str) -> list[str]:
    """Request scopes that look like ``s`` but break the grammar: each must be a 422."""
    return [
        s + "/",
        "/" + s,
        s.upper(),
        s.replace("a", "\u0430", 1),  # Cyrillic a
        s + "/..",
        s + "/./x",
        s.replace("/", "//") if "/" in s else s + "//x",
        s + "/%2e%2e",
        s.replace("/", "\\") if "/" in s else "\\" + s,
        " " + s,
        s + "\u2215x",  # division slash
        s.replace("a", "\uff41", 1),  # fullwidth a
    ]


perm_st = st.sampled_from(
    [{"read"}, {"read"}, {"read", "write"}, {"read", "admin"}, {"write"}, set()]
)


def rarely(strategy: Any) -> Any:
    """None three times out of four: filters narrow the readable set, so keep most unfiltered."""
    return st.one_of(st.none(), st.none(), st.none(), strategy)


@st.composite
def worlds(draw: Any) -> dict[str, Any]:
    base = draw(st.lists(scope_st, min_size=1, max_size=3, unique=True))
    near = sorted({v for b in base for v in valid_variants(b)})
    any_scope = st.one_of(st.sampled_from(near), scope_st)
    bad_scope = st.sampled_from(sorted({v for b in base for v in invalid_variants(b)}))
    principals = [
        {
            "grants": draw(st.sets(any_scope, min_size=1, max_size=3)),
            "groups": draw(st.sets(st.sampled_from(GROUPS), max_size=2)),
            "perms": draw(perm_st),
            "tier": draw(st.sampled_from(["free", "pro", "enterprise"])),
        }
        for _ in READERS
    ]
    twins = draw(st.booleans())
    if twins:
        # Twins: same grants, groups, perms and tier; only the principal id tells their
        # owner-only Units apart (D-28, a groups-only cache key).
        principals[1] = dict(principals[0])
    grants = sorted({g for p in principals for g in p["grants"]})
    # Stored things sit in, under, beside and around the grants.
    where = st.one_of(
        st.sampled_from(near),
        st.sampled_from(grants),
        st.sampled_from(sorted({v for g in grants for v in valid_variants(g)})),
        scope_st,
    )
    acl = {
        "scope": where,
        "owner": st.sampled_from(OWNERS),
        "groups": st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
    }
    topic = st.integers(0, len(TOPICS) - 1)
    objects = draw(st.lists(st.fixed_dictionaries({**acl, "topic": topic}), max_size=3))
    units = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    **acl,
                    "creator": st.sampled_from(CREATORS),
                    "topic": topic,
                    # Some Units are derived from a stored text object (D-47).
                    "object": st.none() | st.integers(0, 2),
                    # Some share one document across scopes and ACLs (listings aggregate it).
                    "shared": st.booleans(),
                }
            ),
            min_size=1,
            max_size=8,
        )
    )
    if twins:  # and an owner-only Unit of one twin inside their shared grants
        units.append(
            {
                "scope": draw(st.sampled_from(sorted(principals[0]["grants"]))),
                "owner": "p0",
                "groups": [],
                "creator": draw(st.sampled_from(CREATORS)),
                "topic": draw(topic),
                "object": None,
                "shared": False,
            }
        )
    media = draw(
        st.lists(st.fixed_dictionaries({**acl, "creator": st.sampled_from(CREATORS)}), max_size=2)
    )
    requests = []
    for _ in range(draw(st.integers(1, 3))):
        who = draw(st.integers(0, len(READERS) - 1))
        own = st.sampled_from(sorted(principals[who]["grants"]))
        requests.append(
            {
                "who": who,
                "scope": draw(st.one_of(own, where, bad_scope)),
                "q": draw(st.sampled_from(QUERIES) | st.integers(0, 7)),
                "mode": draw(st.sampled_from(["hybrid", "hybrid", "dense", "lexical"])),
                "doc_filter": draw(rarely(st.integers(0, 7))),
                "owner_filter": draw(rarely(st.sampled_from(OWNERS))),
                "group_filter": draw(rarely(st.sampled_from(GROUPS))),
                "page": draw(st.sampled_from([2, 100])),
                "via": draw(st.sampled_from(["query", "header"])),
            }
        )
    # After the first round of checks, one document's groups change (an audited re-permission)
    # and every check runs again, the result cache included: nothing stale may be served.
    patch = draw(
        st.none()
        | st.fixed_dictionaries(
            {
                "unit": st.integers(0, 7),
                # Often a plain revocation: only the owner keeps the document.
                "groups": st.just([]) | st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
            }
        )
    )
    salt = draw(st.integers(0, 16**6 - 1))
    return {
        "principals": principals,
        "objects": objects,
        "units": units,
        "media": media,
        "requests": requests,
        "patch": patch,
        "salt": f"{salt:06x}",
    }


def tiny_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


class MemoEmbedder:
    """The real model, memoized per text with the secret markers blanked out, so generated
    cases reuse a small pre-embedded pool (fresh embeddings per case are what makes thousands
    of cases slow, D-59)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id, self.dim, self.max_tokens = inner.model_id, inner.dim, inner.max_tokens
        self.memo: dict[str, np.ndarray] = {}
        self.qmemo: dict[str, np.ndarray] = {}

    @staticmethod
    def _key(t: str) -> str:
        return MARKER.sub("secx", t)

    def embed(self, texts: Any) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = [k for k in dict.fromkeys(keys) if k not in self.memo]
        if missing:
            for k, v in zip(missing, self.inner.embed(missing), strict=True):
                self.memo[k] = v
        return np.stack([self.memo[k] for k in keys]) if keys else self.inner.embed([])

    def embed_query(self, text: str) -> np.ndarray:
        k = self._key(text)
        if k not in self.qmemo:
            self.qmemo[k] = self.inner.embed_query(k)
        return self.qmemo[k]

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return list(self.inner.token_spans(text))
