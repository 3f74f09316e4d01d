"""Long ingests become jobs: the chunk budget of one request (``SCDB_INGEST_MAX_CHUNKS``).

Embedding is the cost of an ingest, and it grows with the text: one writer's few long Units used
to hold an ingest slot for tens of seconds. A request embeds at most ``ingest_max_chunks``
chunks itself; when its batch has more, whole documents, largest first, are set aside until the
rest fits, and each set-aside document becomes one ``embed`` job (answered per Unit as
``status: queued`` with the ``job_id``, as media derivations are). A document is never split
between the request and a job, so ``mode: replace`` keeps its meaning: the job writes all of the
batch's Units of that document in one transaction with the request's mode.

The job runs in the server's job workers (``ingest/jobs_runner.py``): chunk, embed, write.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from ..storage.ids import now_ms, uuid7
from ..storage.protocols import JobSpec
from ..types import Locator, Principal
from .prepare import Prepared

if TYPE_CHECKING:
    from ..storage.protocols import Lease
    from ..storage.protocols_writes import StoreTx

KIND = "embed"
DocKey = tuple[str, str, str]


def doc_key(p: Prepared) -> DocKey:
    return (p.scope, p.doc_id, p.acl_owner)


def split(prepared: list[Prepared], cap: int) -> tuple[list[Prepared], list[list[Prepared]]]:
    """(embedded by the request, documents for jobs). ``prepared`` is chunked where it needs
    embedding (a Unit stored already has no chunks and costs nothing)."""
    groups: dict[DocKey, list[Prepared]] = {}
    for p in prepared:
        groups.setdefault(doc_key(p), []).append(p)
    size = {k: sum(len(p.chunks) for p in g) for k, g in groups.items()}
    total = sum(size.values())
    later: set[DocKey] = set()
    for k in sorted(groups, key=lambda k: -size[k]):
        if total <= cap or size[k] == 0:
            break
        later.add(k)
        total -= size[k]
    now = [p for p in prepared if doc_key(p) not in later]
    return now, [g for k, g in groups.items() if k in later]


def _unit(p: Prepared) -> dict[str, Any]:
    return {
        "index": p.index,
        "modality": p.modality,
        "plane": p.plane,
        "source_uri": p.source_uri,
        "mime": p.mime,
        "locator": p.locator.to_columns() if p.locator else None,
        "acl_groups": p.acl_groups,
        "content_hash": p.content_hash,
        "text": p.text,
        "event_at": p.event_at,
        "object_key": p.object_key,
        "object_sha": p.object_sha,
        "context": p.context,
        "captured_at": p.captured_at,
    }


def prepared_of(job: Lease) -> tuple[list[Prepared], str]:
    """The job's Units, ready to chunk and embed, and the mode to write them with."""
    pl = json.loads(job.payload_json)
    out = []
    for u in pl["units"]:
        out.append(
            Prepared(
                index=u["index"],
                scope=job.scope,
                doc_id=pl["doc_id"],
                modality=u["modality"],
                plane=u["plane"],
                source_uri=u["source_uri"],
                mime=u["mime"],
                locator=Locator.from_row(u["locator"]) if u["locator"] else None,
                acl_owner=job.acl_owner,
                acl_groups=u["acl_groups"],
                content_hash=u["content_hash"],
                text=u["text"],
                event_at=u["event_at"],
                object_key=u["object_key"],
                object_sha=u["object_sha"],
                context=u["context"],
                captured_at=u["captured_at"],
            )
        )
    return out, pl["mode"]


def enqueue(tx: StoreTx, principal: Principal, doc: list[Prepared], mode: str) -> dict[str, Any]:
    """Queue one document's embedding inside the request's transaction (idempotent per the
    document's content and mode); the per-Unit result."""
    first = doc[0]
    digest = hashlib.sha256(f"{KIND}\0{mode}".encode())
    for part in (*doc_key(first), *sorted(p.content_hash for p in doc)):
        digest.update(b"\0" + part.encode())
    dedupe = digest.hexdigest()
    prior = tx.jobs.find(dedupe)
    if prior is not None and prior.state in ("queued", "running"):
        return {"ok": True, "status": "queued", "job_id": prior.job_id}
    payload = {
        "doc_id": first.doc_id,
        "mode": mode,
        "units": [_unit(p) for p in doc],
        "key_id": principal.key_id,
        "key_issuer": principal.key_issuer,
    }
    job_id = tx.jobs.enqueue(
        JobSpec(
            kind=KIND,
            scope=first.scope,
            principal=principal.name,
            acl_owner=first.acl_owner,
            acl_groups=tuple(first.acl_groups),
            dedupe_key=dedupe if prior is None else f"{dedupe}:{uuid7()}",
            payload_json=json.dumps(payload),
        )
    )
    # The document is reserved against the quota now (checked with the batch); a failed job
    # releases it.
    tx.docs.reserve([doc_key(first)], principal.name, now_ms())
    tx.audit.append(
        principal,
        "ingest.queued",
        {"job_id": job_id, "scope": first.scope, "doc_id": first.doc_id, "units": len(doc)},
    )
    return {"ok": True, "status": "queued", "job_id": job_id}
