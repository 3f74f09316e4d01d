"""What the crash harness verifies after the restart.

Online (the restarted server, over HTTP): every document shows one of the states its model allows
(acknowledged writes present, acknowledged deletes and replaces gone, the in-flight batch all or
nothing), every visible Unit is found by the lexical AND the dense leg, objects read back
byte-exact, jobs finish exactly once. Offline (the stopped data dir): jobs vs their Units, the audit
chain covers every change and its head matches the log (``superchargedb audit verify``), and the
doctor's SQLite, FTS5 and catalog-vs-index checks pass.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.common.service import embedded
from bench.crash_workload import ALICE, Model, State


def ro(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def settle_jobs(db: Path, timeout: float) -> int:
    """Wait until no job is queued or running; returns how many still are."""
    deadline = time.monotonic() + timeout
    while True:
        conn = ro(db)
        try:
            n = conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')"
            ).fetchone()[0]
        finally:
            conn.close()
        if n == 0 or time.monotonic() > deadline:
            return int(n)
        time.sleep(0.3)


def _state(units: list[dict[str, Any]]) -> State | None:
    if not units:
        return None
    groups = {tuple(u["acl_groups"]) for u in units}
    acl = groups.pop() if len(groups) == 1 else ("<mixed>",)
    return frozenset(u["text"] for u in units), acl


class Online:
    def __init__(self, url: str, problems: list[str], checked: Counter[str]) -> None:
        self.c = httpx.Client(base_url=url, headers=ALICE, timeout=60)
        self.problems, self.checked = problems, checked

    def close(self) -> None:
        self.c.close()

    def units_of(self, doc_id: str) -> list[dict[str, Any]]:
        r = self.c.get("/v1/units", params={"doc_id": doc_id, "limit": 100})
        if r.status_code != 200:
            self.problems.append(f"list units of {doc_id}: {r.status_code} {r.text[:200]}")
            return []
        return list(r.json()["units"])

    def searchable(self, unit: dict[str, Any], token: str) -> None:
        uid = unit["unit_id"]
        for mode, q, k in (("lexical", token, 10), ("dense", unit["text"], 3)):
            r = self.c.post("/v1/search", json={"q": q, "mode": mode, "top_k": k})
            ids = [h["unit_id"] for h in r.json().get("hits", [])] if r.status_code == 200 else []
            self.checked[f"search_{mode}"] += 1
            if uid not in ids:
                self.problems.append(f"{mode} search for {q[:40]!r} misses {uid} ({r.status_code})")

    def check_docs(self, model: Model) -> None:
        visible: dict[str, bool] = {}
        for doc in model.docs.values():
            units = self.units_of(doc.doc_id)
            state = _state(units)
            visible[doc.doc_id] = state is not None
            self.checked["docs"] += 1
            if state not in doc.states:
                self.problems.append(f"doc {doc.doc_id}: shows {state}, allowed {doc.states}")
            for text, uid in doc.uids.items():
                holds = [s is not None and text in s[0] for s in doc.states]
                # Present in every allowed state: must be there; in none: must be gone;
                # otherwise the GET must agree with what the listing shows.
                expect = all(holds) or (any(holds) and state is not None and text in state[0])
                r = self.c.get(f"/v1/units/{uid}")
                self.checked["unit_get"] += 1
                ok = (
                    (r.status_code == 200 and r.json()["text"] == text)
                    if expect
                    else (r.status_code == 404)
                )
                if not ok:
                    self.problems.append(f"GET unit {uid} ({doc.doc_id}): {r.status_code}")
            for u in units:
                self.searchable(u, u["text"].split()[0])
        for batch in model.unacked_batches:
            self.checked["unacked_batches"] += 1
            shown = sum(visible.get(d, False) for d in batch)
            if shown not in (0, len(batch)):
                self.problems.append(f"batch {batch} partially visible ({shown}/{len(batch)})")

    def check_objects(self, model: Model) -> None:
        for key, (sha, acked) in model.objects.items():
            r = self.c.get(f"/v1/objects/{key}")
            self.checked["objects"] += 1
            if r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == sha:
                continue
            if r.status_code == 404 and not acked:
                continue
            self.problems.append(f"object {key} (acked={acked}): {r.status_code}")

    def check_jobs(self, model: Model, retry_ok: bool) -> None:
        for job_id, kind in model.jobs.items():
            j = self.c.get(f"/v1/jobs/{job_id}").json()
            self.checked["jobs"] += 1
            want = "failed" if kind == "blank" else "done"
            timed_out = retry_ok and j["state"] == "failed" and "time" in (j["error"] or "")
            if j["state"] != want and not timed_out:
                self.problems.append(f"job {job_id} ({kind}): {j['state']} {j['error']}")
                continue
            units = self.units_of(j["doc_id"])
            if {u["unit_id"] for u in units} != set(j["unit_ids"]):
                self.problems.append(f"job {job_id}: doc Units differ from the job's output")
            for u in units:  # OCR text repeats words across pages: query all of it
                self.searchable(u, u["text"])
                self.checked["derived_units"] += 1


def check_catalog(db: Path, model: Model, problems: list[str], checked: Counter[str]) -> None:
    """Offline: jobs exactly once, quota released by failed jobs, the audit chain covers every
    change (Units created, acknowledged deletes, ACL changes, objects, queued jobs)."""
    conn = ro(db)
    try:
        for j in conn.execute("SELECT * FROM jobs"):
            checked["job_rows"] += 1
            units = conn.execute(
                "SELECT unit_id, content_hash, chunk_idx FROM units"
                " WHERE scope = ? AND doc_id = ? AND acl_owner = ?",
                (j["scope"], json.loads(j["payload"])["doc_id"], j["acl_owner"]),
            ).fetchall()
            keys = [(u["content_hash"], u["chunk_idx"]) for u in units]
            if j["state"] == "done":
                out = set(json.loads(j["result"])["unit_ids"])
                if {u["unit_id"] for u in units} != out or len(keys) != len(set(keys)):
                    problems.append(f"job {j['id']}: {len(units)} Units, result lists {len(out)}")
            elif j["state"] == "failed":
                doc = conn.execute(
                    "SELECT 1 FROM docs WHERE scope = ? AND doc_id = ? AND acl_owner = ?",
                    (j["scope"], json.loads(j["payload"])["doc_id"], j["acl_owner"]),
                ).fetchone()
                if units or doc:
                    problems.append(f"failed job {j['id']} left Units or its quota reservation")
            else:
                problems.append(f"job {j['id']} still {j['state']} after the restart")
        recs = [json.loads(r[0]) for r in conn.execute("SELECT record FROM audit_log ORDER BY seq")]
        checked["audit_records"] = len(recs)
        created = {u for r in recs for u in r.get("created", [])}
        removed = {u for r in recs for u in r.get("removed", [])}
        for (uid,) in conn.execute("SELECT unit_id FROM units"):
            checked["units_audited"] += 1
            if uid not in created:
                problems.append(f"Unit {uid} has no audit record of its creation")
        for uid in model.removed - removed:
            problems.append(f"acknowledged delete/replace of {uid} is not in the audit chain")
        acl = {(r.get("doc_id"), tuple(r.get("acl_groups", []))) for r in recs}
        for doc_id, groups in model.acl_acked:
            if (doc_id, groups) not in acl:
                problems.append(f"acknowledged ACL change of {doc_id} is not audited")
        objs = {(r.get("key"), r.get("sha256")) for r in recs if r.get("action") == "object.put"}
        for key, (sha, acked) in model.objects.items():
            if acked and (key, sha) not in objs:
                problems.append(f"acknowledged object {key} is not audited")
        queued = {r.get("job_id") for r in recs if r.get("action") == "ingest.queued"}
        for job_id in model.jobs:
            if job_id not in queued:
                problems.append(f"acknowledged job {job_id} is not audited")
        last = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
        head = conn.execute("SELECT value FROM kv WHERE key = 'audit_head'").fetchone()
        if last is not None and (head is None or head[0] != f"{last[0]}:{last[1]}"):
            problems.append(f"audit head {head and head[0]} != last record {tuple(last)}")
    finally:
        conn.close()


def audit_verify_cli(
    data: Path, env: dict[str, str], problems: list[str], spawn: Any, log: Path
) -> str | None:
    """``superchargedb audit verify`` (the operator's check, with the signed anchor)."""
    proc = spawn(["audit", "verify", "--data", str(data)], env, log)
    rc = proc.wait(120)
    out = log.read_text(errors="replace")
    try:
        report = json.loads(out[out.index("{") : out.rindex("}") + 1])
    except ValueError:
        report = {"ok": False, "output": out[-500:]}
    if rc != 0 or not report.get("ok"):
        problems.append(f"audit verify failed (rc {rc}): {report}")
        return None
    conn = ro(data / "catalog.db")
    try:
        row = conn.execute("SELECT hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    if row is not None and report.get("head") != row[0]:
        problems.append(f"audit verify head {report.get('head')} != log head {row[0]}")
    return str(report.get("head"))


def doctor(data: Path, embedder: Any, problems: list[str]) -> dict[str, Any]:
    """The doctor over the reopened data dir: SQLite integrity, FTS5, catalog ids == index ids."""
    from superchargedb.settings import Settings
    from superchargedb.wiring import open_service

    svc = open_service(Settings(data_dir=data, job_workers=0), embedder=embedder)
    try:
        report = svc.doctor()
        lex = embedded(svc).sync.lexical
        if lex is not None:  # the derived lexical index holds the catalog's ids too
            ids = {r[0] for r in embedded(svc).catalog.reader().execute("SELECT id FROM units")}
            keys = set(lex.keys().tolist())
            report["lexical_index"] = {
                "ok": ids == keys,
                "missing": sorted(ids - keys)[:10],
                "extra": sorted(keys - ids)[:10],
            }
            report["ok"] = report["ok"] and ids == keys
    finally:
        svc.close()
    if not report["ok"]:
        problems.append(f"doctor: {json.dumps(report)[:600]}")
    return {k: v.get("ok") for k, v in report.items() if isinstance(v, dict)}


def leaks(data: Path) -> dict[str, int]:
    """Space a crash left behind without losing anything: upload temp files, blobs no catalog
    row names, index temp files. Reported, not failed (nothing acknowledged depends on them)."""
    objects = data / "objects"
    on_disk = {p.name for p in objects.glob("??/??/*") if p.is_file()}
    conn = ro(data / "catalog.db")
    try:
        named = {r[0] for r in conn.execute("SELECT sha256 FROM objects")}
    finally:
        conn.close()
    return {
        "upload_tmp_files": sum(1 for p in (objects / "tmp").glob("*") if p.is_file()),
        "orphan_blobs": len(on_disk - named),
        "index_tmp_files": sum(1 for p in (data / "index").glob("*.tmp")),
    }
