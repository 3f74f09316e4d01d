"""``Maintenance`` on PostgreSQL: online backup, restore and reindex of one store (D-243).

A PostgreSQL store is a database (by URL) plus the blob directory beside it (D-205); that pair is
what the embedded backend's data dir is. A backup is the database dumped by ``pg_dump`` (custom
format, ``catalog.pgdump``) in one snapshot that the manifest's figures are read in too (the
snapshot is exported by a ``REPEATABLE READ`` transaction and handed to ``pg_dump --snapshot``),
then the content-addressed blobs (immutable files: a superset of what the snapshot cites), then
``manifest.json`` in the embedded backend's format plus ``"backend": "postgresql"``. A restore
lays a backup into an empty database with ``pg_restore`` (refused with a 409 when the database
holds a schema or the blob directory holds files); opening the store then applies what the
outbox held. The client binaries are the server's own version's (``bin_dir``, the stack's
wheel): a dump is read by the same major version that wrote it.

A reindex re-embeds every Unit stored with another model, a batch a transaction; the HNSW
indexes follow each update, so nothing is rebuilt afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict

from ...errors import ConflictError, UnavailableError, ValidationError
from ...models.embedder import Embedder
from ..protocols_reads import BackupManifest, Maintenance
from ..sqlite.backup import manifest_record
from . import rls

FORMAT = 1
DUMP = "catalog.pgdump"
BATCH = 64


def _empty_or_missing(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


class PgMaintenance:
    def __init__(self, url: str, objects_dir: Path, bin_dir: Path) -> None:
        self.url = url
        self.objects = objects_dir
        self.bin_dir = bin_dir

    # -- the client binaries, the password passed in their environment (never argv) ---------------
    def _env(self) -> dict[str, str]:
        info = conninfo_to_dict(self.url)
        env = dict(os.environ)
        names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE"}
        for k, var in {**names, "password": "PGPASSWORD"}.items():
            if info.get(k) is not None:
                env[var] = str(info[k])
        return env

    def _source(self) -> str:
        info = conninfo_to_dict(self.url)
        return (
            f"postgresql://{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"
        )

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin_dir / tool), *args],
            env=self._env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    # -- Maintenance ------------------------------------------------------------------------
    def backup(self, dest: Path) -> BackupManifest:
        if not _empty_or_missing(dest):
            raise ConflictError(f"backup destination {dest} is not empty")
        dest.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        with psycopg.connect(self.url) as conn:  # one transaction: the snapshot pg_dump reads
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if not _has_schema(conn):
                raise ValidationError("the database holds no store to back up")
            snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()
            units = conn.execute("SELECT count(*) FROM units").fetchone()
            model = conn.execute("SELECT model_id FROM units LIMIT 1").fetchone()
            head = conn.execute(
                "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            assert snapshot is not None and units is not None
            self._run(
                "pg_dump",
                "--format=custom",
                "--no-owner",
                "--no-privileges",
                f"--snapshot={snapshot[0]}",
                f"--file={dest / DUMP}",
            )
        n_objects = 0
        if self.objects.is_dir():
            for f in self.objects.rglob("*"):
                if f.is_file() and not f.is_symlink():
                    target = dest / "objects" / f.relative_to(self.objects)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, target)
                    n_objects += 1
        manifest = {
            "format": FORMAT,
            "backend": "postgresql",
            "created_at": int(t0 * 1000),
            "source": self._source(),
            "units": int(units[0]),
            "objects": n_objects,
            "model_id": model[0] if model else None,
            "audit_head": {"seq": int(head[0]), "hash": str(head[1])} if head else None,
            "seconds": round(time.time() - t0, 3),
        }
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
        return manifest_record(manifest)

    def restore(self, src: Path) -> BackupManifest:
        path = src / "manifest.json"
        if not path.exists() or not (src / DUMP).exists():
            raise ValidationError(f"{src} is not a PostgreSQL backup (no manifest.json / {DUMP})")
        manifest = json.loads(path.read_text())
        if manifest.get("format") != FORMAT or manifest.get("backend") != "postgresql":
            raise ValidationError(f"unsupported backup format {manifest.get('format')}")
        with psycopg.connect(self.url, autocommit=True) as conn:
            if _has_schema(conn):
                raise ConflictError("the restore target database is not empty")
        if not _empty_or_missing(self.objects):
            raise ConflictError(f"restore target {self.objects} is not empty")
        self._roles()  # the policies in the dump name the tenant role
        self._run(
            "pg_restore",
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            "--single-transaction",
            f"--dbname={conninfo_to_dict(self.url).get('dbname', '')}",
            str(src / DUMP),
        )
        self._roles()  # the tenant role's grants on the restored tables
        if (src / "objects").is_dir():
            shutil.copytree(src / "objects", self.objects, dirs_exist_ok=True)
        return manifest_record(manifest)

    def _roles(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(rls.restored_sql().encode())

    def reindex(self, embedder: Embedder, progress: Callable[[int, int], None]) -> int:
        with psycopg.connect(self.url, autocommit=True) as conn:
            register_vector(conn)
            if not _has_schema(conn):
                raise ValidationError("the database holds no store to reindex")
            dim = conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
            if dim is not None and int(dim[0]) != embedder.dim:
                raise ValidationError(
                    f"the database holds {dim[0]}-d vectors; {embedder.model_id} makes"
                    f" {embedder.dim}-d ones (a new database is needed)"
                )
            row = conn.execute(
                "SELECT count(*) FROM units WHERE model_id != %s", (embedder.model_id,)
            ).fetchone()
            total = int(row[0]) if row else 0
            progress(0, total)
            done, last = 0, 0
            while True:
                rows = conn.execute(
                    "SELECT id, text FROM units WHERE model_id != %s AND id > %s"
                    " ORDER BY id LIMIT %s",
                    (embedder.model_id, last, BATCH),
                ).fetchall()
                if not rows:
                    break
                vecs = embedder.embed([str(r[1]) for r in rows])
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(
                        "UPDATE units SET embedding = %s, model_id = %s WHERE id = %s",
                        [
                            (HalfVector(np.asarray(v, dtype=np.float32)), embedder.model_id, r[0])
                            for r, v in zip(rows, vecs, strict=True)
                        ],
                    )
                last = int(rows[-1][0])
                done += len(rows)
                progress(done, total)
            conn.execute("UPDATE meta SET value = %s WHERE key = 'model_id'", (embedder.model_id,))
        return done

    def rederive(self) -> int:
        # The embedded backend's media Units predate their word tables (D-215); a store on
        # PostgreSQL was created with them, so it has nothing to derive again yet. Refused by
        # name rather than answered 0, until PostgreSQL stores can be migrated from old ones.
        raise UnavailableError("reindex --rederive is for embedded data dirs; not on PostgreSQL")


def _has_schema(conn: psycopg.Connection[Any]) -> bool:
    """Whether the database holds a store (or any table of its own)."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = 'public')"
    ).fetchone()
    return bool(row and row[0])


_check: type[Maintenance] = PgMaintenance  # mypy checks the class against the seam
