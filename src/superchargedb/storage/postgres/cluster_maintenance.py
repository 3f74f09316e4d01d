"""``backup``, ``restore``, ``reindex`` and ``rederive`` over a directory and its clusters
(D-277): each database with its own blobs, as ``PgMaintenance`` does for one, in a folder of
its own (``directory/``, ``<cluster>/``) under one ``manifest.json`` that sums them.

Each database's copy is one consistent snapshot; the databases are copied one after another,
not at one instant (a principal made during the backup may be in the directory's copy while a
Unit written meanwhile is in no cluster's). Restore needs every part: a cluster restored
without its directory has Units whose principals are gone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from ...errors import ConflictError, ValidationError
from ...models.embedder import Embedder
from ..protocols_reads import BackupManifest, Maintenance
from ..sqlite.backup import manifest_record
from .maintenance import FORMAT, PgMaintenance

DIRECTORY = "directory"


class ClusteredMaintenance:
    """``parts``: the directory first, then each cluster, with its own objects folder."""

    def __init__(self, parts: dict[str, PgMaintenance]) -> None:
        if DIRECTORY not in parts:
            raise ValidationError("a clustered backup needs the directory database")
        self.parts = parts

    def backup(self, dest: Path) -> BackupManifest:
        if dest.exists() and any(dest.iterdir()):
            raise ConflictError(f"backup destination {dest} is not empty")
        t0 = time.time()
        each = {name: m.backup(dest / name) for name, m in self.parts.items()}
        manifest = {
            "format": FORMAT,
            "backend": "postgresql-clusters",
            "created_at": int(t0 * 1000),
            "source": ", ".join(f"{n}: {m.source}" for n, m in each.items()),
            "units": sum(m.units for m in each.values()),
            "objects": sum(m.objects for m in each.values()),
            "model_id": next((m.model_id for m in each.values() if m.model_id), None),
            "audit_head": None,  # one per part, in each part's manifest
            "parts": list(each),
            "seconds": round(time.time() - t0, 3),
        }
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
        return manifest_record(manifest)

    def restore(self, src: Path) -> BackupManifest:
        path = src / "manifest.json"
        manifest = json.loads(path.read_text()) if path.exists() else {}
        if manifest.get("backend") != "postgresql-clusters":
            raise ValidationError(f"{src} is not a backup of a directory and its clusters")
        if sorted(manifest.get("parts", [])) != sorted(self.parts):
            raise ValidationError(
                f"the backup holds {manifest.get('parts')}, this deployment {list(self.parts)}"
            )
        for name, m in self.parts.items():
            m.restore(src / name)
        return manifest_record(manifest)

    def reindex(self, embedder: Embedder, progress: Callable[[int, int], None]) -> int:
        return sum(m.reindex(embedder, progress) for m in self.parts.values())

    def rederive(self) -> int:
        return sum(m.rederive() for m in self.parts.values())


_check: type[Maintenance] = ClusteredMaintenance  # mypy checks the class against the seam
