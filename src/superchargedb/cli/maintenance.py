"""Maintenance commands: backup, restore, reindex (``doctor`` is in ``main.py``).

Each goes through the data dir's :class:`~superchargedb.storage.protocols_reads.Maintenance`
(built by the wiring), so the commands are the same on every backend (D-187).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import SCDBError

if TYPE_CHECKING:
    from ..storage.protocols_reads import BackupManifest

DATA = typer.Option(Path("./scdb-data"), "--data", help="Data directory")


def _fail(exc: SCDBError) -> None:
    typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
    raise typer.Exit(1)


def manifest_dict(m: BackupManifest) -> dict[str, Any]:
    """The manifest as ``manifest.json`` holds it (and ``backup`` prints it)."""
    head = None
    if m.audit_head_seq is not None:
        head = {"seq": m.audit_head_seq, "hash": m.audit_head_hash}
    return {
        "format": m.format,
        "created_at": m.created_at,
        "source": m.source,
        "units": m.units,
        "objects": m.objects,
        "model_id": m.model_id,
        "audit_head": head,
        "seconds": m.seconds,
    }


def register(app: typer.Typer) -> None:
    @app.command()
    def backup(dest: Path, data: Path = DATA) -> None:
        """Online, consistent backup (catalog snapshot + objects); safe while a server runs."""
        from ..settings import Settings
        from ..wiring import open_maintenance

        try:
            manifest = open_maintenance(Settings(data_dir=data)).backup(dest)
        except SCDBError as exc:
            _fail(exc)
        typer.echo(json.dumps(manifest_dict(manifest), indent=2))

    @app.command()
    def restore(src: Path, data: Path = DATA) -> None:
        """Restore a backup into an empty data dir, rebuild the index, verify the audit chain."""
        from ..auth.admin import OPERATOR
        from ..settings import Settings
        from ..wiring import open_maintenance, open_service

        settings = Settings(data_dir=data)
        try:
            manifest = open_maintenance(settings).restore(src)
        except SCDBError as exc:
            _fail(exc)
        svc = open_service(settings)
        try:
            chain = svc.audit_verify(OPERATOR)
            units = svc.counts.units_total()
        finally:
            svc.close()
        ok = chain["ok"] and units == manifest.units
        typer.echo(json.dumps({"ok": ok, "units": units, "audit": chain}, indent=2))
        raise typer.Exit(0 if ok else 1)

    @app.command()
    def reindex(
        data: Path = DATA,
        embedder: str = typer.Option(None, help="Embedder spec (default: SCDB_EMBEDDER)"),
        rederive: bool = typer.Option(
            False,
            help="also queue media derived before Units kept their words to be derived again"
            " (the server's or a worker's job runner does it)",
        ),
    ) -> None:
        """Re-embed every Unit with the configured model; the index is rebuilt on next start.
        With --rederive, media Units without word tables are queued to be derived again."""
        from tqdm import tqdm

        from ..models.embedder import make_embedder
        from ..settings import Settings
        from ..wiring import open_maintenance

        settings = Settings(data_dir=data)
        emb = make_embedder(
            embedder or settings.embedder,
            max_tokens=settings.embed_max_tokens,
            threads=settings.embed_threads,
            batch_size=settings.embed_batch_size,
        )
        maint = open_maintenance(settings)
        queued = 0
        with tqdm(unit="unit", desc=f"reindex -> {emb.model_id}") as bar:

            def step(done: int, total: int) -> None:
                bar.total = total
                bar.update(done)

            try:
                if rederive:
                    queued = maint.rederive()
                n = maint.reindex(emb, step)
            except SCDBError as exc:
                _fail(exc)
        out: dict[str, object] = {"reembedded": n, "model_id": emb.model_id}
        if rederive:
            out["rederive_queued"] = queued
        typer.echo(json.dumps(out))
