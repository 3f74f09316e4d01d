"""Named crash points for fault-injection tests, and the registry of every point.

``point("catalog.after_commit")`` SIGKILLs the current process when the environment variable
``SCDB_CRASH_AT`` names that point (optionally ``name:N`` to crash on the N-th hit). Production
never sets it; the crash harness (``bench/crash_points.py``) does, for every point in
``KNOWN_POINTS``, to prove that every acknowledged write survives. With ``SCDB_CRASH_MARK`` set to
a file path, the point's name is written there first, so the harness knows where the process died.

Each point sits between two effects whose order matters (a commit and the index apply, a blob
rename and its catalog row, an audit record and the head). A test keeps the registry and the
``point(...)`` calls in the source in sync.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class FaultPoint:
    name: str
    area: str
    phase: str  # "run": under load; "startup": while opening the data dir; "shutdown": on close
    state: str  # what is (and is not yet) durable when a crash hits here


def _p(name: str, area: str, state: str, phase: str = "run") -> FaultPoint:
    return FaultPoint(name, area, phase, state)


KNOWN_POINTS: tuple[FaultPoint, ...] = (
    # -- index: storage/sqlite/index_sync.py ---------------------------------------------------
    _p("sync.before_apply", "index", "outbox ops read, none applied in memory"),
    _p("sync.after_apply", "index", "ops applied in memory, applied_seq not advanced"),
    _p("sync.after_checkpoint", "index", "index files durable, outbox not yet compacted"),
    _p("sync.after_gc", "index", "outbox rows up to the watermark deleted and committed"),
    _p("sync.replay.before", "index", "checkpoints loaded, outbox tail not replayed", "startup"),
    _p("sync.replay.after", "index", "outbox replayed in memory, not checkpointed", "startup"),
    # -- index: storage/vectors.py ---------------------------------------------------------
    _p("vectors.load.after_restore", "index", "one plane's checkpoint read", "startup"),
    _p("vectors.rebuild.mid", "index", "plane rebuilt from the catalog, not swapped", "startup"),
    _p("vectors.apply.before_remove", "index", "a delete committed, vector still indexed"),
    _p("vectors.apply.after_remove", "index", "vector removed, plane seq not advanced"),
    _p("vectors.apply.before_add", "index", "Units committed, vectors not indexed"),
    _p("vectors.apply.after_add", "index", "vectors indexed, plane seq not advanced"),
    _p("vectors.checkpoint.before_save", "index", "dirty plane, nothing written"),
    _p("vectors.checkpoint.mid_save", "index", "tmp file written, not fsynced"),
    _p("vectors.checkpoint.after_fsync", "index", "tmp file fsynced, not renamed"),
    _p("vectors.checkpoint.after_rename", "index", "new checkpoint in place, old one kept"),
    _p("vectors.checkpoint.before_cleanup", "index", "watermark advanced, old files remain"),
    _p("vectors.compact.before_swap", "index", "tombstone-free copy built, not swapped"),
    _p("vectors.compact.after_swap", "index", "compacted plane live in memory, not saved"),
    # -- index: storage/sqlite/sparse.py (the derived lexical index) ---------------------------
    _p("sparse.apply.before", "index", "outbox ops read for the lexical index, none applied"),
    _p("sparse.apply.after", "index", "postings applied in memory, not saved"),
    _p("sparse.checkpoint.before_segments", "index", "delta flushed in memory, no file written"),
    _p("sparse.checkpoint.mid_save", "index", "segments and state tmp fsynced, not renamed"),
    _p("sparse.checkpoint.after_rename", "index", "new state in place, old files remain"),
    _p("sparse.rebuild.batch", "index", "lexical index half rebuilt from the catalog", "startup"),
    # -- jobs: storage/sqlite/jobs.py ----------------------------------------------------------
    _p("jobs.enqueue.after_insert", "jobs", "job row in the ingest transaction, uncommitted"),
    _p("jobs.claim.after_update", "jobs", "lease written, claim uncommitted"),
    _p("jobs.after_claim", "jobs", "lease committed, nothing derived"),
    _p("jobs.heartbeat.after_update", "jobs", "lease extension uncommitted"),
    _p("jobs.complete.after_update", "jobs", "Units and done-mark in one uncommitted txn"),
    _p("jobs.fail.requeue", "jobs", "transient failure: requeue uncommitted"),
    _p("jobs.fail.final", "jobs", "final failure: failed state uncommitted"),
    _p("jobs.release_quota.after_delete", "jobs", "reserved doc released, uncommitted"),
    _p("jobs.fail.after_commit", "jobs", "failure committed, worker not yet free"),
    # -- jobs: ingest/jobs_runner.py, worker.py --------------------------------------------
    _p("jobs.after_derive", "jobs", "engine output in memory only"),
    _p("jobs.after_embed", "jobs", "derived Units embedded, nothing written"),
    _p("jobs.before_complete", "jobs", "derived Units written, job not marked done"),
    _p("jobs.after_complete", "jobs", "Units and done-mark committed, index not applied"),
    _p("jobs.after_apply", "jobs", "derived Units indexed, heartbeat still running"),
    _p("worker.after_job", "jobs", "external worker finished a job (server tails outbox)"),
    # -- catalog write transactions: storage/sqlite/catalog.py ---------------------------------
    _p("catalog.before_commit", "catalog", "any write transaction, before COMMIT"),
    _p("catalog.after_commit", "catalog", "any write transaction, after COMMIT"),
    # -- ingest batch, doc replace, quota: ingest/pipeline.py ------------------------------
    _p("ingest.quota.after_check", "ingest", "quota checked in the batch txn, nothing written"),
    _p("ingest.write.after_unit", "ingest", "part of a batch inserted, uncommitted"),
    _p("ingest.replace.after_delete", "ingest", "doc replace: old Units deleted, uncommitted"),
    _p("ingest.enqueue.after_reserve", "ingest", "media doc reserved on the quota, uncommitted"),
    _p("ingest.after_commit", "ingest", "batch committed, not applied, not acknowledged"),
    _p("ingest.after_apply", "ingest", "batch committed and indexed, not acknowledged"),
    # -- delete: storage/sqlite/units.py, service.py -------------------------------------------
    _p("units.delete.after_row", "delete", "a Unit row and its outbox remove, uncommitted"),
    _p("delete.after_commit", "delete", "delete committed, vector still indexed"),
    _p("delete.after_apply", "delete", "delete committed and applied, not acknowledged"),
    # -- ACL PATCH: documents.py -----------------------------------------------------------
    _p("acl.after_update", "acl", "new ACL on the Units, uncommitted"),
    _p("acl.after_commit", "acl", "ACL change committed, not acknowledged"),
    # -- audit chain: storage/sqlite/audit.py --------------------------------------------------
    _p("audit.before_append", "audit", "change written in its txn, no audit record yet"),
    _p("audit.after_record", "audit", "chain record inserted, head not updated"),
    _p("audit.after_head", "audit", "record and head written, txn uncommitted"),
    _p("audit.anchor.before_replace", "audit", "signed head in a tmp file", "shutdown"),
    _p("audit.anchor.after_replace", "audit", "signed head anchored outside", "shutdown"),
    # -- objects: storage/sqlite/objects.py, objects_service.py --------------------------------
    _p("objects.blob.after_write", "objects", "blob bytes in a tmp file, not fsynced"),
    _p("objects.blob.after_fsync", "objects", "tmp blob fsynced, not renamed"),
    _p("objects.blob.after_rename", "objects", "blob under its final name, dir not fsynced"),
    _p("objects.put.before_row", "objects", "blob durable, no catalog row"),
    _p("objects.put.after_row", "objects", "catalog row written, uncommitted"),
    _p("objects.put.after_commit", "objects", "object committed, not acknowledged"),
    # -- service shutdown: service.py ------------------------------------------------------
    _p("service.close.after_checkpoint", "service", "final checkpoint written", "shutdown"),
)
AREAS: tuple[str, ...] = tuple(dict.fromkeys(p.area for p in KNOWN_POINTS))
BY_NAME: dict[str, FaultPoint] = {p.name: p for p in KNOWN_POINTS}

_lock = threading.Lock()
_hits: dict[str, int] = {}
POINTS: set[str] = set()  # every point this process has passed


def _target() -> tuple[str, int] | None:
    raw = os.environ.get("SCDB_CRASH_AT")
    if not raw:
        return None
    name, _, nth = raw.partition(":")
    return name, int(nth or 1)


def point(name: str) -> None:
    POINTS.add(name)
    target = _target()
    if target is None or target[0] != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] >= target[1]:
            mark = os.environ.get("SCDB_CRASH_MARK")
            if mark:  # a page-cache write survives SIGKILL; no fsync needed
                with open(mark, "w") as f:
                    f.write(name)
            os.kill(os.getpid(), signal.SIGKILL)
