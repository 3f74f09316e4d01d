"""Building a generated world in a real Service, and one HTTP app re-pointed at each world."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from conftest import make_service
from isolation_checks import STATS, Checker, EchoLLM
from isolation_model import CREATORS, GROUPS, SEGS, P, World, pool_text, ref_inside, tiny_png
from superchargedb import acting
from superchargedb.api.app import create_app
from superchargedb.auth import principals as principals_mod
from superchargedb.errors import NotFoundError
from superchargedb.service import Service
from superchargedb.types import Principal

BUILDER_GROUP = "zz-builder"


def builder(name: str, roots: tuple[str, ...]) -> Principal:
    """Who stores the world: any name, every root and group (set-up, not under test)."""
    return Principal(
        id=f"b_{name}",
        name=name,
        perms=frozenset({"read", "write", "admin"}),
        tier="enterprise",
        scopes=roots,
        active_scope=roots[0],
        groups=frozenset([*GROUPS, BUILDER_GROUP]),
    )


def build(
    tmp: Path,
    spec: dict[str, Any],
    emb: Any,
    llm_url: str,
    *,
    make: Callable[..., Service] = make_service,
    cluster_of: Callable[[str], str] | None = None,
) -> tuple[Service, World]:
    """``make`` opens the service (the suite's backend by default); with ``cluster_of`` (a
    scope's cluster: tenants over several, D-277) each builder write is one cluster's."""
    svc = make(
        tmp,
        emb,
        job_workers=0,  # jobs stay queued: their rows are what GET /v1/jobs reads
        answer_providers="openai",
        openai_base_url=llm_url,
    )
    salt = spec["salt"]
    every = [x["scope"] for k in ("objects", "units", "media") for x in spec[k]]
    roots = tuple(sorted({s.split("/")[0] for s in every} | {SEGS[0]}))
    ps = [
        P(f"p{i}", set(p["grants"]), set(p["groups"]), set(p["perms"]), p["tier"])
        for i, p in enumerate(spec["principals"])
    ]
    with svc.auth_store.write() as tx:
        for p in ps:
            row = principals_mod.create_principal(
                tx.principals,
                p.name,
                perms=sorted(p.perms),
                tier=p.tier,
                scopes=sorted(p.grants),
                groups=sorted(p.groups),
            )
            principals_mod.add_key(tx.principals, row.id, f"aegis_sk_{p.name}")
    world = World(principals=ps)
    text_keys: list[str] = []
    for j, o in enumerate(spec["objects"]):
        m = f"seco{j:03d}{salt}"
        key = f"{o['scope']}/{m}.txt"
        body = pool_text(o["topic"], m).encode()
        with acting.acting_for(_roots_on(roots, _on(cluster_of, o["scope"]), cluster_of)):
            _put(svc, builder(o["owner"], roots), o, key, body, "text/plain", world, m)
        text_keys.append(key)
    by_creator: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {c: [] for c in CREATORS}
    for i, u in enumerate(spec["units"]):
        m = f"secu{i:03d}{salt}"
        doc = f"doc-shared{salt}" if u["shared"] else f"doc-{m}"
        raw: dict[str, Any] = {
            "scope": u["scope"],
            "doc_id": doc,
            "acl_owner": u["owner"],
            "acl_groups": u["groups"],
        }
        ref = {"scope": u["scope"], "owner": u["owner"], "groups": u["groups"], "doc_id": doc}
        ref["creator"] = u["creator"]
        if u["object"] is not None and u["object"] < len(text_keys):
            key = text_keys[u["object"]]
            raw |= {"source_uri": f"{key}#{m}", "mime": "text/plain"}
            ref |= {"object": key, "source_uri": f"{key}#{m}", "text": world.objects[key]["text"]}
        else:
            raw["text"] = pool_text(u["topic"], m)
            ref |= {"source_uri": f"{u['scope']}/{doc}", "text": raw["text"]}
        by_creator[u["creator"]].append((raw, ref))
    png = tiny_png()
    for k, md in enumerate(spec["media"]):
        mo = f"seco{len(spec['objects']) + k:03d}{salt}"
        key = f"{md['scope']}/{mo}.png"
        o = {**md, "owner": md["creator"]}
        with acting.acting_for(_roots_on(roots, _on(cluster_of, md["scope"]), cluster_of)):
            _put(svc, builder(md["creator"], roots), o, key, png, "image/png", world, mo)
        mj = f"secj{k:03d}{salt}"
        raw = {
            "scope": md["scope"],
            "doc_id": f"doc-{mj}",
            "acl_owner": md["owner"],
            "acl_groups": md["groups"],
            "source_uri": key,
            "mime": "image/png",
        }
        by_creator[md["creator"]].append((raw, {**md, "marker": mj, "doc_id": f"doc-{mj}"}))
    for creator, all_items in by_creator.items():
        # One ingest per cluster (one cluster's write each), acting for its scopes as the
        # gate would for a key; with one database, one ingest.
        batches: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        for item in all_items:
            batches.setdefault(_on(cluster_of, item[0]["scope"]), []).append(item)
        for cluster, items in batches.items():
            with acting.acting_for(_roots_on(roots, cluster, cluster_of)):
                res = svc.ingest(
                    builder(creator, roots), {"units": [r for r, _ in items], "mode": "append"}
                )
            _record(world, items, res)
    world.requests = list(spec["requests"])  # probes are added per check
    # A document is charged to its first creator (ingest runs creator by creator, in order).
    for c in CREATORS:
        for _, ref in by_creator[c]:
            world.doc_creator.setdefault((ref["scope"], ref["doc_id"], ref["owner"]), c)
    return svc, world


def _roots_on(
    roots: tuple[str, ...], cluster: str, cluster_of: Callable[[str], str] | None
) -> list[str]:
    """What the gate would act for with a builder's key on one cluster: its roots there."""
    return [r for r in roots if cluster_of is None or cluster_of(r) == cluster]


def _on(cluster_of: Callable[[str], str] | None, scope: str) -> str:
    return cluster_of(scope) if cluster_of else ""


def _record(
    world: World, items: list[tuple[dict[str, Any], dict[str, Any]]], res: dict[str, Any]
) -> None:
    for (_, ref), r in zip(items, res["results"], strict=True):
        assert r["ok"], r
        if "job_id" in r:
            world.jobs[r["job_id"]] = ref
        else:
            world.units[r["unit_id"]] = ref


def patch_target(world: World, patch: dict[str, Any]) -> dict[str, Any]:
    """The Unit whose document is re-permissioned after the first round."""
    order = list(world.units.values())
    return order[patch["unit"] % len(order)]


def add_probes(world: World, patch: dict[str, Any]) -> None:
    """Before the first round: every reader of the patch target asks for it by its marker in a
    grant that covers it, so the round after the re-permission meets a cached entry that held
    the document (random requests rarely did: the stale-cache mutation went unseen)."""
    target = patch_target(world, patch)
    q = list(world.units.values()).index(target)
    for i, p in enumerate(world.principals):
        grants = sorted(g for g in p.grants if ref_inside(target["scope"], g))
        if p.reads and grants and world.unit_readable(target, p, p.grants):
            world.requests.append(
                {
                    "who": i,
                    "scope": grants[0],
                    "q": q,
                    "mode": "hybrid",
                    "doc_filter": None,
                    "owner_filter": None,
                    "group_filter": None,
                    "page": 100,
                    "via": "query",
                }
            )


def repermission(svc: Service, world: World, patch: dict[str, Any]) -> None:
    """PATCH one document's groups through the service, as the operator would, and apply the
    same change to the reference: the Units of that doc at or under the target's scope that the
    operator can see (it is an admin, so it may change any of them)."""
    order = list(world.units.values())
    target = patch_target(world, patch)
    roots = tuple(sorted({u["scope"].split("/")[0] for u in order}))
    op = builder("operator", roots)
    hit = [
        u
        for u in order
        if u["doc_id"] == target["doc_id"]
        and ref_inside(u["scope"], target["scope"])
        and (u["owner"] == op.name or set(u["groups"]) & op.groups)
    ]
    try:
        with acting.acting_for([target["scope"]]):
            svc.patch_doc(
                op, target["doc_id"], {"acl_groups": patch["groups"]}, None, target["scope"]
            )
    except NotFoundError:
        assert not hit, "PATCH found nothing the operator can see"
        return
    for u in hit:
        u["groups"] = sorted(set(patch["groups"]))


def _put(
    svc: Service,
    who: Principal,
    o: dict[str, Any],
    key: str,
    body: bytes,
    ctype: str,
    world: World,
    m: str,
) -> None:
    # The builders' own group lets them derive Units from any object; no reader is in it.
    svc.put_object(who, key, [body], ctype, o["scope"], [*o["groups"], BUILDER_GROUP])
    world.objects[key] = {
        "scope": o["scope"],
        "owner": o["owner"],
        "groups": list(o["groups"]),
        "marker": m,
        "body": body,
        "text": body.decode() if ctype == "text/plain" else "",
    }


class Current:
    """The service the shared app talks to: each world's real Service in turn (building the
    FastAPI app costs more than checking a small world)."""

    def __init__(self) -> None:
        self.target: Service | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


class Harness:
    """One app and one event loop for the module; ASGI calls without TestClient's thread hop."""

    def __init__(self, first: Service) -> None:
        self.current = Current()
        self.current.target = first
        self.app = create_app(self.current)  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()

    def check(
        self,
        svc: Service,
        world: World,
        llm: EchoLLM,
        paths: frozenset[str],
        patch: dict[str, Any] | None = None,
    ) -> None:
        self.current.target = svc

        async def go() -> None:
            transport = httpx.ASGITransport(app=self.app)

            async def count(_: httpx.Request) -> None:
                STATS["requests"] += 1

            hooks = {"request": [count]}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://t", event_hooks=hooks
            ) as c:
                if patch is not None:
                    add_probes(world, patch)
                checker = Checker(c, svc, world, llm, paths)
                await checker.run()
                if patch is not None:
                    repermission(svc, world, patch)
                    STATS["repermissions"] += 1
                    await checker.run(again=True)

        try:
            self.loop.run_until_complete(go())
        finally:
            self.current.target = None
