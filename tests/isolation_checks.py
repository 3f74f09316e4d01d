"""The checks of the isolation property, per read path, through the real HTTP app.

For every reader and path: exactly the readable set (the set-based reference in
isolation_model.py), no secret marker of anything else anywhere in the body (hits, citations,
answer text, sentences, dropped[], trace, the prompt the model saw, error messages), and for what
is invisible the very bytes of what does not exist (no existence oracle).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from conftest import stored_unit_ids
from isolation_model import (
    GROUPS,
    MARKER,
    SEGS,
    P,
    World,
    may_destroy,
    ref_effective,
    ref_inside,
    ref_valid_scope,
)
from superchargedb.service import Service

ALL_PATHS = frozenset(
    {"units", "objects", "jobs", "search", "answer", "stream", "docs", "usage", "writes"}
)
STATS: Counter[str] = Counter()


class EchoLLM:
    """An OpenAI-compatible chat server on loopback that answers with every passage it was
    given (cited), plus a sentence citing a passage that does not exist: whatever reaches the
    model comes back in answer.text, sentences or dropped[], and the prompts are kept."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                outer.prompts.append(prompt)
                passages = re.findall(r"^\[(\d+)\] (.*?)\.", prompt, re.M)
                reply = " ".join(f"{t} [{n}]." for n, t in passages)
                reply += f" The moon is made of cheese [{len(passages) + 7}]."
                data = json.dumps(
                    {
                        "model": "echo",
                        "choices": [{"message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def take(self) -> list[str]:
        out, self.prompts = self.prompts, []
        return out


def markers(raw: bytes | str) -> set[str]:
    return set(MARKER.findall(raw if isinstance(raw, str) else raw.decode("utf-8", "replace")))


def no_leak(raw: bytes | str, allowed: set[str], ctx: Any) -> None:
    leaked = markers(raw) - allowed
    assert not leaked, f"LEAK {ctx}: {sorted(leaked)}"
    STATS["checks"] += 1


def is_error(r: Any, status: int, ctx: Any, code: str | None = None) -> None:
    assert r.status_code == status, (ctx, r.status_code, r.text[:300])
    err = r.json()["error"]
    if code is not None:
        assert err["code"] == code, (ctx, err)
    no_leak(r.content, set(), ctx)  # an error names nothing


class Checker:
    def __init__(
        self, c: httpx.AsyncClient, svc: Service, w: World, llm: EchoLLM, paths: frozenset[str]
    ):
        self.c, self.svc, self.w, self.llm, self.paths = c, svc, w, llm, paths
        self.missing: dict[tuple[str, str, str], Any] = {}

    def h(self, p: P) -> dict[str, str]:
        return {"Authorization": f"Bearer aegis_sk_{p.name}"}

    async def same_as_missing(
        self, p: P, method: str, url: str, missing_url: str, ctx: Any, **kw: Any
    ):
        """What is invisible must answer exactly as what does not exist (no oracle)."""
        k = (p.name, method, missing_url)
        if k not in self.missing:
            m = await self.c.request(
                method, missing_url, headers={**self.h(p), **kw.get("hdr", {})}
            )
            self.missing[k] = (m.status_code, m.content)
        r = await self.c.request(method, url, headers={**self.h(p), **kw.get("hdr", {})})
        assert (r.status_code, r.content) == self.missing[k], (ctx, r.status_code, r.text[:300])
        no_leak(r.content, set(), ctx)

    async def run(self, again: bool = False) -> None:
        """Every path; ``again`` after a re-permission: the paths it can change, and the cached
        reads first (an entry from before the change must not be served)."""
        for p in self.w.principals:
            if "units" in self.paths:
                await self.units(p)
            if "objects" in self.paths:
                await self.objects(p)
            if "jobs" in self.paths and not again:
                await self.jobs(p)
            if "docs" in self.paths:
                for rq in self.w.requests:
                    await self.listings(p, rq)
            if "usage" in self.paths and not again:
                await self.usage(p)
            if "writes" in self.paths and not again:
                await self.writes(p)
        await self.reads(("cached", "fresh") if again else ("fresh", "cached"))

    # -- units/:id, preview -----------------------------------------------------------------
    async def units(self, p: P) -> None:
        gone = "/v1/units/0190f1a4-0000-7000-8000-000000000000"  # a well-formed id nobody has
        for uid, u in self.w.units.items():
            ctx = ("unit", p, u)
            r = await self.c.get(f"/v1/units/{uid}", headers=self.h(p))
            visible = self.w.unit_readable(u, p, p.grants)
            if not p.reads:
                is_error(r, 403, ctx, "forbidden")
            elif visible:
                assert r.status_code == 200 and r.json()["unit_id"] == uid, ctx
                no_leak(r.content, self.w.markers_of_unit(u), ctx)
            else:
                await self.same_as_missing(p, "GET", f"/v1/units/{uid}", gone, ctx)
                url = f"/v1/units/{uid}/preview"
                await self.same_as_missing(p, "GET", url, gone + "/preview", ctx)
            if "write" in p.perms and not may_destroy(u, p):
                # A delete is a read of existence too: what the caller may not destroy (not its
                # own, and not readable: the ACL and read) answers as absent, and stays.
                await self.same_as_missing(p, "DELETE", f"/v1/units/{uid}", gone, ctx)
                assert uid in stored_unit_ids(self.svc), (
                    "deleted by a caller who cannot see it",
                    ctx,
                )

    # -- writes that must be refused: delete, PATCH and ingest change nothing ------------------
    def stored(self) -> set[str]:
        return stored_unit_ids(self.svc)

    async def writes(self, p: P) -> None:
        if "write" not in p.perms:
            return
        before = self.stored()
        docs = sorted({u["doc_id"] for u in self.w.units.values()})
        for g in sorted(p.grants):
            for doc in docs:
                ctx = ("writes", p, g, doc)
                units = [u for u in self.w.units.values() if u["doc_id"] == doc]
                units = [u for u in units if ref_inside(u["scope"], g)]
                mine = [u for u in units if may_destroy(u, p)]
                if not mine:  # nothing of it is the caller's to destroy: as a missing doc
                    url, none = f"/v1/docs/{doc}?scope={g}", f"/v1/docs/doc-nobody?scope={g}"
                    await self.same_as_missing(p, "DELETE", url, none, ctx)
                    continue
                patchable = [u for u in mine if u["owner"] == p.name or "admin" in p.perms]
                old = set().union(*(set(u["groups"]) for u in patchable))
                new = sorted(set(GROUPS) - p.groups - old)
                if patchable and new:  # adding a group the caller is not in: 403
                    r = await self.c.patch(
                        f"/v1/docs/{doc}",
                        params={"scope": g},
                        json={"acl_groups": sorted(old | {new[0]})},
                        headers=self.h(p),
                    )
                    is_error(r, 403, ctx, "forbidden_group")
            # Ingest into a group the caller is not in: refused per Unit, nothing stored.
            outside = sorted(set(GROUPS) - p.groups)[0]
            probe = {"text": f"Probe note of {p.name}.", "acl_groups": [outside]}
            r = await self.c.post(
                "/v1/ingest", params={"scope": g}, json={"units": [probe]}, headers=self.h(p)
            )
            assert r.status_code == 200, (p, g, r.status_code, r.text[:300])
            res = r.json()["results"][0]
            assert not res["ok"] and res["error"]["code"] == "forbidden_group", (p, g, res)
            STATS["checks"] += 1
        assert self.stored() == before, ("a refused write changed the Units", p)

    # -- objects: GET, Range, If-None-Match, HEAD, look-alike keys ---------------------------
    async def objects(self, p: P) -> None:
        missing = "/v1/objects/" + SEGS[0] + "/nothing-here.txt"
        pi = self.w.principals.index(p)
        for oi, (key, o) in enumerate(self.w.objects.items()):
            ctx = ("object", p, key, o["scope"], o["owner"], o["groups"])
            url = f"/v1/objects/{key}"
            etag = '"' + hashlib.sha256(o["body"]).hexdigest() + '"'
            # Each (reader, object) pair gets a plain GET and one rotating variant.
            variant = [
                ("GET", {"Range": "bytes=3-9"}),
                ("GET", {"If-None-Match": etag}),
                ("HEAD", {}),
            ][(pi + oi) % 3]
            if not p.reads:
                is_error(await self.c.get(url, headers=self.h(p)), 403, ctx, "forbidden")
            elif self.w.object_readable(key, p):
                got = r = await self.c.get(url, headers=self.h(p))
                assert r.status_code == 200 and r.content == o["body"], ctx
                assert r.headers["etag"] == etag, ctx
                method, hdr = variant
                r = await self.c.request(method, url, headers={**self.h(p), **hdr})
                if "Range" in hdr:
                    assert r.status_code == 206 and r.content == o["body"][3:10], ctx
                elif hdr:
                    assert r.status_code == 304, ctx
                else:  # HEAD: GET's status and headers, no body
                    assert r.status_code == 200 and r.content == b"", ctx
                    per_response = ("date", "x-request-id")
                    assert {k: v for k, v in r.headers.items() if k not in per_response} == {
                        k: v for k, v in got.headers.items() if k not in per_response
                    }, ("HEAD differs from GET", ctx)
                STATS["checks"] += 2
            else:
                await self.same_as_missing(p, "GET", url, missing, ctx)
                method, hdr = variant
                await self.same_as_missing(p, method, url, missing, ctx, hdr=hdr)
            if (pi + oi) % len(self.w.principals):
                continue
            # Look-alikes of a real key reach nothing (and never another key's bytes).
            scope, name = key.rsplit("/", 1)
            for alike in (
                key.upper(),
                f"{scope}/%2E%2E/{scope}/{name}",
                f"{scope}%5C{name}",
                f"{scope}/{name}%00",
                f"{scope}/\u2024{name}",
            ):
                r = await self.c.get(f"/v1/objects/{alike}", headers=self.h(p))
                assert r.status_code in (403, 404), (ctx, alike, r.status_code)
                no_leak(r.content, set(), (ctx, alike))

    # -- jobs/:id --------------------------------------------------------------------------
    async def jobs(self, p: P) -> None:
        for jid, j in self.w.jobs.items():
            ctx = ("job", p, j)
            r = await self.c.get(f"/v1/jobs/{jid}", headers=self.h(p))
            if not p.reads:
                is_error(r, 403, ctx, "forbidden")
            elif self.w.job_readable(j, p):
                assert r.status_code == 200 and r.json()["doc_id"] == j["doc_id"], ctx
                no_leak(r.content, {j["marker"]}, ctx)
            else:
                await self.same_as_missing(
                    p, "GET", f"/v1/jobs/{jid}", "/v1/jobs/j_" + "0" * 32, ctx
                )
        # The listing shows exactly the jobs GET /v1/jobs/{id} shows (two per page: cursors).
        if not p.reads:
            is_error(await self.c.get("/v1/jobs", headers=self.h(p)), 403, ("jobs", p), "forbidden")
            return
        listed = await self.pages(p, "/v1/jobs", {"limit": 2}, "jobs")
        want = {jid for jid, j in self.w.jobs.items() if self.w.job_readable(j, p)}
        assert {j["job_id"] for j in listed} == want, ("jobs listing", p, listed)
        no_leak(json.dumps(listed), {self.w.jobs[k]["marker"] for k in want}, ("jobs", p))

    # -- expectations shared by the scoped reads ------------------------------------------
    def expect(self, p: P, scope: str, endpoint: str) -> tuple[int, set[str] | None]:
        if not ref_valid_scope(scope):
            return 422, None
        if not p.reads:
            return 403, None
        eff = ref_effective(scope, p.grants)
        if eff is None:
            return 403, None
        if endpoint == "answer" and p.tier == "free":
            return 402, None
        return 200, eff

    def readable(self, p: P, eff: set[str], **f: Any) -> dict[str, dict[str, Any]]:
        out = {}
        for uid, u in self.w.units.items():
            if not self.w.unit_readable(u, p, eff):
                continue
            if f.get("doc") is not None and u["doc_id"] != f["doc"]:
                continue
            if f.get("owner") is not None and u["owner"] != f["owner"]:
                continue
            if f.get("group") is not None and f["group"] not in u["groups"]:
                continue
            out[uid] = u
        return out

    def allowed(self, units: dict[str, dict[str, Any]]) -> set[str]:
        return set().union(*(self.w.markers_of_unit(u) for u in units.values()))

    def doc_of(self, idx: int | None) -> str | None:
        if idx is None:
            return None
        order = list(self.w.units.values())
        return str(order[idx % len(order)]["doc_id"])

    # -- docs and units listings -------------------------------------------------------------
    async def pages(
        self, p: P, url: str, params: dict[str, Any], field: str
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        for _ in range(100):
            q = {**params, **({"cursor": cursor} if cursor else {})}
            r = await self.c.get(url, params=q, headers=self.h(p))
            assert r.status_code == 200, (url, q, r.text[:300])
            body = r.json()
            out += body[field]
            self._last = r.content
            cursor = body["next_cursor"]
            if cursor is None:
                return out
        raise AssertionError("listing did not end")

    async def listings(self, p: P, rq: dict[str, Any]) -> None:
        scope = rq["scope"]
        status, eff = self.expect(p, scope, "docs")
        ctx = ("listing", p, rq)
        if status != 200:
            r = await self.c.get("/v1/docs", params={"scope": scope}, headers=self.h(p))
            is_error(r, status, ctx)
            r = await self.c.get("/v1/units", params={"scope": scope}, headers=self.h(p))
            is_error(r, status, ctx)
            return
        assert eff is not None
        want = self.readable(p, eff)
        docs = await self.pages(p, "/v1/docs", {"scope": scope, "limit": rq["page"]}, "docs")
        counts = Counter((u["scope"], u["doc_id"]) for u in want.values())
        got = {(d["scope"], d["doc_id"]): d["units"] for d in docs}
        assert got == dict(counts), (ctx, got, dict(counts))
        no_leak(json.dumps(docs), self.allowed(want), ctx)
        doc = self.doc_of(rq["doc_filter"])
        params: dict[str, Any] = {"scope": scope, "limit": rq["page"]}
        if doc is not None:
            params["doc_id"] = doc
        units = await self.pages(p, "/v1/units", params, "units")
        want_u = self.readable(p, eff, doc=doc)
        assert {u["unit_id"] for u in units} == set(want_u), ctx
        no_leak(json.dumps(units), self.allowed(want_u), ctx)

    # -- usage -------------------------------------------------------------------------------
    async def usage(self, p: P) -> None:
        r = await self.c.get("/v1/usage", headers=self.h(p))
        if not p.reads:
            is_error(r, 403, ("usage", p), "forbidden")
            return
        body = r.json()
        mine = [u for u in self.w.units.values() if u["creator"] == p.name]
        docs = {k for k, c in self.w.doc_creator.items() if c == p.name}
        assert body["units"]["total"] == len(mine), ("usage", p, body)
        assert body["documents"]["used"] == len(docs), ("usage", p, body)
        assert body["text_chars"] == sum(len(u["text"]) for u in mine), ("usage", p, body)
        no_leak(r.content, set(), ("usage", p))

    # -- search, answer, stream, through the cache in both orders -----------------------------
    async def reads(self, orders: tuple[str, ...]) -> None:
        eps = [e for e in ("search", "answer", "stream") if e in self.paths]
        if not eps:
            return
        ps = self.w.principals
        # One pass per order over every request: clearing the cache per request would leave
        # only the last request's entries for the round after a re-permission to find stale.
        for order in orders:
            if order == "fresh":
                self.svc.cache.clear()
            for rq in self.w.requests:
                # The asker, then every other reader (each may be served the asker's cache
                # entry if the key were wrong), then the asker again (a hit of its own).
                i = rq["who"]
                for j in (i, *(k for k in range(len(ps)) if k != i), i):
                    for ep in eps:
                        await self.read(ps[j], rq, ep)

    def body_of(self, rq: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        q = rq["q"]
        qm = None
        if isinstance(q, int):
            target = list(self.w.units.values())[q % len(self.w.units)]
            qm = MARKER.findall(target["text"])[0]
            q = qm
        body: dict[str, Any] = {"q": q, "top_k": 100, "mode": rq["mode"]}
        if rq["mode"] == "lexical" and qm is None:
            body["mode"] = "hybrid"  # lexical matches of pool words have no exact reference
        filters: dict[str, Any] = {}
        if (doc := self.doc_of(rq["doc_filter"])) is not None:
            filters["doc_id"] = doc
        acl: dict[str, Any] = {}
        if rq["owner_filter"] is not None:
            acl["owner"] = rq["owner_filter"]
        if rq["group_filter"] is not None:
            acl["groups"] = [rq["group_filter"]]
        if acl:
            filters["acl"] = acl
        if filters:
            body["filters"] = filters
        return body, qm

    async def read(self, p: P, rq: dict[str, Any], ep: str) -> None:
        body, qm = self.body_of(rq)
        scope = rq["scope"]
        status, eff = self.expect(p, scope, "search" if ep == "search" else "answer")
        ctx = (ep, p, rq, body)
        url = "/v1/search" if ep == "search" else "/v1/answer"
        if ep == "stream":
            body = {**body, "stream": True}
        self.llm.take()
        params, headers = {"scope": scope}, self.h(p)
        # Header or ?scope= (one function decides both); a header carries printable ASCII only.
        if (
            rq["via"] == "header"
            and scope.isascii()
            and scope.isprintable()
            and scope.strip() == scope
        ):
            params, headers = {}, {**headers, "X-Aegis-Scope": scope}
        r = await self.c.post(url, params=params, json=body, headers=headers)
        if status != 200:
            is_error(r, status, ctx)
            assert not self.llm.take(), ctx  # nothing reached the model
            return
        assert eff is not None
        want = self.readable(
            p,
            eff,
            doc=body.get("filters", {}).get("doc_id"),
            owner=rq["owner_filter"],
            group=rq["group_filter"],
        )
        if body["mode"] == "lexical":
            want = {k: u for k, u in want.items() if qm in MARKER.findall(u["text"])}
        allowed = self.allowed(want)
        assert r.status_code == 200, (ctx, r.status_code, r.text[:300])
        no_leak(r.content, allowed, ctx)
        for prompt in self.llm.take():
            # The passages only: the "Question:" line is what the caller sent, and a guessed
            # marker asked as a question is no leak (a false alarm the big run found).
            passages = prompt.split("\n\nQuestion:")[0]
            assert passages != prompt, prompt
            no_leak(passages, allowed, (ctx, "prompt"))
        if ep == "stream":
            events = re.findall(r"event: (\w+)\ndata: (.*)\n\n", r.text)
            assert events and events[-1][0] == "final", (ctx, r.text[:300])
            out = json.loads(events[-1][1])
        else:
            out = r.json()
        assert set(out["context"]["effective_scopes"]) == eff, ctx
        got = {h["unit_id"] for h in out["hits"]}
        assert got == set(want), (ctx, out["trace"]["cache"], got ^ set(want))
        if ep != "search":
            cited = {c["unit_id"] for c in out["answer"]["citations"]}
            assert cited <= set(want), (ctx, cited - set(want))
        STATS[f"reads_{ep}"] += 1
