"""The PostgreSQL store's maintenance beyond the contract's checks (D-243): a backup taken under
concurrent writes is one snapshot (the manifest's figures and the dump agree), and a reindex
re-embeds with the real model what another model stored, in place."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

import pg_stack
from superchargedb.errors import ValidationError
from superchargedb.models.embedder import Embedder
from superchargedb.readfilter import ReadFilter
from superchargedb.storage.protocols import UnitRecord

if pg_stack.available():
    pytest.skip(pg_stack.available() or "", allow_module_level=True)

from superchargedb.stack.postgres import bin_dir  # noqa: E402
from superchargedb.storage.postgres.backend import PgBackend  # noqa: E402
from superchargedb.storage.postgres.maintenance import PgMaintenance  # noqa: E402

TEXTS = [
    "The deployment pipeline runs the integration tests before every release.",
    "Database backups are kept for thirty days and verified weekly.",
    "Each tenant has its own rate limits per API key.",
    "Phishing simulations are sent to every employee twice a year.",
    "The espresso machine on the third floor needs descaling.",
    "Glacier surveys measure the ice thickness with ground radar.",
    "Invoices are due within thirty days of receipt.",
    "The on-call engineer acknowledges a page within five minutes.",
]
RF = ReadFilter("alice", ("acme",), frozenset(), ("text",))


def unit(i: int, text: str = "") -> UnitRecord:
    return UnitRecord(
        unit_id=f"u{i}",
        scope="acme",
        doc_id=f"d{i}",
        plane="text",
        modality="text",
        text=text or f"note number {i}",
        acl_owner="alice",
        acl_groups=(),
        content_hash=hashlib.sha256(str(i).encode()).hexdigest(),
        created_at=1,
    )


def open_(path: Path, dim: int, model_id: str) -> PgBackend:
    return PgBackend.open(
        pg_stack.database(path),
        dim=dim,
        model_id=model_id,
        audit_key=bytes(32),
        objects_dir=path / "objects",
    )


def maintenance(path: Path) -> PgMaintenance:
    return PgMaintenance(pg_stack.database(path), path / "objects", bin_dir())


def test_a_backup_under_concurrent_writes_is_one_snapshot(tmp_path: Path) -> None:
    b = open_(tmp_path / "store", 8, "m")
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            with b.write() as tx:
                tx.units.insert(unit(i), np.ones(8, dtype=np.float32))
                tx.audit.append("writer", "unit.create", {"i": i})
            written.append(i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        while len(written) < 20:  # writes are under way when the backup starts
            threading.Event().wait(0.01)
        m = maintenance(tmp_path / "store").backup(tmp_path / "backup")
        n_after = len(written)
    finally:
        stop.set()
        t.join()
        b.close()
    assert m.units >= 20 and m.audit_head_seq == m.units  # one record per Unit, same snapshot
    assert m.source.startswith("postgresql://") and "@" not in m.source  # no password
    assert maintenance(tmp_path / "restored").restore(tmp_path / "backup") == m
    r = open_(tmp_path / "restored", 8, "m")
    try:
        total = r.counts.units_total()
        assert total == m.units and total <= n_after + 1
        report = r.audit.verify()
        assert report.ok and report.records == m.units
        assert r.audit_trail.verify_chain().head == m.audit_head_hash
    finally:
        r.close()


def test_reindex_re_embeds_what_another_model_stored(tmp_path: Path, embedder: Embedder) -> None:
    b = open_(tmp_path / "store", embedder.dim, "an-older-model")
    rng = np.random.default_rng(3)
    try:
        with b.write() as tx:  # the older model's vectors: nothing like the real model's
            for i, text in enumerate(TEXTS):
                tx.units.insert(unit(i, text), rng.standard_normal(embedder.dim))
    finally:
        b.close()
    seen: list[tuple[int, int]] = []
    m = maintenance(tmp_path / "store")
    assert m.reindex(embedder, lambda done, total: seen.append((done, total))) == len(TEXTS)
    assert seen[0] == (0, len(TEXTS)) and seen[-1] == (len(TEXTS), len(TEXTS))
    assert m.reindex(embedder, lambda done, total: None) == 0  # nothing stale is left
    b = open_(tmp_path / "store", embedder.dim, embedder.model_id)
    try:
        for i, text in enumerate(TEXTS):
            top = b.vectors.search("text", embedder.embed_query(text), 1, RF)
            assert [h.unit_id for h in top] == [f"u{i}"], text
    finally:
        b.close()
    open_(tmp_path / "small", 8, "m").close()  # a store of 8-d vectors
    with pytest.raises(ValidationError, match="8-d vectors"):
        maintenance(tmp_path / "small").reindex(embedder, lambda d, t: None)
    with pytest.raises(ValidationError, match="no store"):
        maintenance(tmp_path / "none").reindex(embedder, lambda d, t: None)
