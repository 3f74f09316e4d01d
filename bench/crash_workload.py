"""Client load for the crash harness, and the model of what the server acknowledged.

Several client threads drive concurrent batch ingest, Unit deletes, document replaces (PUT),
ACL changes (PATCH), object uploads and media ingests (real OCR jobs) against one server until it
dies. Each client works on its own documents, one request at a time, so at most one of its
operations is unacknowledged at the crash. Per document the model keeps every state the server
may legally show after the restart: the acknowledged one, plus the outcome of the operation in
flight. A batch in flight is all-or-nothing across its documents.
"""

from __future__ import annotations

import hashlib
import io
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

ALICE = {"Authorization": "Bearer aegis_sk_alice"}
SCOPE = "acme/alpha/backend"
GROUPS_A = ("eng-backend",)
# PATCH toggles between sharing with alice's group and owner-only: she adds only her own groups.
GROUPS_B: tuple[str, ...] = ()
WORDS = (
    "harbor",
    "lighthouse",
    "caravan",
    "glacier",
    "orchard",
    "subway",
    "violin",
    "volcano",
    "archive",
    "lantern",
    "meadow",
    "canyon",
    "falcon",
    "quarry",
    "ribbon",
    "saddle",
    "tundra",
    "walnut",
    "zephyr",
    "beacon",
    "cobalt",
    "dynamo",
    "ember",
    "fjord",
    "granite",
    "hollow",
    "iris",
    "juniper",
    "kettle",
    "lagoon",
    "marble",
    "nectar",
    "oyster",
    "pepper",
    "quiver",
    "raven",
    "spruce",
    "tulip",
    "umber",
    "velvet",
    "willow",
    "yarrow",
)
BATCH = 3  # Units (one per document) per ingest request

State = tuple[frozenset[str], tuple[str, ...]]  # (texts of the doc's Units, their acl_groups)


@dataclass
class Doc:
    doc_id: str
    states: list[State | None]  # acceptable after the restart; None = the doc is absent
    current: State | None = None  # last acknowledged state
    uids: dict[str, str] = field(default_factory=dict)  # text -> acknowledged unit_id


@dataclass
class Work:
    """What a scenario's clients do (see ``bench/crash_points.py``)."""

    ops: frozenset[str] = frozenset({"delete", "put", "patch", "object"})
    clients: int = 3
    max_iters: int = 400  # per client; the run normally ends when the server dies
    delete_every: int = 2
    media: str = ""  # "", "ocr", "big", "blank": the kind of image each media ingest sends
    media_per_client: int = 2


@dataclass
class Model:
    docs: dict[str, Doc] = field(default_factory=dict)
    unacked_batches: list[list[str]] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # acknowledged deletes and replaced Units
    objects: dict[str, tuple[str, bool]] = field(default_factory=dict)  # key -> (sha, acked)
    jobs: dict[str, str] = field(default_factory=dict)  # acknowledged job_id -> image kind
    media_docs: dict[str, tuple[str, bool]] = field(default_factory=dict)  # doc -> (kind, acked)
    acl_acked: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)  # acknowledged operations by kind
    in_flight: list[str] = field(default_factory=list)  # unacknowledged operations at the crash
    errors: list[str] = field(default_factory=list)  # responses no correct server gives
    lock: threading.Lock = field(default_factory=threading.Lock)


def text_for(token: str, rng: random.Random) -> str:
    return f"{token} " + " ".join(rng.sample(WORDS, 6)) + "."


def image_bytes(kind: str, label: str) -> bytes:
    """A PNG for a real OCR job: a short line, a full page (a job long enough for heartbeats),
    or a blank page (the job fails: nothing to derive)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=44)
    if kind == "big":
        img = Image.new("L", (1700, 1300), 255)
        draw = ImageDraw.Draw(img)
        for k in range(12):
            draw.text((40, 40 + k * 100), f"{label} {WORDS[k].upper()} LINE {k}", 0, font)
    else:
        img = Image.new("L", (900, 160), 255)
        if kind == "ocr":
            ImageDraw.Draw(img).text((30, 50), label, 0, font)
        else:  # blank, but unique bytes so each upload is its own object and job
            img.putpixel((int(hashlib.md5(label.encode()).hexdigest(), 16) % 900, 0), 254)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


class Dead(Exception):
    """The server stopped answering: the operation in flight is unacknowledged."""


class Client:
    def __init__(self, idx: int, url: str, work: Work, model: Model, stop: threading.Event):
        self.idx, self.work, self.model, self.stop = idx, work, model, stop
        self.http = httpx.Client(base_url=url, headers=ALICE, timeout=90)
        self.rng = random.Random(1000 + idx)
        self.live: list[Doc] = []
        self.media_sent = 0

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request; retried while admission control refuses it (nothing was written)."""
        for _ in range(60):
            try:
                r = self.http.request(method, path, **kw)
            except httpx.TransportError as exc:
                raise Dead(str(exc)) from exc
            if r.status_code in (429, 503) and r.headers.get("Retry-After"):
                time.sleep(min(1.0, float(r.headers["Retry-After"])) * self.rng.uniform(0.3, 1))
                continue
            return r
        raise Dead(f"{method} {path}: refused 60 times")

    def unexpected(self, what: str, r: httpx.Response) -> None:
        with self.model.lock:
            self.model.errors.append(f"{what}: {r.status_code} {r.text[:300]}")

    def run(self) -> None:
        try:
            for i in range(self.work.max_iters):
                if self.stop.is_set():
                    return
                self.step(i)
        except Dead:
            return
        finally:
            self.http.close()

    def step(self, i: int) -> None:
        w = self.work
        self.ingest(i)
        if "delete" in w.ops and i % w.delete_every == w.delete_every - 1 and self.live:
            self.delete(self.live[0])
        if "patch" in w.ops and i % 3 == 1 and self.live:
            self.patch(self.rng.choice(self.live))
        if "put" in w.ops and i % 3 == 2 and self.live:
            self.put_doc(self.rng.choice(self.live), i)
        if "object" in w.ops and i % 3 == 0:
            self.put_object(f"{SCOPE}/crash/c{self.idx}-o{i}.bin", self.rng.randbytes(2048))
        if w.media and i % 2 == 0 and self.media_sent < w.media_per_client:
            self.media(i)

    # -- operations ---------------------------------------------------------------------------
    def ingest(self, i: int) -> None:
        docs, units = [], []
        for j in range(BATCH):
            text = text_for(f"k{self.idx}b{i}d{j}v0", self.rng)
            doc = Doc(f"c{self.idx}-b{i}-d{j}", [None])
            docs.append((doc, (frozenset({text}), GROUPS_A), text))
            units.append({"text": text, "doc_id": doc.doc_id, "acl_groups": list(GROUPS_A)})
        with self.model.lock:
            for doc, _, _ in docs:
                self.model.docs[doc.doc_id] = doc
        try:
            r = self.call("POST", "/v1/ingest", json={"units": units})
        except Dead:
            with self.model.lock:
                for doc, new, _ in docs:
                    doc.states = [None, new]
                self.model.unacked_batches.append([d.doc_id for d, _, _ in docs])
                self.model.in_flight.append(f"ingest batch {i} of client {self.idx}")
            raise
        if r.status_code != 200 or not all(x.get("ok") for x in r.json()["results"]):
            return self.unexpected("ingest", r)
        with self.model.lock:
            for (doc, new, text), res in zip(docs, r.json()["results"], strict=True):
                doc.states, doc.current, doc.uids[text] = [new], new, res["unit_id"]
                self.live.append(doc)
            self.model.ops["ingest_units"] += len(docs)

    def _mutate(self, doc: Doc, new: State | None, what: str, method: str, path: str, **kw: Any):
        try:
            r = self.call(method, path, **kw)
        except Dead:
            with self.model.lock:
                doc.states = [doc.current, new]
                self.model.in_flight.append(f"{what} {doc.doc_id}")
            raise
        if r.status_code not in (200, 201):
            self.unexpected(f"{what} {doc.doc_id}", r)
            return None
        with self.model.lock:
            doc.states, doc.current = [new], new
            self.model.ops[what] += 1
        return r

    def delete(self, doc: Doc) -> None:
        assert doc.current is not None
        uid = doc.uids[next(iter(doc.current[0]))]
        self.live.remove(doc)
        if self._mutate(doc, None, "delete", "DELETE", f"/v1/units/{uid}") is not None:
            with self.model.lock:
                self.model.removed.add(uid)

    def patch(self, doc: Doc) -> None:
        assert doc.current is not None
        groups = GROUPS_B if doc.current[1] == GROUPS_A else GROUPS_A
        new = (doc.current[0], groups)
        body = {"acl_groups": list(groups)}
        if self._mutate(doc, new, "patch", "PATCH", f"/v1/docs/{doc.doc_id}", json=body):
            with self.model.lock:
                self.model.acl_acked.append((doc.doc_id, groups))

    def put_doc(self, doc: Doc, i: int) -> None:
        assert doc.current is not None
        old_uid = doc.uids[next(iter(doc.current[0]))]
        text = text_for(f"{doc.doc_id.replace('-', '')}v{i}", self.rng)
        body = {"units": [{"text": text, "acl_groups": list(GROUPS_A)}]}
        new = (frozenset({text}), GROUPS_A)
        r = self._mutate(doc, new, "put", "PUT", f"/v1/docs/{doc.doc_id}", json=body)
        if r is not None:
            with self.model.lock:
                doc.uids[text] = r.json()["results"][0]["unit_id"]
                self.model.removed.add(old_uid)

    def put_object(self, key: str, data: bytes, ctype: str = "application/octet-stream") -> bool:
        sha = hashlib.sha256(data).hexdigest()
        with self.model.lock:
            self.model.objects[key] = (sha, False)
        try:
            r = self.call(
                "PUT", f"/v1/objects/{key}", content=data, headers={"Content-Type": ctype}
            )
        except Dead:
            with self.model.lock:
                self.model.in_flight.append(f"object {key}")
            raise
        if r.status_code != 201 or r.json().get("sha256") != sha:
            self.unexpected(f"object {key}", r)
            return False
        with self.model.lock:
            self.model.objects[key] = (sha, True)
            self.model.ops["object"] += 1
        return True

    def media(self, i: int) -> None:
        self.media_sent += 1
        kind = self.work.media
        label = f"{WORDS[(self.idx * 7 + i) % len(WORDS)].upper()} {4000 + self.idx * 100 + i}"
        key = f"{SCOPE}/crash/c{self.idx}-m{i}.png"
        if not self.put_object(key, image_bytes(kind, label), "image/png"):
            return
        doc_id = f"c{self.idx}-m{i}"
        unit = {"source_uri": key, "mime": "image/png", "modality": "scan", "doc_id": doc_id}
        with self.model.lock:
            self.model.media_docs[doc_id] = (kind, False)
        try:
            r = self.call(
                "POST", "/v1/ingest", json={"units": [{**unit, "acl_groups": ["eng-backend"]}]}
            )
        except Dead:
            with self.model.lock:
                self.model.in_flight.append(f"media ingest {doc_id}")
            raise
        res = r.json().get("results", [{}])[0] if r.status_code == 200 else {}
        if not res.get("ok") or not res.get("job_id"):
            return self.unexpected(f"media ingest {doc_id}", r)
        with self.model.lock:
            self.model.media_docs[doc_id] = (kind, True)
            self.model.jobs[res["job_id"]] = kind
            self.model.ops["media"] += 1


def drive(url: str, work: Work, model: Model, stop: threading.Event) -> list[threading.Thread]:
    """Start the client threads; they end when the server dies, ``stop`` is set, or after
    ``work.max_iters`` iterations each."""
    threads = [
        threading.Thread(target=Client(k, url, work, model, stop).run, daemon=True)
        for k in range(work.clients)
    ]
    for t in threads:
        t.start()
    return threads
